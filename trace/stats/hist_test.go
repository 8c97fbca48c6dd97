package stats

import (
	"math/rand/v2"
	"testing"
)

// TestHistBufLayout: histBuf's counts index is the library's for every value of the
// histogram's range (each power of two, its neighbours and random values), and its table
// is as long as the library's counts.
func TestHistBufLayout(t *testing.T) {
	if n := len(NewHist().Export().Counts); n != histCountsLen {
		t.Fatalf("the library's histogram has %d counts, histBuf %d", n, histCountsLen)
	}
	vals := []int64{0, 1, 2, 1023, 1024, 2047, 2048, 2049, 4095, 4096, HistHighest - 1, HistHighest}
	for b := 0; b < 42; b++ {
		vals = append(vals, 1<<b-1, 1<<b, 1<<b+1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		vals = append(vals, rng.Int64N(HistHighest+1), rng.Int64N(1<<(1+rng.IntN(42))))
	}
	// Each value alone in a histogram of its own would take one Export each: count them
	// all, by the library and by histIndex, and compare the tables once.
	h := NewHist()
	own := make([]int64, histCountsLen)
	for _, v := range vals {
		v = clampNs(v)
		_ = h.RecordValue(v)
		i := histIndex(v)
		own[i]++
		if lo := histValue(i); lo > v || histIndex(lo) != i || (lo > 0 && histIndex(lo-1) == i) {
			t.Fatalf("lowest value of index %d: %d (for %d)", i, lo, v)
		}
	}
	for i, c := range h.Export().Counts {
		if c != own[i] {
			t.Fatalf("count %d (from %d): %d, the library's %d", i, histValue(i), own[i], c)
		}
	}
}

// TestHistBufSame: a histogram filled through a histBuf equals one that recorded every
// value, with counts past the table's 16 bits and values out of range (clamped).
func TestHistBufSame(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	direct, viaBuf := NewHist(), NewHist()
	var b histBuf
	add := func(v int64) {
		record(direct, v)
		b.add(viaBuf, v)
	}
	for range 300_000 {
		add(rng.Int64N(1 << (1 + rng.IntN(45))))
	}
	for range 3*histBufMax + 7 {
		add(25_000) // one bucket, past a 16-bit count three times
	}
	add(-5)
	add(2 * HistHighest)
	b.flush()
	if !direct.Equals(viaBuf) {
		t.Fatalf("histograms differ: %d values against %d; p50 %d, %d; p99.9 %d, %d", direct.TotalCount(), viaBuf.TotalCount(),
			direct.ValueAtQuantile(50), viaBuf.ValueAtQuantile(50), direct.ValueAtQuantile(99.9), viaBuf.ValueAtQuantile(99.9))
	}
	b.flush() // a second flush adds nothing
	if !direct.Equals(viaBuf) {
		t.Fatal("a second flush changed the histogram")
	}
}
