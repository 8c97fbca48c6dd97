// Package quantile is the one rule by which iotap turns a percentile into a value: the
// rule of SQL's percentile_disc and DuckDB's quantile_disc. The p-th percentile (0..100) of
// n values is the value of rank ⌈p/100·n⌉ (at least 1) in increasing order: the first value
// whose cumulative share reaches p. So the report's p99 of 198 calls is the 197th fastest,
// the value an analyst's engine gives for the same calls.
//
// The histograms iotap keeps (HDR, 3 significant digits) return, for a rank, the highest
// value equivalent to the order statistic of that rank: never below it, and less than
// 1/1024 of it above (exact below 2048 ns).
package quantile

import "math/bits"

// scale is the resolution of a percentile: a millionth of a percent, so that 99.9 is
// exactly 99,900,000 of them and the rank needs no floating-point arithmetic.
const scale = 1_000_000

// Rank returns the rank (1..n) of the p-th percentile (0..100) of n values: ⌈p/100·n⌉, at
// least 1; 0 when n is 0.
func Rank(p float64, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	switch {
	case !(p > 0): // 0, negative or NaN: the smallest
		return 1
	case p >= 100:
		return n
	}
	pm := uint64(p*scale + 0.5) // p in millionths of a percent
	hi, lo := bits.Mul64(pm, n)
	r, rem := bits.Div64(hi, lo, 100*scale) // hi < 100·scale: pm ≤ 100·scale
	if rem != 0 {
		r++
	}
	return min(max(r, 1), n)
}

// Hist is an HDR histogram (github.com/HdrHistogram/hdrhistogram-go).
type Hist interface {
	TotalCount() int64
	ValueAtPercentile(p float64) int64
}

// Value returns the p-th percentile (0..100) of h by the rule of Rank, 0 when h is empty.
func Value(h Hist, p float64) int64 {
	n := h.TotalCount()
	if n <= 0 {
		return 0
	}
	r := Rank(p, uint64(n))
	// The histogram takes the rank round(q/100·n); q = 100·r/n gives r exactly (the
	// rounding absorbs the division's error).
	return h.ValueAtPercentile(100 * float64(r) / float64(n))
}
