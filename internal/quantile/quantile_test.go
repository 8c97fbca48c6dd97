package quantile

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// TestRank: the ranks DuckDB's quantile_disc takes (checked against DuckDB 1.5 on 1..n:
// quantile_disc(x, 0.99) over 1..198 is 197, quantile_disc(x, 0.999) over 1..1000 is 999 and
// over 1..1001 is 1000), where round(p·n) differs.
func TestRank(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    float64
		n    uint64
		want uint64
	}{
		{name: "empty", p: 50, n: 0, want: 0},
		{name: "p0", p: 0, n: 10, want: 1},
		{name: "negative", p: -3, n: 10, want: 1},
		{name: "p100", p: 100, n: 10, want: 10},
		{name: "over", p: 120, n: 10, want: 10},
		{name: "p50-even", p: 50, n: 4, want: 2},
		{name: "p25", p: 25, n: 4, want: 1},
		{name: "p99-198", p: 99, n: 198, want: 197}, // round: 196
		{name: "p50-198", p: 50, n: 198, want: 99},  // exact
		{name: "p90-198", p: 90, n: 198, want: 179}, // round: 178
		{name: "p99.9-198", p: 99.9, n: 198, want: 198},
		{name: "p99.9-1000", p: 99.9, n: 1000, want: 999}, // exact: no float error
		{name: "p99.9-1001", p: 99.9, n: 1001, want: 1000},
		{name: "p99-1", p: 99, n: 1, want: 1},
		{name: "p1-1", p: 1, n: 1, want: 1},
		{name: "huge", p: 99, n: 1 << 62, want: 4565569158243114025}, // ⌈99·2^62/100⌉
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Rank(tc.p, tc.n); got != tc.want {
				t.Errorf("Rank(%v, %d) = %d, want %d", tc.p, tc.n, got, tc.want)
			}
		})
	}
}

// TestValue: the histogram's percentile is the value of Rank's rank in the sorted values,
// within the histogram's resolution (never below, less than 1/1024 above).
func TestValue(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 7, 100, 198, 1000, 1001, 5000} {
		h := hdrhistogram.New(1, 3600e9, 3)
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = 1000 + rng.Int64N(10_000_000)
			if err := h.RecordValue(vals[i]); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(vals)
		for _, p := range []float64{0, 50, 90, 99, 99.9, 100} {
			want := vals[Rank(p, uint64(n))-1]
			got := Value(h, p)
			if got < want || float64(got-want) > float64(want)/1024 {
				t.Errorf("n=%d p%v: %d, the value of rank %d is %d", n, p, got, Rank(p, uint64(n)), want)
			}
		}
	}
	if v := Value(hdrhistogram.New(1, 10, 1), 99); v != 0 {
		t.Errorf("empty: %d", v)
	}
}
