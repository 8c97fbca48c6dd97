package stats

import (
	"math/bits"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/iotap/iotap/internal/loghist"
	"github.com/iotap/iotap/internal/quantile"
)

// Histogram range, in nanoseconds: 1 ns to 1 h with 3 significant digits. The lowest
// discernible value sets the histogram's unit: with 1 ns every value keeps three
// significant digits (values below 2048 ns are exact), where 1 µs would make the unit
// 512 ns and round every latency below a millisecond to a multiple of it. A histogram is
// a fixed array of about 264 KiB (NewHist().ByteSize(); TestPercentilesResolution bounds
// it).
const (
	HistLowest  int64 = 1
	HistHighest int64 = 3_600_000_000_000 // 1 h
	HistDigits        = 3
)

// NewHist returns an empty latency histogram with the package's geometry.
func NewHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(HistLowest, HistHighest, HistDigits)
}

// clampNs brings a duration into the histogram's range, so that recording never fails
// (and never allocates an error).
func clampNs(ns int64) int64 {
	if ns < 0 {
		return 0
	}
	if ns > HistHighest {
		return HistHighest
	}
	return ns
}

func record(h *hdrhistogram.Histogram, ns int64) {
	_ = h.RecordValue(clampNs(ns))
}

// histBuf counts durations for a latency histogram in a table of 16-bit counts laid out as
// the histogram's own (64-bit) counts, and adds them to the histogram when flushed, or
// when a count would overflow. The table is a quarter of the histogram's size, so the
// part a stream of events touches stays in cache, and a value costs no call. A
// histogram's figures depend on its counts alone, so they are the same as if every value
// had been recorded into it, once flush has run.
type histBuf struct {
	h *hdrhistogram.Histogram // where the counts go (nil: nothing counted yet)
	c []uint16                // by the histogram's counts index; nil until the first value
}

// The geometry of NewHist's histograms, from HistLowest, HistHighest and HistDigits: a
// unit of 1 ns (values below 2048 ns have a bucket each), then buckets of 1024 counts, each
// covering a power of two. TestHistBufLayout checks them against the library.
const (
	histSubHalfBits = 10                          // log2 of half the counts per bucket
	histSubMask     = 1<<(histSubHalfBits+1) - 1  // values below this have a count each
	histCountsLen   = (32 + 1) << histSubHalfBits // counts of a histogram up to HistHighest
	histBufMax      = 1<<16 - 1                   // a count of the table that must go to the histogram
)

// histIndex returns the counts index of ns (within the histogram's range), as
// hdrhistogram's countsIndexFor computes it.
func histIndex(ns int64) int {
	b := 64 - bits.LeadingZeros64(uint64(ns)|histSubMask) - (histSubHalfBits + 1)
	return (b+1)<<histSubHalfBits + int(ns>>b) - 1<<histSubHalfBits
}

// histValue returns the lowest value whose counts index is i.
func histValue(i int) int64 {
	b := i>>histSubHalfBits - 1
	if b < 0 {
		return int64(i)
	}
	return int64(i&(1<<histSubHalfBits-1)+1<<histSubHalfBits) << b
}

// add counts ns (clamped into range) for h, which must be the same histogram at every
// call until flush.
func (b *histBuf) add(h *hdrhistogram.Histogram, ns int64) {
	if b.c == nil {
		b.h, b.c = h, make([]uint16, histCountsLen)
	}
	i := histIndex(clampNs(ns))
	c := &b.c[i]
	if *c == histBufMax {
		_ = b.h.RecordValues(histValue(i), histBufMax)
		*c = 0
	}
	*c++
}

// flush adds the counts to the histogram and empties the table.
func (b *histBuf) flush() {
	for i, n := range b.c {
		if n != 0 {
			_ = b.h.RecordValues(histValue(i), int64(n))
			b.c[i] = 0
		}
	}
}

func mergeHist(dst **hdrhistogram.Histogram, src *hdrhistogram.Histogram) {
	if src == nil || src.TotalCount() == 0 {
		return
	}
	if *dst == nil {
		*dst = NewHist()
	}
	(*dst).Merge(src)
}

// LogHist is a small log-linear latency histogram (package loghist) of microseconds, 8
// buckets per power of two: one per microsecond below 8 µs (the first holds everything
// under 1 µs), then buckets at most an eighth of their values wide, up to the last, which
// starts at about 4.47 h and holds everything longer. A quantile is the upper bound of its
// bucket: within 12.5 % above the value from 8 µs up, within 1 µs below. It costs 1 KiB,
// which is why the per-interval series uses it instead of an HDR histogram.
type LogHist [NumLogBuckets]uint32

// NumLogBuckets is the number of buckets of a LogHist.
const NumLogBuckets = 256

// logBits sets LogHist's resolution: 2^logBits buckets per power of two (package loghist).
const logBits = 3

func logBucket(ns int64) int {
	us := uint64(0)
	if ns > 0 {
		us = uint64(ns) / 1000
	}
	return min(loghist.Bucket(us, logBits), NumLogBuckets-1)
}

// logBucketUpper returns the smallest value in ns above bucket i (its exclusive upper bound).
func logBucketUpper(i int) int64 {
	return int64(loghist.High(i, logBits)+1) * 1000
}

// Add records one duration.
func (h *LogHist) Add(ns int64) { h[logBucket(ns)]++ }

// Merge adds o's counts to h.
func (h *LogHist) Merge(o *LogHist) {
	for i := range h {
		h[i] += o[i]
	}
}

// Count returns the number of recorded values.
func (h *LogHist) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	return n
}

// Quantile returns the upper bound (ns) of the bucket holding quantile q (0..1), the value
// of rank ⌈q·n⌉ (package internal/quantile), or 0 when h is empty.
func (h *LogHist) Quantile(q float64) int64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := quantile.Rank(q*100, n)
	var c uint64
	for i, v := range h {
		c += uint64(v)
		if c >= rank {
			return logBucketUpper(i)
		}
	}
	return logBucketUpper(NumLogBuckets - 1)
}
