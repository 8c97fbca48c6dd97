// Package loghist is the log-linear bucketing of iotap's latency histograms: with 2^k
// buckets per power of two, values below 2^k are buckets of their own and each power of
// two above is cut into 2^k buckets of equal width, so a bucket is at most 1/2^k of its
// values wide.
//
// The histograms differ in resolution (k), unit and counters (atomic where many
// goroutines add at once), not in bucketing: the record summary's (internal/tally), the
// per-interval p99's (trace/stats.LogHist), the replay summary's, and the recording-cost
// median's (fusefs). Each keeps its own counters and quantile estimate over these buckets.
package loghist

import "math/bits"

// Bucket returns the bucket of v with 2^k buckets per power of two (k < 64).
func Bucket(v uint64, k uint) int {
	if v < 1<<k {
		return int(v)
	}
	e := uint(bits.Len64(v)) - 1 // v is in [2^e, 2^(e+1))
	return int(e-k+1)<<k + int(v>>(e-k)&(1<<k-1))
}

// Low returns the smallest value of bucket i.
func Low(i int, k uint) uint64 {
	if i < 1<<k {
		return uint64(i)
	}
	e := uint(i>>k) + k - 1
	return (1<<k + uint64(i)&(1<<k-1)) << (e - k)
}

// High returns the largest value of bucket i.
func High(i int, k uint) uint64 {
	if i < 1<<k {
		return uint64(i)
	}
	e := uint(i>>k) + k - 1
	return Low(i, k) + 1<<(e-k) - 1
}

// Buckets returns the number of buckets that hold every uint64.
func Buckets(k uint) int { return int(65-k) << k }
