package trace

import "unsafe"

// Sorter restores start-time order to events read in file order, within a bounded window.
//
// A trace lists events about as they end, in batches per group of threads (see "Events come
// out in file order" in the package comment), so a consumer that needs start order (an
// access's first read before its re-reads, a handle's open before its reads) holds the
// most recent events and hands out the earliest whenever the window is full. An event that
// arrives after the window has handed out a later-starting one comes out late and is
// counted in Late. The zero value holds DefaultSortWindow events.
type Sorter struct {
	// Window is the number of events held before the earliest comes out (0: DefaultSortWindow).
	Window int
	// Late counts events that came out after an event that started later than them: they
	// arrived after the window had passed their start time.
	Late uint64

	// evs holds the slots in chunks of sortChunk events, so that filling the window copies
	// no event twice (one array of the window's 65536 events, grown by append, would be
	// copied and cleared about ten times over); free lists the unused slots.
	evs     [][]Event
	nslot   int32
	free    []int32
	win     window
	seq     uint64
	cur     Event
	lastOut int64
	out     bool // an event came out (lastOut is set)
}

// DefaultSortWindow is the window of a zero Sorter: 65536 events, each held as an Event and
// a 28-byte entry.
const DefaultSortWindow = 1 << 16

// Push adds an event; the Sorter copies it.
func (s *Sorter) Push(ev *Event) {
	s.seq++
	var slot int32
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		slot = s.nslot
		s.nslot++
		if int(slot>>sortChunkBits) == len(s.evs) {
			s.evs = append(s.evs, make([]Event, 1<<sortChunkBits))
		}
	}
	*s.slot(slot) = *ev
	s.win.push(winEntry{start: ev.Start, seq: s.seq, slot: slot})
}

// sortChunkBits sets the Sorter's chunks: 1024 events.
const sortChunkBits = 10

func (s *Sorter) slot(i int32) *Event { return &s.evs[i>>sortChunkBits][i&(1<<sortChunkBits-1)] }

// Len returns the number of events held.
func (s *Sorter) Len() int { return s.win.len() }

// Full reports whether the window holds as many events as it may: the earliest must come
// out before the next is pushed.
func (s *Sorter) Full() bool {
	w := s.Window
	if w <= 0 {
		w = DefaultSortWindow
	}
	return s.win.len() >= w
}

// Pop removes the earliest event held (by start, then by the order of Push) and returns
// it, valid until the next Push or Pop; the Sorter must not be empty.
func (s *Sorter) Pop() *Event {
	slot := s.win.pop()
	s.free = append(s.free, slot)
	s.cur = *s.slot(slot)
	// The next event to come out was pushed about a window ago: its lines have left the
	// cache. Fetching them now overlaps the miss with the caller's work on this one.
	if next, ok := s.win.peek(); ok {
		prefetchEvent(unsafe.Pointer(s.slot(next)))
	}
	if s.out && s.cur.Start < s.lastOut {
		s.Late++
	} else {
		s.lastOut, s.out = s.cur.Start, true
	}
	return &s.cur
}

// The sort window restores start order. A trace lists requests about as they end, in
// batches per group of threads, so it is made of runs already in start order, interleaved.
// The window keeps up to maxRuns sorted runs: a new entry goes to the back of the run whose
// last entry is the latest one not after it, or starts a run; when there are maxRuns runs
// and none fits, it goes to a heap. The earliest of the runs' fronts and the heap's top
// comes out first. Keys are unique (file order breaks ties), so entries come out in the
// order of one sorted queue, for any input; a real trace costs a few comparisons per entry.

// maxRuns bounds the runs scanned per entry.
const maxRuns = 32

// winEntry is an event's slot keyed by (start, file order).
type winEntry struct {
	start int64
	seq   uint64
	slot  int32
}

func (a *winEntry) before(b *winEntry) bool {
	return a.start < b.start || (a.start == b.start && a.seq < b.seq)
}

// run is a ring of entries in order.
type run struct {
	buf     []winEntry // len is a power of two
	head, n int
}

func (r *run) front() *winEntry { return &r.buf[r.head] }
func (r *run) back() *winEntry  { return &r.buf[(r.head+r.n-1)&(len(r.buf)-1)] }

func (r *run) push(e winEntry) {
	if r.n == len(r.buf) {
		nb := make([]winEntry, max(64, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
}

func (r *run) pop() winEntry {
	e := r.buf[r.head]
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return e
}

type window struct {
	runs  []*run
	spare []*run     // emptied runs, for reuse
	late  []winEntry // min-heap of entries no run took
	n     int
	// min is where the earliest entry is: the index of its run, or -1 for the heap's top
	// (meaningful when n > 0).
	min int
}

// at returns the earliest entry; the window must not be empty.
func (w *window) at() *winEntry {
	if w.min < 0 {
		return &w.late[0]
	}
	return w.runs[w.min].front()
}

// peek returns the slot of the earliest entry, if any.
func (w *window) peek() (int32, bool) {
	if w.n == 0 {
		return 0, false
	}
	return w.at().slot, true
}

// findMin sets min by comparing the runs' fronts and the heap's top.
func (w *window) findMin() {
	w.min = -1
	for i, r := range w.runs {
		if w.min < 0 || r.front().before(w.runs[w.min].front()) {
			w.min = i
		}
	}
	if len(w.late) > 0 && (w.min < 0 || w.late[0].before(w.runs[w.min].front())) {
		w.min = -1
	}
}

func (w *window) len() int { return w.n }

// push adds an entry; its seq is larger than any before.
//
// An entry that goes to the back of a run is not before that run's front, which is not
// before the earliest entry: only a new run or the heap can take a new earliest.
func (w *window) push(e winEntry) {
	w.n++
	earliest := w.n == 1 || e.before(w.at())
	var best *run
	for _, r := range w.runs {
		if b := r.back(); !e.before(b) && (best == nil || best.back().before(b)) {
			best = r
		}
	}
	switch {
	case best != nil:
		best.push(e)
	case len(w.runs) < maxRuns:
		var r *run
		if k := len(w.spare); k > 0 {
			r, w.spare = w.spare[k-1], w.spare[:k-1]
		} else {
			r = &run{}
		}
		r.push(e)
		w.runs = append(w.runs, r)
		if earliest {
			w.min = len(w.runs) - 1
		}
	default:
		w.late = append(w.late, e)
		w.up(len(w.late) - 1)
		if earliest {
			w.min = -1
		}
	}
}

// pop removes the earliest entry and returns its slot; the window must not be empty.
func (w *window) pop() int32 {
	w.n--
	ri := w.min
	if ri < 0 {
		e := w.late[0]
		last := len(w.late) - 1
		w.late[0] = w.late[last]
		w.late = w.late[:last]
		w.down(0)
		w.findMin()
		return e.slot
	}
	r := w.runs[ri]
	e := r.pop()
	if r.n == 0 {
		last := len(w.runs) - 1
		w.runs[ri] = w.runs[last]
		w.runs[last] = nil
		w.runs = w.runs[:last]
		if len(r.buf) > 1024 {
			r.buf, r.head = nil, 0 // a long run's ring is not kept for a short one
		}
		w.spare = append(w.spare, r)
	}
	w.findMin()
	return e.slot
}

func (w *window) up(i int) {
	h := w.late
	for i > 0 {
		par := (i - 1) / 2
		if !h[i].before(&h[par]) {
			return
		}
		h[i], h[par] = h[par], h[i]
		i = par
	}
}

func (w *window) down(i int) {
	h := w.late
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
