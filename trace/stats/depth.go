package stats

import (
	"cmp"
	"slices"
	"time"

	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/trace"
)

// In-flight depth.
//
// The depth of an operation at a moment is the number of its requests in flight then:
// started (Event.Start) and not yet ended (Event.End). A request ending exactly when
// another starts does not overlap it. Each request is counted by the depth it found when
// it started, itself included, so a job that waits for every request before it issues the
// next shows depth 1 throughout, and fio at iodepth 16 shows 16 when all its requests are
// with the backend together.
//
// Events come out of a trace roughly in end order (the writer appends each when it is
// served and flushes per thread), not in start order. The accumulator keeps each
// operation's recent requests in a reorder window of DepthWindow, sorts them by start and
// sweeps those older than the window. A request that turns up after requests that started
// later than it were swept (one longer than the window, or a trace whose writer lagged) is
// counted at the point the sweep had reached; the depths seen by the requests that started
// while it was already in flight are then low by one, and Depth.Late says how many such
// requests there were (the figures are lower bounds).

// DepthWindow is how far back in time events may arrive out of order and still be placed
// exactly (the trace writer flushes every thread's events at least once a second).
const DepthWindow = 2 * time.Second

// maxDepthBuckets bounds Depth.Hist; deeper requests count in the last bucket (Max stays
// exact).
const maxDepthBuckets = 1 << 16

// Depth is the in-flight depth of one operation.
type Depth struct {
	Requests uint64   // requests counted
	Sum      uint64   // sum of the depths the requests found at their start
	Max      uint32   // the largest depth
	Hist     []uint64 // Hist[d]: requests that found depth d at their start (Hist[0] is 0)
	BusyNs   int64    // time with at least one request in flight
	AreaNs   int64    // integral of the depth over time: the sum of the requests' durations
	Late     uint64   // requests placed late (see above): the figures are lower bounds
}

// Mean returns the mean depth requests found at their start.
func (d *Depth) Mean() float64 {
	if d.Requests == 0 {
		return 0
	}
	return float64(d.Sum) / float64(d.Requests)
}

// BusyMean returns the time-weighted mean depth while at least one request was in flight.
func (d *Depth) BusyMean() float64 {
	if d.BusyNs <= 0 {
		return 0
	}
	return float64(d.AreaNs) / float64(d.BusyNs)
}

// Percentile returns the depth at percentile p (0..100) of the requests: the depth found by
// the request of rank ⌈p/100 × Requests⌉ (at least 1; package internal/quantile) in
// increasing order of depth.
func (d *Depth) Percentile(p float64) uint32 {
	if d.Requests == 0 {
		return 0
	}
	rank := quantile.Rank(p, d.Requests)
	var c uint64
	for i, n := range d.Hist {
		if c += n; c >= rank {
			return uint32(i)
		}
	}
	return d.Max
}

func (d *Depth) merge(o *Depth) {
	d.Requests += o.Requests
	d.Sum += o.Sum
	d.Max = max(d.Max, o.Max)
	if len(o.Hist) > len(d.Hist) {
		d.Hist = append(d.Hist, make([]uint64, len(o.Hist)-len(d.Hist))...)
	}
	for i, n := range o.Hist {
		d.Hist[i] += n
	}
	d.BusyNs += o.BusyNs
	d.AreaNs += o.AreaNs
	d.Late += o.Late
}

// DepthSlot is the depth of one operation in one interval.
type DepthSlot struct {
	AreaNs int64  // integral of the depth over the interval (mean depth = AreaNs / width)
	Max    uint32 // the largest depth in the interval
}

// DepthSeries is the per-interval depth of each operation, on the intervals of
// Stats.Series: slot i of Ops[op] covers [Start+i*Width, Start+(i+1)*Width). Merged
// traces add their areas (the depths of several nodes add up) and keep the largest
// maximum of any one trace.
type DepthSeries struct {
	Start time.Time
	Width time.Duration
	Ops   [trace.NumOps][]DepthSlot // nil for operations never seen
	max   int                       // coarsen when a slot index reaches max (0: unlimited)
}

// Len returns the number of slots (of the longest operation's series).
func (s *DepthSeries) Len() int {
	n := 0
	for i := range s.Ops {
		n = max(n, len(s.Ops[i]))
	}
	return n
}

