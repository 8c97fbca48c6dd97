package stats

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
)

// depthModel computes the in-flight figures of reqs independently of the sweep: in start
// order, request i finds the i requests that started before it (or with it, earlier in
// order), plus itself, less those that had ended by its start (end <= its start).
func depthModel(reqs []reqSpan) (hist map[uint32]uint64, maxD uint32, busy, area int64) {
	s := slices.Clone(reqs)
	slices.SortStableFunc(s, func(a, b reqSpan) int { return cmp.Compare(a.start, b.start) })
	ends := make([]int64, len(s))
	zeros := map[int64]int{} // zero-length requests at each time not yet passed in order
	for i, r := range s {
		ends[i] = r.end
		area += r.end - r.start
		if r.end == r.start {
			zeros[r.start]++
		}
	}
	slices.Sort(ends)
	hist = map[uint32]uint64{}
	for i, r := range s {
		ended, _ := slices.BinarySearch(ends, r.start+1) // ends <= start
		// Of those, the zero-length requests at this very time that come later in order
		// (and this one itself, if zero-length) did not start before this one.
		d := uint32(i + 1 - (ended - zeros[r.start]))
		if r.end == r.start {
			zeros[r.start]--
		}
		hist[d]++
		maxD = max(maxD, d)
	}
	// Busy time: the union of the intervals.
	var end int64 = -1 << 62
	for _, r := range s {
		if r.end <= r.start {
			continue
		}
		if r.start >= end {
			busy += r.end - r.start
			end = r.end
		} else if r.end > end {
			busy += r.end - end
			end = r.end
		}
	}
	return hist, maxD, busy, area
}

// inEndOrder returns events for reqs in the order a trace holds them: by end, each moved
// by up to jitter (a writer flushing per thread).
func inEndOrder(reqs []reqSpan, op trace.Op, jitter int64, rng *rand.Rand) []trace.Event {
	type keyed struct {
		k  int64
		ev trace.Event
	}
	ks := make([]keyed, len(reqs))
	for i, r := range reqs {
		j := int64(0)
		if jitter > 0 {
			j = rng.Int64N(jitter)
		}
		ks[i] = keyed{r.end + j, trace.Event{Op: op, Start: r.start, Dur: r.end - r.start, Path: 2}}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.k, b.k) })
	evs := make([]trace.Event, len(ks))
	for i := range ks {
		evs[i] = ks[i].ev
	}
	return evs
}

func TestInflightMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		gap    int64 // mean gap between starts (ns)
		dur    int64 // mean duration (ns)
		jitter int64 // file-order disorder (ns)
	}{
		{name: "serial", n: 2000, gap: 100_000, dur: 10_000},
		{name: "overlapping", n: 20_000, gap: 10_000, dur: 150_000, jitter: int64(900 * time.Millisecond)},
		{name: "bursts", n: 50_000, gap: 3_000, dur: 40_000, jitter: int64(500 * time.Millisecond)},
		{name: "beyond the buffer", n: 600_000, gap: 200, dur: 3_000, jitter: int64(time.Millisecond)},
		{name: "zero durations", n: 5000, gap: 1_000, dur: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 3))
			reqs := make([]reqSpan, tc.n)
			var s int64
			for i := range reqs {
				s += rng.Int64N(2*tc.gap + 1)
				d := int64(0)
				if tc.dur > 0 {
					d = rng.Int64N(2 * tc.dur)
				}
				reqs[i] = reqSpan{s, s + d}
			}
			wantHist, wantMax, wantBusy, wantArea := depthModel(reqs)
			st := accumulate("t", inEndOrder(reqs, trace.OpRead, tc.jitter, rng), Options{})
			d := &st.Inflight.Ops[trace.OpRead]
			if d.Late != 0 {
				t.Errorf("%d requests placed late", d.Late)
			}
			if d.Requests != uint64(tc.n) || d.Max != wantMax || d.BusyNs != wantBusy || d.AreaNs != wantArea {
				t.Errorf("requests %d max %d busy %d area %d, want %d %d %d %d", d.Requests, d.Max, d.BusyNs, d.AreaNs, tc.n, wantMax, wantBusy, wantArea)
			}
			var sum uint64
			for depth, n := range d.Hist {
				if n != wantHist[uint32(depth)] {
					t.Errorf("depth %d: %d requests, want %d", depth, n, wantHist[uint32(depth)])
				}
				sum += uint64(depth) * n
			}
			if sum != d.Sum {
				t.Errorf("sum %d, histogram says %d", d.Sum, sum)
			}
			var area int64
			var smax uint32
			for _, sl := range st.Inflight.Series.Ops[trace.OpRead] {
				area += sl.AreaNs
				smax = max(smax, sl.Max)
			}
			if area != wantArea || smax != wantMax {
				t.Errorf("series: area %d max %d, want %d %d", area, smax, wantArea, wantMax)
			}
			if st.Inflight.Series.Width != st.Series.Width || st.Inflight.Series.Start != st.Series.Start {
				t.Errorf("series width %v start %v, the interval series' %v %v", st.Inflight.Series.Width, st.Inflight.Series.Start, st.Series.Width, st.Series.Start)
			}
		})
	}
}

