package stats

import "sort"

// I/O-active time.
//
// The time with at least one request (or call) in flight is the length of the union of
// the events' [Start, End) intervals. Events arrive roughly in end order, not in start
// order, so a busySet keeps the union of the recent intervals as a sorted set of disjoint
// intervals and retires, into its total, the ones that ended more than DepthWindow before
// the latest end seen, or the oldest when it holds busyCap of them. An event starting
// before the retired part (one longer than the window, or one arriving after busyCap
// disjoint intervals that followed it) counts only from where the retired part ends: the
// total is then a lower bound, and Late says how many such events there were. The set is
// allocated once, at its first interval; adding an interval never allocates.

// busyCap bounds the intervals a busySet keeps (16 bytes each).
const busyCap = 1024

// busySet accumulates the length of a union of intervals, streaming.
type busySet struct {
	iv       []reqSpan // iv[head:]: disjoint, non-touching intervals sorted by start
	head     int
	frontier int64 // everything before it is accounted in ns
	maxEnd   int64
	ns       int64
	late     uint64
}

// add adds [s, e).
func (b *busySet) add(s, e int64) {
	if e <= s {
		return
	}
	if b.iv == nil {
		b.iv = make([]reqSpan, 0, 2*busyCap)
	}
	b.maxEnd = max(b.maxEnd, e)
	if s < b.frontier {
		b.late++
		if e <= b.frontier {
			return
		}
		s = b.frontier
	}
	live := b.iv[b.head:]
	n := len(live)
	switch {
	case n == 0 || s > live[n-1].end:
		b.push(reqSpan{s, e})
	case s >= live[n-1].start:
		live[n-1].end = max(live[n-1].end, e)
	default:
		b.merge(s, e)
	}
	b.retire()
}

// push appends an interval that starts after every other.
func (b *busySet) push(r reqSpan) {
	if len(b.iv) == cap(b.iv) {
		b.compact()
	}
	b.iv = append(b.iv, r)
}

// compact moves the live intervals to the front of the buffer.
func (b *busySet) compact() {
	n := copy(b.iv, b.iv[b.head:])
	b.iv = b.iv[:n]
	b.head = 0
}

// merge inserts [s, e) among the live intervals, merging those it overlaps or touches.
func (b *busySet) merge(s, e int64) {
	live := b.iv[b.head:]
	i := sort.Search(len(live), func(k int) bool { return live[k].end >= s })
	j := i
	for j < len(live) && live[j].start <= e {
		j++
	}
	if i == j { // touches nothing: insert at i
		if len(b.iv) == cap(b.iv) {
			b.compact()
			live = b.iv[b.head:]
		}
		b.iv = append(b.iv, reqSpan{})
		live = b.iv[b.head:]
		copy(live[i+1:], live[i:])
		live[i] = reqSpan{s, e}
		return
	}
	live[i] = reqSpan{min(s, live[i].start), max(e, live[j-1].end)}
	k := copy(live[i+1:], live[j:])
	b.iv = b.iv[:b.head+i+1+k]
}

// retire accounts the intervals that ended before the reorder window, and the oldest
// beyond busyCap.
func (b *busySet) retire() {
	wm := b.maxEnd - int64(DepthWindow)
	for b.head < len(b.iv) {
		r := b.iv[b.head]
		if len(b.iv)-b.head <= busyCap && r.end >= wm {
			break
		}
		b.ns += r.end - r.start
		b.frontier = r.end
		b.head++
	}
	if b.head == len(b.iv) {
		b.iv, b.head = b.iv[:0], 0
	}
}

// total returns the length of the union of everything added.
func (b *busySet) total() int64 {
	t := b.ns
	for _, r := range b.iv[b.head:] {
		t += r.end - r.start
	}
	return t
}
