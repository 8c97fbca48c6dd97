package trace

import (
	"math"
	"unsafe"
)

// Sorter restores start-time order to events read in file order, within a bounded window.
//
// A trace lists events about as they end, in batches per group of threads (see "Events come
// out in file order" in the package comment), so a consumer that needs start order (an
// access's first read before its re-reads, a handle's open before its reads) holds the
// most recent events and hands out the earliest whenever the window is full. An event that
// arrives after the window has handed out a later-starting one comes out late and is
// counted in Late. The zero value holds DefaultSortWindow events.
//
// The window is made of runs already in start order: a trace interleaves a few of them,
// one per thread or batch. A new event goes to the back of the run whose last event is the
// latest one not after it, or starts a run; when there are maxRuns runs and none fits, it
// goes to a heap. The earliest of the runs' fronts and the heap's top comes out first.
// Keys (start, then file order) are unique, so events come out in the order of one sorted
// queue, for any input; a real trace costs a few comparisons per event. A run holds its
// events in chunks, in order, so that taking them out reads memory in sequence: an event
// comes out about a window after it went in, long after its cache lines left, and
// reading each run in sequence lets the next ones be fetched ahead.
type Sorter struct {
	// Window is the number of events held before the earliest comes out (0: DefaultSortWindow).
	Window int
	// Late counts events that came out after an event that started later than them: they
	// arrived after the window had passed their start time.
	Late uint64

	runs   []*run
	fronts []sortKey // fronts[i] is the key of runs[i]'s first event
	backs  []sortKey // backs[i] is the key of runs[i]'s last event
	spare  []*run    // emptied runs, for reuse
	chunks []*sortChunk

	// The heap of events no run took: late is a min-heap of their keys and slots in evs
	// (chunks of sortChunkLen events; free lists the unused slots).
	late  []winEntry
	evs   [][]Event
	nslot int32
	free  []int32

	n int // events held
	// min is where the earliest event is: the index of its run, or -1 for the heap's top
	// (meaningful when n > 0).
	min int
	seq uint64
	// cur is the event Pop returned last, or with one the only event held, pushed
	// into an empty window of one (Window 1).
	cur     Event
	one     bool
	lastOut int64
	out     bool // an event came out (lastOut is set)
}

// DefaultSortWindow is the window of a zero Sorter: 65536 events, each held as an Event and
// a 16-byte key.
const DefaultSortWindow = 1 << 16

// maxRuns bounds the runs scanned per event.
const maxRuns = 32

// sortChunkLen is the number of events in a run's chunk, and in a chunk of the heap's slots.
const sortChunkLen = 128

// sortKey orders events: by start, then by file order.
type sortKey struct {
	start int64
	seq   uint64
}

func (a *sortKey) before(b *sortKey) bool {
	return a.start < b.start || (a.start == b.start && a.seq < b.seq)
}

// sortChunk holds a stretch of a run: events and their keys, in order.
type sortChunk struct {
	keys [sortChunkLen]sortKey
	evs  [sortChunkLen]Event
	next *sortChunk
}

// run is a sorted run: a list of chunks, the first event at head of the first chunk, the
// last at tail-1 of the last.
type run struct {
	first, last *sortChunk
	head, tail  int
}

// winEntry is a heap event's key and slot.
type winEntry struct {
	sortKey
	slot int32
}

// Len returns the number of events held.
func (s *Sorter) Len() int { return s.n }

// Full reports whether the window holds as many events as it may: the earliest must come
// out before the next is pushed.
func (s *Sorter) Full() bool {
	w := s.Window
	if w <= 0 {
		w = DefaultSortWindow
	}
	return s.n >= w
}

// Push adds an event; the Sorter copies it.
//
// An event that goes to the back of a run is not before that run's front, which is not
// before the earliest event: only a new run or the heap can take a new earliest.
func (s *Sorter) Push(ev *Event) {
	s.seq++
	if s.one {
		// A second event while one is held: the held one joins a run first.
		s.one, s.n = false, 0
		s.push(&s.cur, s.seq-1)
	} else if s.n == 0 && s.Window == 1 {
		// A window of one event (a caller that has them in order already): the event
		// comes out at the next Pop, unless another is pushed first.
		s.cur, s.n, s.one = *ev, 1, true
		return
	}
	s.push(ev, s.seq)
}

// push adds an event with file order seq to the runs or the heap.
func (s *Sorter) push(ev *Event, seq uint64) {
	k := sortKey{start: ev.Start, seq: seq}
	earliest := s.n == 0 || k.before(s.minKey())
	s.n++
	// The run to take it: the one whose last event started latest, not after it (its
	// key is after every key held). Any run whose last event is not after it would keep
	// the order; the latest keeps the runs few. As in findMin, the latest start is taken
	// without a branch, then the run that has it.
	best, bs := -1, int64(math.MinInt64)
	for i := range s.backs {
		st := s.backs[i].start
		if st > k.start {
			st = math.MinInt64
		}
		bs = max(bs, st)
	}
	if bs != math.MinInt64 {
		for i := range s.backs {
			if s.backs[i].start == bs {
				best = i
				break
			}
		}
	}
	switch {
	case best >= 0:
		s.append(s.runs[best], &k, ev)
		s.backs[best] = k
	case len(s.runs) < maxRuns:
		var r *run
		if m := len(s.spare); m > 0 {
			r, s.spare = s.spare[m-1], s.spare[:m-1]
		} else {
			r = &run{}
		}
		s.append(r, &k, ev)
		s.runs = append(s.runs, r)
		s.fronts = append(s.fronts, k)
		s.backs = append(s.backs, k)
		if earliest {
			s.min = len(s.runs) - 1
		}
	default:
		slot := s.slot()
		*s.slotEvent(slot) = *ev
		s.late = append(s.late, winEntry{sortKey: k, slot: slot})
		s.up(len(s.late) - 1)
		if earliest {
			s.min = -1
		}
	}
}