// at returns op's slot for time ns since Start, coarsening when the series would grow
// beyond its limit.
func (s *DepthSeries) at(op trace.Op, ns int64) *DepthSlot {
	i := max(ns, 0) / int64(s.Width)
	for s.max > 0 && i >= int64(s.max) {
		s.coarsen()
		i = max(ns, 0) / int64(s.Width)
	}
	sl := s.Ops[op]
	if i >= int64(len(sl)) {
		if i < int64(cap(sl)) {
			sl = sl[:i+1]
		} else {
			c := max(2*cap(sl), int(i)+1, 16)
			if s.max > 0 {
				c = max(min(c, s.max), int(i)+1)
			}
			ns := make([]DepthSlot, i+1, c)
			copy(ns, sl)
			sl = ns
		}
		s.Ops[op] = sl
	}
	return &sl[i]
}

// coarsen doubles the width, merging neighbouring slots.
func (s *DepthSeries) coarsen() {
	for op := range s.Ops {
		s.Ops[op] = coarsen(s.Ops[op], position, nil, (*DepthSlot).merge)
	}
	s.Width *= 2
}

// merge adds the depth of o, a neighbouring interval or another trace's, to s.
func (s *DepthSlot) merge(o *DepthSlot) {
	s.AreaNs += o.AreaNs
	s.Max = max(s.Max, o.Max)
}

// Merge adds o into s, aligned on the wall clock; the result has the coarser width.
func (s *DepthSeries) Merge(o *DepthSeries) {
	if o.Len() == 0 {
		return
	}
	src := DepthSeries{Start: o.Start, Width: o.Width}
	for op := range o.Ops {
		src.Ops[op] = slices.Clone(o.Ops[op])
	}
	if s.Width == 0 || s.Len() == 0 {
		src.max = max(s.max, o.max)
		*s = src
		return
	}
	for src.Width < s.Width {
		src.coarsen()
	}
	for s.Width < src.Width {
		s.coarsen()
	}
	if src.Start.Before(s.Start) {
		shift := int(s.Start.Sub(src.Start) / s.Width)
		if s.Start.Sub(src.Start)%s.Width != 0 {
			shift++
		}
		for op := range s.Ops {
			if s.Ops[op] != nil {
				s.Ops[op] = append(make([]DepthSlot, shift), s.Ops[op]...)
			}
		}
		s.Start = s.Start.Add(-time.Duration(shift) * s.Width)
	}
	off := int(src.Start.Sub(s.Start) / s.Width)
	for op := range src.Ops {
		for i, x := range src.Ops[op] {
			s.at(trace.Op(op), int64(off+i)*int64(s.Width)).merge(&x)
		}
	}
	for s.max > 0 && s.Len() > s.max {
		s.coarsen()
	}
}

// Inflight holds the in-flight depth per operation and over time.
type Inflight struct {
	Ops    [trace.NumOps]Depth
	Series DepthSeries
}

// Merge adds o into d.
func (d *Inflight) Merge(o *Inflight) {
	for i := range d.Ops {
		d.Ops[i].merge(&o.Ops[i])
	}
	d.Series.Merge(&o.Series)
}

// reqSpan is one request's [start, end).
type reqSpan struct{ start, end int64 }

// depthOp sweeps one operation's requests in start order.
type depthOp struct {
	pending []reqSpan // not yet swept: pending[:sorted] in start order, the rest as they came
	sorted  int
	merged  []reqSpan // spare buffer for merging pending
	limit   int       // sweep when pending reaches this length
	active  []int64   // min-heap of the ends of the swept requests still in flight
	tl      int64     // the sweep's time: everything before it is accounted
	started bool      // tl is set
	// The series slot of the last time placed: index idx, covering [lo, hi) at width w.
	idx, lo, hi int64
	w           time.Duration
	Depth
}

// depthAcc is the depth part of an Accumulator.
type depthAcc struct {
	ops    [trace.NumOps]*depthOp
	series DepthSeries
	maxEnd int64 // the latest end seen
}

// Sweeps start with a small reorder buffer, which grows while the window holds more
// requests, up to maxPending; beyond that the oldest half is swept regardless.
const (
	minPending = 1 << 10
	maxPending = 1 << 18
)

func (a *depthAcc) add(op trace.Op, start, end int64) {
	d := a.ops[op]
	if d == nil {
		d = &depthOp{limit: minPending}
		a.ops[op] = d
	}
	end = max(end, start)
	a.maxEnd = max(a.maxEnd, end)
	d.pending = append(d.pending, reqSpan{start, end})
	if len(d.pending) >= d.limit {
		a.sweep(op, d, false)
	}
}

