package fusefs

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/iotap/iotap/trace"
)

// LiveStats is a snapshot of the layer's counters since the mount, plus the latency of the
// last interval (the ops completed since the previous Stats call).
type LiveStats struct {
	Ops          uint64 // requests served
	Errors       uint64 // requests answered with an errno
	BytesRead    uint64
	BytesWritten uint64
	IntervalOps  uint64        // requests completed in the last interval
	IntervalP99  time.Duration // 99th percentile of the interval (upper bound of a power-of-two bucket)
	IntervalMax  time.Duration // upper bound of the slowest bucket of the interval

	// The layer's measurement of its own cost, summed over all requests: the time from its
	// entry to the end of its work (the reply to the kernel follows), and the part of that
	// which was the layer's own (timing, attribution, recording) rather than the bridge's
	// and the backend's.
	InLayer, Self time.Duration
	// Caller threads looked up in /proc (in the path of their first request), and the time
	// spent doing it, part of Self.
	Threads uint64
	Resolve time.Duration
}

// Cost returns the layer's cost as the trace footer stores it.
func (s LiveStats) Cost() trace.LayerCost {
	return trace.LayerCost{Requests: s.Ops, InLayer: s.InLayer, Self: s.Self, Threads: s.Threads, Resolve: s.Resolve}
}

const histBuckets = 64

// liveStats is updated by every request with atomics only; Stats rotates the interval histogram.
type liveStats struct {
	ops, errs, rbytes, wbytes atomic.Uint64
	inLayer, self             atomic.Uint64 // ns: time requests spent in the layer, and its own work's
	threads, resolve          atomic.Uint64 // callers looked up in /proc, and ns spent doing it
	cur                       atomic.Uint32
	hist                      [2][histBuckets]atomic.Uint64 // count per bits.Len64(ns)
}

func (s *liveStats) op(dur int64, failed bool) {
	s.ops.Add(1)
	if failed {
		s.errs.Add(1)
	}
	if dur < 0 {
		dur = 0
	}
	s.hist[s.cur.Load()&1][bits.Len64(uint64(dur))].Add(1)
}

// snapshot returns the counters and the closing interval's percentiles, and starts a new
// interval. Requests racing with the rotation may land in either interval.
func (s *liveStats) snapshot() LiveStats {
	ls := LiveStats{
		Ops: s.ops.Load(), Errors: s.errs.Load(),
		BytesRead: s.rbytes.Load(), BytesWritten: s.wbytes.Load(),
		InLayer: time.Duration(s.inLayer.Load()), Self: time.Duration(s.self.Load()),
		Threads: s.threads.Load(), Resolve: time.Duration(s.resolve.Load()),
	}
	old := s.cur.Add(1) - 1
	h := &s.hist[old&1]
	var counts [histBuckets]uint64
	for i := range h {
		counts[i] = h[i].Swap(0)
		ls.IntervalOps += counts[i]
	}
	if ls.IntervalOps == 0 {
		return ls
	}
	want := (ls.IntervalOps*99 + 99) / 100
	var cum uint64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		cum += c
		upper := time.Duration(1) << i // bucket i holds values < 2^i
		if cum >= want && ls.IntervalP99 == 0 {
			ls.IntervalP99 = upper
		}
		ls.IntervalMax = upper
	}
	return ls
}
