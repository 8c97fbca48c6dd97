package stats

import (
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
