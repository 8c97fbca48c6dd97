// Package tally keeps running per-operation totals (count, time, bytes) and coarse latency
// histograms that many goroutines update at once with atomic adds. It feeds the live stats
// line and the end-of-run summary of `iotap record`; the full statistics come from reading
// the trace (package trace/stats).
//
// The histogram is log-linear (package loghist): 8 buckets per power of two, so a quantile is within 12.5% of
// the true value. Updating costs a handful of uncontended atomic adds and never allocates.
package tally

import (
	"sort"
	"sync/atomic"
	"time"

	"github.com/iotap/iotap/internal/loghist"
	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/trace"
)

// subBits sets the histogram's resolution: 2^subBits buckets per power of two (see
// package loghist).
const (
	subBits    = 3
	numBuckets = (65 - subBits) << subBits // loghist.Buckets(subBits), as a constant
)

type opTally struct {
	count   atomic.Uint64
	errors  atomic.Uint64
	dur     atomic.Uint64 // ns
	bytes   atomic.Uint64
	max     atomic.Uint64 // ns
	min     atomic.Uint64 // ns + 1 (0: none yet)
	buckets [numBuckets]atomic.Uint64
}

func storeMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func storeMin(a *atomic.Uint64, v uint64) {
	v++
	for {
		old := a.Load()
		if (old != 0 && v >= old) || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// Tally is a set of running per-op totals. The zero value is ready to use; it must not be
// copied after first use.
type Tally struct {
	ops [trace.NumOps]opTally
}

// Add accounts one event. It is safe for concurrent use and does not allocate.
func (t *Tally) Add(ev *trace.Event) {
	if !ev.Op.Valid() {
		return
	}
	o := &t.ops[ev.Op]
	o.count.Add(1)
	d := uint64(max(ev.Dur, 0))
	o.dur.Add(d)
	o.buckets[loghist.Bucket(d, subBits)].Add(1)
	storeMax(&o.max, d)
	storeMin(&o.min, d)
	if ev.Errno != 0 {
		o.errors.Add(1)
	} else if n := dataBytes(ev); n > 0 {
		o.bytes.Add(n)
	}
}

// dataBytes is the bytes a successful event moved: its Ret for read, write and
// copy_file_range, else 0.
func dataBytes(ev *trace.Event) uint64 {
	if ev.Ret > 0 && (ev.Op == trace.OpRead || ev.Op == trace.OpWrite || ev.Op == trace.OpCopyFileRange) {
		return uint64(ev.Ret)
	}
	return 0
}

// batchSums are one op's totals over a batch.
type batchSums struct{ count, errors, dur, bytes, max, min uint64 }

// AddBatch accounts a batch of events (a trace.WriterOptions.Observe function). It sums
// the batch per op first: an event then costs one atomic add (its histogram bucket) instead
// of four adds and two compare-and-swap loops, on the trace writer's goroutine, which
// shares the CPU with the FUSE requests. Safe for concurrent use; it does not allocate.
func (t *Tally) AddBatch(evs []trace.Event) {
	var sums [trace.NumOps]batchSums
	for i := range evs {
		ev := &evs[i]
		if !ev.Op.Valid() {
			continue
		}
		d := uint64(max(ev.Dur, 0))
		t.ops[ev.Op].buckets[loghist.Bucket(d, subBits)].Add(1)
		s := &sums[ev.Op]
		if s.count == 0 || d < s.min {
			s.min = d
		}
		s.max = max(s.max, d)
		s.count++
		s.dur += d
		if ev.Errno != 0 {
			s.errors++
		} else {
			s.bytes += dataBytes(ev)
		}
	}
	for op := range sums {
		s := &sums[op]
		if s.count == 0 {
			continue
		}
		o := &t.ops[op]
		o.count.Add(s.count)
		o.dur.Add(s.dur)
		if s.errors > 0 {
			o.errors.Add(s.errors)
		}
		if s.bytes > 0 {
			o.bytes.Add(s.bytes)
		}
		storeMax(&o.max, s.max)
		storeMin(&o.min, s.min)
	}
}

// OpStats is a snapshot of one op's totals.
type OpStats struct {
	Op      trace.Op
	Count   uint64
	Errors  uint64
	Dur     time.Duration // total time in the op
	Bytes   uint64        // bytes read or written (read, write, copy_file_range)
	Min     time.Duration // fastest (since the start, also in a Sub)
	Max     time.Duration // slowest (since the start, also in a Sub)
	buckets []uint64
}

// Quantile returns the q-quantile (0..1) of the op's latency, estimated at the middle of
// its bucket, or 0 for an op never seen.
// The estimate is clamped to [Min, Max].
func (s *OpStats) Quantile(q float64) time.Duration {
	v := bucketQuantile(s.buckets, s.Count, q)
	if s.Max > 0 {
		v = min(max(v, s.Min), s.Max)
	}
	return v
}

func bucketQuantile(b []uint64, n uint64, q float64) time.Duration {
	if n == 0 || len(b) == 0 {
		return 0
	}
	rank := quantile.Rank(q*100, n)
	var seen uint64
	for i, c := range b {
		seen += c
		if seen >= rank {
			lo, hi := loghist.Low(i, subBits), loghist.High(i, subBits)
			return time.Duration(lo + (hi-lo)/2)
		}
	}
	return 0
}

// Snapshot is a copy of a Tally at one moment.
type Snapshot struct {
	At  time.Time
	Ops []OpStats // ops with Count > 0, in Op order
}

// Snapshot copies the current totals. Concurrent Adds may be partly included.
func (t *Tally) Snapshot() Snapshot {
	s := Snapshot{At: time.Now()}
	for i := range t.ops {
		o := &t.ops[i]
		n := o.count.Load()
		if n == 0 {
			continue
		}
		st := OpStats{Op: trace.Op(i), Count: n, Errors: o.errors.Load(), Dur: time.Duration(o.dur.Load()), Bytes: o.bytes.Load(), buckets: make([]uint64, numBuckets)}
		st.Max = time.Duration(o.max.Load())
		if m := o.min.Load(); m > 0 {
			st.Min = time.Duration(m - 1)
		}
		for j := range o.buckets {
			st.buckets[j] = o.buckets[j].Load()
		}
		s.Ops = append(s.Ops, st)
	}
	return s
}

// Sub returns the activity between prev and s (s taken later).
func (s Snapshot) Sub(prev Snapshot) Snapshot {
	out := Snapshot{At: s.At}
	old := map[trace.Op]*OpStats{}
	for i := range prev.Ops {
		old[prev.Ops[i].Op] = &prev.Ops[i]
	}
	for _, cur := range s.Ops {
		d := cur
		d.buckets = append([]uint64(nil), cur.buckets...)
		if p := old[cur.Op]; p != nil {
			d.Count -= p.Count
			d.Errors -= p.Errors
			d.Dur -= p.Dur
			d.Bytes -= p.Bytes
			for j := range d.buckets {
				d.buckets[j] -= p.buckets[j]
			}
		}
		if d.Count > 0 {
			out.Ops = append(out.Ops, d)
		}
	}
	return out
}

// Totals sums a snapshot: operations, errors, and bytes read and written.
func (s Snapshot) Totals() (ops, errs, read, written uint64) {
	for _, o := range s.Ops {
		ops += o.Count
		errs += o.Errors
		switch o.Op {
		case trace.OpRead:
			read += o.Bytes
		case trace.OpWrite, trace.OpCopyFileRange:
			written += o.Bytes
		}
	}
	return
}

// Quantile is the q-quantile of the latency of all ops in the snapshot.
func (s Snapshot) Quantile(q float64) time.Duration {
	all := make([]uint64, numBuckets)
	var n uint64
	for _, o := range s.Ops {
		n += o.Count
		for j, c := range o.buckets {
			all[j] += c
		}
	}
	return bucketQuantile(all, n, q)
}

// ByTime returns the ops sorted by total time, largest first.
func (s Snapshot) ByTime() []OpStats {
	out := append([]OpStats(nil), s.Ops...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Dur > out[j].Dur })
	return out
}