// sweep places the pending requests that started before the reorder window (all of them
// when final).
func (a *depthAcc) sweep(op trace.Op, d *depthOp, final bool) {
	d.sortPending()
	p := d.pending
	n := len(p)
	if !final {
		wm := a.maxEnd - int64(DepthWindow)
		n, _ = slices.BinarySearchFunc(p, wm, func(x reqSpan, t int64) int { return cmp.Compare(x.start, t) })
		if n < len(p)/2 {
			if d.limit < maxPending {
				d.limit *= 2 // the window holds more: keep more
			} else {
				n = len(p) / 2
			}
		}
	}
	for _, r := range p[:n] {
		a.place(op, d, r)
	}
	d.pending = p[:copy(p, p[n:])]
	d.sorted = len(d.pending)
}

// sortPending sorts the requests that arrived since the last sweep by start and merges
// them into the rest, which is sorted already. Arrivals are nearly sorted: most of a
// sweep's work is a check.
func (d *depthOp) sortPending() {
	p := d.pending
	old, arrived := p[:d.sorted], p[d.sorted:]
	byStart := func(x, y reqSpan) int { return cmp.Compare(x.start, y.start) }
	if !slices.IsSortedFunc(arrived, byStart) {
		slices.SortFunc(arrived, byStart)
	}
	if len(old) == 0 || len(arrived) == 0 || old[len(old)-1].start <= arrived[0].start {
		return
	}
	m := d.merged[:0]
	i, j := 0, 0
	for i < len(old) && j < len(arrived) {
		if arrived[j].start < old[i].start {
			m = append(m, arrived[j])
			j++
		} else {
			m = append(m, old[i])
			i++
		}
	}
	m = append(append(m, old[i:]...), arrived[j:]...)
	d.merged, d.pending = p[:0], m
}

// place counts one request, the next in start order (or a late one).
func (a *depthAcc) place(op trace.Op, d *depthOp, r reqSpan) {
	t := r.start
	if !d.started {
		d.tl, d.started = t, true
	}
	if t < d.tl {
		d.Late++
		t = d.tl
	}
	for len(d.active) > 0 && d.active[0] <= t {
		a.advance(op, d, d.active[0])
		d.popEnd()
	}
	a.advance(op, d, t)
	d.pushEnd(r.end)
	depth := uint32(len(d.active))
	d.Requests++
	d.Sum += uint64(depth)
	d.Max = max(d.Max, depth)
	i := min(int(depth), maxDepthBuckets-1)
	if i >= len(d.Hist) {
		d.Hist = append(d.Hist, make([]uint64, i+1-len(d.Hist))...)
	}
	d.Hist[i]++
	sl := a.slot(op, d, t)
	sl.Max = max(sl.Max, depth)
}

// advance moves d's time to t, accounting the current depth over [d.tl, t).
func (a *depthAcc) advance(op trace.Op, d *depthOp, t int64) {
	k := int64(len(d.active))
	if t <= d.tl {
		return
	}
	if k > 0 {
		d.BusyNs += t - d.tl
		d.AreaNs += k * (t - d.tl)
		for from := d.tl; from < t; {
			sl := a.slot(op, d, from)
			to := min(d.hi, t)
			sl.AreaNs += k * (to - from)
			sl.Max = max(sl.Max, uint32(k))
			from = to
		}
	}
	d.tl = t
}

// slot returns op's series slot for time t, remembering its bounds in d: consecutive
// requests mostly fall in the same slot.
func (a *depthAcc) slot(op trace.Op, d *depthOp, t int64) *DepthSlot {
	if t >= d.lo && t < d.hi && d.w == a.series.Width {
		return &a.series.Ops[op][d.idx]
	}
	sl := a.series.at(op, t)
	w := int64(a.series.Width)
	d.idx = max(t, 0) / w
	d.lo, d.hi, d.w = d.idx*w, (d.idx+1)*w, a.series.Width
	return sl
}

func (d *depthOp) pushEnd(e int64) {
	h := append(d.active, e)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	d.active = h
}

func (d *depthOp) popEnd() {
	h := d.active
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		if r := l + 1; r < n && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			break
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
	d.active = h
}

// finish sweeps everything and returns the figures.
func (a *depthAcc) finish() Inflight {
	var out Inflight
	for op, d := range a.ops {
		if d == nil {
			continue
		}
		a.sweep(trace.Op(op), d, true)
		for len(d.active) > 0 {
			a.advance(trace.Op(op), d, d.active[0])
			d.popEnd()
		}
		out.Ops[op] = d.Depth
	}
	out.Series = a.series
	return out
}