// TestInflightQueueDepth: a job that keeps 16 requests outstanding (each completion
// followed by the next submission) shows 16 at every percentile once the queue is full.
func TestInflightQueueDepth(t *testing.T) {
	const depth, n = 16, 10_000
	var reqs []reqSpan
	ends := make([]int64, depth) // one slot per outstanding request
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		k := i % depth
		s := int64(k) // the first 16 at once
		if i >= depth {
			s = ends[k] // then each as its predecessor ends
		}
		e := s + 50_000 + rng.Int64N(10_000)
		reqs = append(reqs, reqSpan{s, e})
		ends[k] = e
	}
	st := accumulate("qd", inEndOrder(reqs, trace.OpRead, 0, rng), Options{})
	d := &st.Inflight.Ops[trace.OpRead]
	if d.Max != depth || d.Percentile(50) != depth || d.Percentile(1) != depth {
		t.Errorf("max %d p1 %d p50 %d, want %d", d.Max, d.Percentile(1), d.Percentile(50), depth)
	}
	if m := d.Mean(); m < depth-0.1 || m > depth {
		t.Errorf("mean %.2f, want about %d", m, depth)
	}
	if m := d.BusyMean(); m < depth-1 || m > depth {
		t.Errorf("busy mean %.2f, want about %d", m, depth)
	}
	if w := st.Inflight.Ops[trace.OpWrite]; w.Requests != 0 {
		t.Errorf("writes counted: %+v", w)
	}
}

// TestInflightLate: a request longer than the reorder window that reaches the trace after
// later ones were placed (more of them than the sort window holds) is counted as late (a
// lower bound), never lost.
func TestInflightLate(t *testing.T) {
	const n = 100_000 // 10 s, more than trace.DefaultSortWindow events
	evs := []trace.Event{}
	for i := range n {
		s := int64(i) * int64(100*time.Microsecond)
		evs = append(evs, trace.Event{Op: trace.OpFsync, Start: s, Dur: 1000})
	}
	// Started at 1 s, served for 8 s: appended at its end, after everything else.
	evs = append(evs, trace.Event{Op: trace.OpFsync, Start: int64(time.Second), Dur: int64(8 * time.Second)})
	st := accumulate("late", evs, Options{})
	d := &st.Inflight.Ops[trace.OpFsync]
	if d.Requests != n+1 || d.Late != 1 || st.Sources[0].Unordered != 1 {
		t.Errorf("requests %d late %d unordered %d, want %d, 1 and 1", d.Requests, d.Late, st.Sources[0].Unordered, n+1)
	}
}

func TestInflightMerge(t *testing.T) {
	wall := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(off time.Duration, n int) *Stats {
		h := &trace.Header{WallStart: wall.Add(off)}
		a := NewAccumulator("x", h, Options{Interval: time.Second})
		for i := range n {
			s := int64(i) * int64(time.Millisecond)
			a.Add(&trace.Event{Op: trace.OpRead, Start: s, Dur: int64(2 * time.Millisecond)})
		}
		return a.Finish(nil, nil, nil)
	}
	a, b := mk(0, 3000), mk(1500*time.Millisecond, 1000)
	m := New()
	m.Merge(a)
	m.Merge(b)
	da, db, dm := a.Inflight.Ops[trace.OpRead], b.Inflight.Ops[trace.OpRead], m.Inflight.Ops[trace.OpRead]
	if dm.Requests != da.Requests+db.Requests || dm.AreaNs != da.AreaNs+db.AreaNs || dm.Max != max(da.Max, db.Max) {
		t.Errorf("merged %+v from %+v and %+v", dm, da, db)
	}
	var area int64
	for _, sl := range m.Inflight.Series.Ops[trace.OpRead] {
		area += sl.AreaNs
	}
	if area != dm.AreaNs || !m.Inflight.Series.Start.Equal(wall) {
		t.Errorf("merged series: area %d (want %d), start %v", area, dm.AreaNs, m.Inflight.Series.Start)
	}
}

// TestPercentileRank: the depth and per-interval percentiles take rank ⌈p·n⌉ (SQL's
// percentile_disc): of 198 requests, 196 at depth 1, one at 2 and one at 3, the p99 is the
// 197th, depth 2 (round(p·n) would take the 196th, depth 1).
func TestPercentileRank(t *testing.T) {
	d := Depth{Requests: 198, Max: 3, Hist: []uint64{0, 196, 1, 1}}
	if p := d.Percentile(99); p != 2 {
		t.Errorf("depth p99 %d, want 2", p)
	}
	var h LogHist
	for range 196 {
		h.Add(1000)
	}
	h.Add(100_000)
	h.Add(10_000_000)
	if q := h.Quantile(0.99); q < 100_000 || q >= 10_000_000 {
		t.Errorf("interval p99 %d ns, want the bucket of 100 µs", q)
	}
}