// append adds an event with key k to the back of r.
func (s *Sorter) append(r *run, k *sortKey, ev *Event) {
	if r.last == nil || r.tail == sortChunkLen {
		var c *sortChunk
		if m := len(s.chunks); m > 0 {
			c, s.chunks = s.chunks[m-1], s.chunks[:m-1]
		} else {
			c = new(sortChunk)
		}
		c.next = nil
		if r.last == nil {
			r.first, r.head = c, 0
		} else {
			r.last.next = c
		}
		r.last, r.tail = c, 0
	}
	r.last.keys[r.tail] = *k
	r.last.evs[r.tail] = *ev
	r.tail++
}

// minKey returns the key of the earliest event; the Sorter must not be empty.
func (s *Sorter) minKey() *sortKey {
	if s.min < 0 {
		return &s.late[0].sortKey
	}
	return &s.fronts[s.min]
}

// Pop removes the earliest event held (by start, then by the order of Push) and returns
// it, valid until the next Push or Pop; the Sorter must not be empty.
func (s *Sorter) Pop() *Event {
	s.n--
	switch {
	case s.one:
		s.one = false
	case s.min < 0:
		e := s.late[0]
		last := len(s.late) - 1
		s.late[0] = s.late[last]
		s.late = s.late[:last]
		s.down(0)
		s.cur = *s.slotEvent(e.slot)
		s.free = append(s.free, e.slot)
		s.findMin()
	default:
		ri := s.min
		r := s.runs[ri]
		c := r.first
		s.cur = c.evs[r.head]
		r.head++
		switch {
		case c == r.last && r.head == r.tail:
			s.dropRun(ri)
		case r.head == sortChunkLen:
			r.first, r.head = c.next, 0
			s.chunks = append(s.chunks, c)
			s.fronts[ri] = r.first.keys[0]
		default:
			s.fronts[ri] = c.keys[r.head]
			// The run's next event comes out after the other runs' fronts, about as
			// many pops from now as there are runs: fetching it now overlaps the miss
			// with that work.
			prefetchEvent(unsafe.Pointer(&c.evs[r.head]))
			if k := r.head + 8; k < sortChunkLen {
				prefetchEvent(unsafe.Pointer(&c.keys[k])) // the keys of the run's next pops, too
			}
		}
		s.findMin()
	}
	if s.out && s.cur.Start < s.lastOut {
		s.Late++
	} else {
		s.lastOut, s.out = s.cur.Start, true
	}
	return &s.cur
}

// dropRun removes run i, which is empty, keeping its chunk and itself for reuse.
func (s *Sorter) dropRun(i int) {
	r := s.runs[i]
	s.chunks = append(s.chunks, r.first)
	*r = run{}
	s.spare = append(s.spare, r)
	last := len(s.runs) - 1
	s.runs[i], s.fronts[i], s.backs[i] = s.runs[last], s.fronts[last], s.backs[last]
	s.runs[last] = nil
	s.runs, s.fronts, s.backs = s.runs[:last], s.fronts[:last], s.backs[:last]
}

// findMin sets min by comparing the runs' fronts and the heap's top.
//
// The earliest front changes from one pop to the next in no order a branch predictor
// follows, so the scan takes the earliest start without a branch (min), then the front
// of that start earliest in file order (a branch taken about once).
func (s *Sorter) findMin() {
	f := s.fronts
	m := -1
	if len(f) > 0 {
		ms := f[0].start
		for i := 1; i < len(f); i++ {
			ms = min(ms, f[i].start)
		}
		seq := uint64(math.MaxUint64)
		for i := range f {
			if f[i].start == ms && f[i].seq < seq {
				m, seq = i, f[i].seq
			}
		}
	}
	if len(s.late) > 0 && (m < 0 || s.late[0].before(&f[m])) {
		m = -1
	}
	s.min = m
}

// slot returns a free slot for a heap event.
func (s *Sorter) slot() int32 {
	if m := len(s.free); m > 0 {
		slot := s.free[m-1]
		s.free = s.free[:m-1]
		return slot
	}
	slot := s.nslot
	s.nslot++
	if int(slot/sortChunkLen) == len(s.evs) {
		s.evs = append(s.evs, make([]Event, sortChunkLen))
	}
	return slot
}

func (s *Sorter) slotEvent(i int32) *Event { return &s.evs[i/sortChunkLen][i%sortChunkLen] }

func (s *Sorter) up(i int) {
	h := s.late
	for i > 0 {
		par := (i - 1) / 2
		if !h[i].before(&h[par].sortKey) {
			return
		}
		h[i], h[par] = h[par], h[i]
		i = par
	}
}

func (s *Sorter) down(i int) {
	h := s.late
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l].sortKey) {
			m = r
		}
		if !h[m].before(&h[i].sortKey) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
