package fold

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/iotap/iotap/trace"
)

// Names resolves the path ids events carry; *trace.Reader satisfies it.
type Names interface {
	PathName(id uint32) string
}

// Options tune how recorded requests are folded into calls.
type Options struct {
	// Window is the number of events held to restore start-time order (default 65536).
	Window int
	// FoldWindow is the longest gap between a lookup's end and the call of the same thread
	// it is folded into (default 2 ms).
	FoldWindow int64
	// MergeGap is the longest gap between two pieces of one split read or write (default
	// 200 µs).
	MergeGap int64
	// NoFold makes every lookup a call of its own (an lstat), for a trace whose events are
	// system calls already.
	NoFold bool
}

// The defaults of Options.
const (
	DefaultWindow     = 1 << 16
	DefaultFoldWindow = 2e6   // ns
	DefaultMergeGap   = 200e3 // ns
)

func (o *Options) defaults() {
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.FoldWindow <= 0 {
		o.FoldWindow = DefaultFoldWindow
	}
	if o.MergeGap <= 0 {
		o.MergeGap = DefaultMergeGap
	}
}

// Stats count what folding did to the recorded events.
type Stats struct {
	Events    uint64               // recorded events read
	ByOp      [trace.NumOps]uint64 // recorded events read, per op
	Folded    [trace.NumOps]uint64 // events folded into another call (or dropped as kernel traffic)
	Merged    uint64               // read/write pieces merged into the previous piece
	Implicit  uint64               // implicit opens added for handles opened before the trace
	Unknown   uint64               // events with an unknown path, skipped
	Escapes   uint64               // events whose path is refused (absolute, "..")
	Unordered uint64               // events that arrived after the sort window had passed them
}

// statsJSON is the JSON form of Stats: the per-op arrays become one named row per op
// that had events.
type statsJSON struct {
	Events    uint64     `json:"events"`
	ByOp      []opFolded `json:"by_op"`
	Merged    uint64     `json:"merged"`
	Implicit  uint64     `json:"implicit_opens"`
	Unknown   uint64     `json:"unknown_paths"`
	Escapes   uint64     `json:"escapes"`
	Unordered uint64     `json:"unordered"`
}

type opFolded struct {
	Op     string `json:"op"`
	Events uint64 `json:"events"` // recorded events of the op
	Folded uint64 `json:"folded"` // of which folded into another call or dropped as kernel traffic
}

