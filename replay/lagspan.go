package replay

import (
	"cmp"
	"slices"
	"sync"
)

// The time the replayer held ops back.
//
// Each op's issue lag is an interval: from the time it was ready to the time it was
// issued. Ops late together (a queue's ops waiting for the goroutines that issue them, a
// replayer thread that lost its CPU) have intervals that overlap, so their summed lag
// (Summary.LagTotal) can exceed the run's span many times over. What the run could have
// been shorter without the replayer's delays is at most the time during which some op was
// late: the union of the intervals (Summary.LagUnion), each moment counted once.
//
// Workers collect their intervals in batches and add them to the run's lagSpans, which
// keeps the union as disjoint spans. Memory stays bounded: beyond maxLagSpans the older
// half is retired into a length, and the part of a later interval that reaches back
// before the retired spans' end is counted whole (it may overlap them: the union is then
// an upper bound, which widens the prediction's interval, never narrows it).

// lagSpan is an interval of monotonic time, [from, to).
type lagSpan struct{ from, to int64 }

const (
	lagBatch    = 64      // intervals a worker collects before it adds them
	maxLagSpans = 1 << 14 // disjoint spans kept before the older half is retired
)

// lagSpans is the union of a run's lag intervals.
type lagSpans struct {
	mu    sync.Mutex // guards the fields below
	spans []lagSpan  // disjoint, by start, all after edge
	done  int64      // length of the retired spans, and of parts of intervals before edge
	edge  int64      // end of the last retired span
}

// lagBuf is a worker's intervals not yet added to its run's lagSpans.
type lagBuf struct {
	to    *lagSpans
	n     int
	spans [lagBatch]lagSpan
}

// recordLag records the issue lag of an op ready at ready and issued at start.
func (st *runStats) recordLag(to *lagSpans, ready, start int64) {
	st.lag.record(start - ready)
	if start <= ready {
		return
	}
	b := &st.lags
	b.to = to
	b.spans[b.n] = lagSpan{ready, start}
	b.n++
	if b.n == len(b.spans) {
		b.flush()
	}
}

// flush adds the collected intervals to the union.
func (b *lagBuf) flush() {
	if b.n == 0 {
		return
	}
	b.to.add(b.spans[:b.n])
	b.n = 0
}

// add adds intervals (reordered) to the union.
func (l *lagSpans) add(in []lagSpan) {
	slices.SortFunc(in, func(a, b lagSpan) int { return cmp.Compare(a.from, b.from) })
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range in {
		if s.from < l.edge {
			l.done += min(s.to, l.edge) - s.from
			s.from = l.edge
			if s.to <= s.from {
				continue
			}
		}
		l.insert(s)
	}
	if len(l.spans) > maxLagSpans {
		old := l.spans[:len(l.spans)/2]
		for _, o := range old {
			l.done += o.to - o.from
		}
		l.edge = old[len(old)-1].to
		l.spans = slices.Delete(l.spans, 0, len(old))
	}
}

// insert merges s into the spans (under l.mu).
func (l *lagSpans) insert(s lagSpan) {
	// The spans from i on end at or after s starts; those before j start at or before it
	// ends: i..j-1 touch s.
	i, _ := slices.BinarySearchFunc(l.spans, s.from, func(x lagSpan, t int64) int { return cmp.Compare(x.to, t) })
	j := i
	for j < len(l.spans) && l.spans[j].from <= s.to {
		j++
	}
	if i == j {
		l.spans = slices.Insert(l.spans, i, s)
		return
	}
	s.from, s.to = min(s.from, l.spans[i].from), max(s.to, l.spans[j-1].to)
	l.spans = slices.Replace(l.spans, i, j, s)
}

// total returns the length of the union.
func (l *lagSpans) total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.done
	for _, s := range l.spans {
		n += s.to - s.from
	}
	return n
}