// MarshalJSON writes s with snake_case names and one {op, events, folded} row per op.
func (s Stats) MarshalJSON() ([]byte, error) {
	v := statsJSON{Events: s.Events, ByOp: []opFolded{}, Merged: s.Merged, Implicit: s.Implicit,
		Unknown: s.Unknown, Escapes: s.Escapes, Unordered: s.Unordered}
	for op := range trace.NumOps {
		if s.ByOp[op]+s.Folded[op] > 0 {
			v.ByOp = append(v.ByOp, opFolded{trace.Op(op).String(), s.ByOp[op], s.Folded[op]})
		}
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var v statsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Stats{Events: v.Events, Merged: v.Merged, Implicit: v.Implicit, Unknown: v.Unknown,
		Escapes: v.Escapes, Unordered: v.Unordered}
	for _, r := range v.ByOp {
		op, err := trace.ParseOp(r.Op)
		if err != nil {
			return fmt.Errorf("fold stats: %w", err)
		}
		s.ByOp[op], s.Folded[op] = r.Events, r.Folded
	}
	return nil
}

type pathInfo struct {
	name, parent string
	resolved     bool // name and parent are set
	bad          bool // name refused by CheckName or unknown
	hasOpen      bool
	open         uint64 // a handle open on the path (for fstat/ftruncate)
}

// pathTable holds the paths' states by id, in pages so that pointers stay valid.
type pathTable struct {
	pages  [][]pathInfo
	sparse map[uint32]*pathInfo // ids no writer makes (a damaged trace)
}

const (
	pathPage     = 1024
	maxDensePath = 1 << 22
)

// get returns the state of path id, allocating it when create is set (nil otherwise if
// it has none).
func (t *pathTable) get(id uint32, create bool) *pathInfo {
	if id >= maxDensePath {
		pi := t.sparse[id]
		if pi == nil && create {
			if t.sparse == nil {
				t.sparse = map[uint32]*pathInfo{}
			}
			pi = &pathInfo{}
			t.sparse[id] = pi
		}
		return pi
	}
	p := int(id / pathPage)
	if p >= len(t.pages) {
		if !create {
			return nil
		}
		t.pages = append(t.pages, make([][]pathInfo, p+1-len(t.pages))...)
	}
	if t.pages[p] == nil {
		if !create {
			return nil
		}
		t.pages[p] = make([]pathInfo, pathPage)
	}
	return &t.pages[p][id%pathPage]
}

// mapKey names a mapped file: its node id, or its path id in a trace without node ids.
type mapKey struct {
	node uint64
	path uint32
}

type handleState struct {
	node     uint64 // FUSE node id of the open file (0 if unknown)
	worker   uint32
	slot     int32
	pathID   uint32
	flushErr uint16
	// flushCall is the flush's system call (trace.Event's CallStart, CallEnd), flushPre
	// what the kernel measured before it.
	flushCall  [2]int64
	flushPre   callPre
	flushStart int64
	flushDur   int64
	flushed    bool
	dir        bool
	// pos is where the handle's last write or copy ended: the file position a
	// copy_file_range with no output offset writes at. Only a version-1 trace needs it
	// (it records only the input offset).
	pos int64
}

// maxHolding bounds the threads that hold calls back at once: every event scans them.
const maxHolding = 1024

// holder is a thread that may hold calls.
type holder struct {
	tid uint32
	t   *threadState
}

type threadState struct {
	// held are the lookups waiting to be folded, then at most one mergeable read or write
	// last: a window of buf, so that dropping the oldest held call (holdLookup) copies
	// none of the others (push moves them back to buf's start once buf is full).
	held   []Call
	buf    []Call
	listed bool // in Folder.holding
}

// push appends c to the held calls.
func (t *threadState) push(c *Call) {
	if n := len(t.held); n == cap(t.held) {
		if 2*n+1 > cap(t.buf) {
			t.buf = make([]Call, 0, 2*n+8)
		}
		t.held = t.buf[:copy(t.buf[:n], t.held)]
	}
	t.held = append(t.held, *c)
}

// clearHeld empties the held calls.
func (t *threadState) clearHeld() {
	clear(t.held)
	t.held = t.buf[:0]
}

// Folder turns a stream of recorded events into the calls they stand for, in an order
// that keeps each thread's program order. It is used from one goroutine.
//
// Memory is bounded by the sort window (Options.Window events) and by tables of the
// distinct paths, the handles open at once and the threads holding requests back — never
// by the number of events.
type Folder struct {
	names Names
	opts  Options
	off2  bool // the trace records copy_file_range's output offset (format version ≥ 2)

	// OnEvent, when set, sees every event in the order it is folded (start order within
	// the window), before it is folded.
	OnEvent func(*trace.Event)

	sort  trace.Sorter // the sort window
	ended bool

	paths   pathTable
	handles map[uint64]*handleState
	// superseded holds a handle's previous incarnation when an open reused its number
	// before the old one's release was seen: go-fuse frees the number when the release
	// starts, and the open that reuses it may have started earlier.
	superseded map[uint64]*handleState
	// mapOpens holds, per mapped file (its node id), the open file that the file's page
	// faults after the close of the handle it was mapped through use (see fault).
	mapOpens     map[mapKey]*handleState
	spareHandles []*handleState // closed handles' states, for reuse
	threads      map[uint32]*threadState
	spare        []*threadState // emptied thread states, for reuse
	holding      []holder       // threads that may hold calls, in the order they began to (see expire)
	freeSlot     []int32
	nSlots       int32

	out   []Call // ready calls, FIFO
	outAt int

	Stats Stats
}

// New returns a Folder for the events of a trace with header h (nil: a current version),
// whose path ids names resolves.
func New(names Names, h *trace.Header, o Options) *Folder {
	o.defaults()
	return &Folder{
		names: names, opts: o, off2: h == nil || h.Version >= trace.Version2,
		handles:    map[uint64]*handleState{},
		superseded: map[uint64]*handleState{}, mapOpens: map[mapKey]*handleState{}, threads: map[uint32]*threadState{},
		sort: trace.Sorter{Window: o.Window},
	}
}

// Slots returns the size the open-file table needs.
func (f *Folder) Slots() int32 { return f.nSlots }

// PathName returns the name of path id as the folder saw it, and false when the folder
// refused it (unknown, or leaving the root) or never saw it.
func (f *Folder) PathName(id uint32) (string, bool) {
	pi := f.paths.get(id, false)
	if pi == nil || !pi.resolved || pi.bad {
		return "", false
	}
	return pi.name, true
}

// Add takes the next event in file order. The folder copies it.
func (f *Folder) Add(ev *trace.Event) { f.sort.Push(ev) }

// End says that no event follows: Next then returns every call still held.
func (f *Folder) End() { f.ended = true }

// Ended reports whether End was called.
func (f *Folder) Ended() bool { return f.ended }

// Next returns the next call in order, valid until the next call of Next, or false when
// it needs more events (before End) or has returned every call (after End).
func (f *Folder) Next() (*Call, bool) {
	for f.outAt >= len(f.out) {
		f.out, f.outAt = f.out[:0], 0
		if n := f.sort.Len(); n > 0 && (f.ended || f.sort.Full()) {
			f.feed(f.pop())
			continue
		}
		if !f.ended || !f.flushAll() {
			return nil, false
		}
	}
	c := &f.out[f.outAt]
	f.outAt++
	return c, true
}

// pop returns the earliest event of the sort window, valid until the next pop.
func (f *Folder) pop() *trace.Event {
	ev := f.sort.Pop()
	f.Stats.Unordered = f.sort.Late
	return ev
}

// path returns the state of path id with its name resolved.
func (f *Folder) path(id uint32) *pathInfo {
	pi := f.paths.get(id, true)
	if pi.resolved {
		return pi
	}
	pi.resolved = true
	if id == 0 {
		pi.bad = true
	} else {
		pi.name = f.names.PathName(id)
		pi.parent = Parent(pi.name)
		if len(pi.name) > 0 && pi.name[0] == '?' || CheckName(pi.name) != nil {
			pi.bad = true
		}
	}
	return pi
}

func (f *Folder) thread(tid uint32) *threadState {
	t, ok := f.threads[tid]
	if !ok {
		if n := len(f.spare); n > 0 {
			t = f.spare[n-1]
			f.spare = f.spare[:n-1]
		} else {
			t = &threadState{}
		}
		f.threads[tid] = t
	}
	return t
}

// forget drops the state of a thread that holds nothing and is not listed.
func (f *Folder) forget(tid uint32, t *threadState) {
	delete(f.threads, tid)
	t.clearHeld()
	if len(f.spare) < 64 {
		f.spare = append(f.spare, t)
	}
}

// flushAll releases every held call (end of trace), threads in id order. It reports
// whether anything was queued.
func (f *Folder) flushAll() bool {
	tids := make([]uint32, 0, len(f.threads))
	for tid, t := range f.threads {
		if len(t.held) > 0 {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	for _, tid := range tids {
		f.release(tid)
	}
	return len(f.out) > f.outAt
}

// pieceWait is how long a held read or write waits for its next piece when the kernel's
// legs say its system call had not returned yet (a piece with an entry but no return).
const pieceWait = 1e9 // ns

// expire releases the held calls of threads whose oldest held call ended longer ago than
// any fold or merge could reach, before the event starting at now is folded: otherwise a
// thread that goes quiet after a lookup would have it dispatched after later calls of
// other threads on the same path. It also drops the threads that hold nothing any more.
func (f *Folder) expire(now int64) {
	horizon := max(f.opts.FoldWindow, f.opts.MergeGap)
	j := 0
	for _, h := range f.holding {
		t := h.t
		if len(t.held) > 0 {
			c := &t.held[0]
			wait := horizon
			if c.unfinished() {
				wait = max(wait, pieceWait)
			}
			if c.Start+c.Dur+wait < now {
				f.release(h.tid)
			}
		}
		if len(t.held) == 0 {
			t.listed = false
			f.forget(h.tid, t)
			continue
		}
		f.holding[j] = h
		j++
	}
	clear(f.holding[j:])
	f.holding = f.holding[:j]
}

// release emits the calls held for tid.
func (f *Folder) release(tid uint32) {
	t := f.threads[tid]
	if t == nil || len(t.held) == 0 {
		return
	}
	for i := range t.held {
		f.emit(&t.held[i])
	}
	t.clearHeld()
}

// feed takes one event in start order.
func (f *Folder) feed(ev *trace.Event) {
	if len(f.holding) > 0 {
		f.expire(ev.Start)
	}
	f.feed1(ev)
	t := f.threads[ev.Tid]
	switch {
	case t == nil || t.listed:
	case len(t.held) > 0:
		if len(f.holding) >= maxHolding {
			// As many threads hold calls as a real job never has at once: the one
			// holding longest issues them now rather than each event scanning them all.
			f.release(f.holding[0].tid)
		}
		t.listed = true
		f.holding = append(f.holding, holder{ev.Tid, t})
	default:
		f.forget(ev.Tid, t)
	}
}

func (f *Folder) emit(c *Call) { f.out = append(f.out, *c) }
