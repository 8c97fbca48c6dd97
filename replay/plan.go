package replay

import (
	"io"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// Source is the stream of recorded events the planner reads; *trace.Reader satisfies it.
type Source interface {
	Header() *trace.Header
	Next() (*trace.Event, error)
	PathName(id uint32) string
	Files() []trace.File
	Processes() []trace.Process
}

// opKind is the system call (or backend method) a replayOp issues.
type opKind uint8

// Replay op kinds. See the package documentation for the FUSE op each comes from.
const (
	kSkip      opKind = iota // counted, not issued (locks, ioctl, chown, ...)
	kStat                    // lstat(path)
	kFstat                   // fstat(fd)
	kAccess                  // faccessat(path, mask, AT_SYMLINK_NOFOLLOW)
	kOpen                    // openat2(path, flags, mode)
	kClose                   // close(fd)
	kRead                    // pread(fd, size, off)
	kWrite                   // pwrite(fd, size, off)
	kReaddir                 // getdents64(fd)
	kFsync                   // fsync / fdatasync
	kFallocate               // fallocate(fd, mode, off, len)
	kFtruncate               // ftruncate(fd, size)
	kTruncate                // open + ftruncate + close
	kChmod                   // fchmodat
	kUtimes                  // utimensat(now)
	kMkdir
	kMknod
	kUnlink
	kRmdir
	kRename
	kLink
	kSymlink
	kReadlink
	kStatfs
	kGetxattr
	kListxattr
	kSetxattr
	kRemovexattr
	kLseek
	kChown // lchown to the replaying user
	kLock  // fcntl(F_OFD_GETLK / F_OFD_SETLK / F_OFD_SETLKW)
	kCopy  // copy_file_range(fd, fd2), or pread+pwrite where the backend cannot copy
	numKinds
)

var kindNames = [numKinds]string{"skip", "lstat", "fstat", "access", "open", "close", "pread", "pwrite",
	"getdents", "fsync", "fallocate", "ftruncate", "truncate", "chmod", "utimes", "mkdir", "mknod",
	"unlink", "rmdir", "rename", "link", "symlink", "readlink", "statfs", "getxattr", "listxattr",
	"setxattr", "removexattr", "lseek", "chown", "fcntl-lock", "copy_file_range"}

func (k opKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "kind?"
}

// maxDeps is the most resources one op orders on.
const maxDeps = 5

// maxOverlap bounds replayOp.Overlap: a thread's replayed queue depth is at most
// maxOverlap+1 (io_uring and libaio applications rarely go beyond 128).
const maxOverlap = 255

// opDep says: before this op starts, Need ops on resource Res must have completed.
type opDep struct {
	Res  uint32
	Need uint32
}

// replayOp is one replay unit: the system call standing for one or more recorded events.
type replayOp struct {
	Seq    uint64   // dispatch order, from 1
	Kind   opKind   // what to issue
	Rec    trace.Op // op code written to the replay trace (the recorded primary event's)
	Worker uint32   // traced thread whose worker issues it
	Tid    uint32   // recorded caller
	Pid    uint32
	Start  int64 // recorded start of the first folded event (ns since the trace origin)
	Dur    int64 // recorded duration of the primary event(s)
	Think  int64 // recorded gap since the previous op of Worker ended (see AfterIssue); -1: first of its worker
	// Overlap is the number of earlier ops of Worker still running when this one started
	// in the recording (at most maxOverlap): the thread's queue depth, less one. The op is
	// issued once the others have completed, while those may still run.
	Overlap uint16
	// AfterIssue says that no op of Worker completed between the start of its previous op
	// and this one (a batch of submissions): Think is the gap since that start.
	AfterIssue bool

	Name, Name2 string // relative paths (Name2: rename/link/symlink second operand)
	// Walk is the directory the recorded call's path walk started from, as its folded
	// lookups show (the parent of the shallowest one; the parent of Name when none was
	// folded): a Walker backend starts the replayed call's walk there.
	Walk              string
	PathID, PathID2   uint32 // recorded path ids
	OutPath, OutPath2 uint32 // path ids in the replay trace (set by the engine)

	Handle uint64 // recorded handle
	Slot   int32  // index of the handle's open file in the engine's table, -1 none
	// Handle2, Slot2 and Offset2 are copy_file_range's output handle, its open file and
	// the output offset (kCopy only).
	Handle2 uint64
	Slot2   int32
	Offset2 int64
	Offset  int64
	Size    int64
	Flags   uint32
	Mode    uint32

	WantErrno uint16
	WantRet   int64
	CheckRet  bool // compare the returned byte count with WantRet
	Implicit  bool // an open the trace never showed (handle opened before the trace began)
	Events    uint16
	// Reqs is the number of recorded requests the op stands for: its own and the folded
	// ones (path walk lookups, probes). FoldDur is the folded requests' recorded time. Both
	// lie inside Think, with one recording-layer round trip per request (see RoundTrip).
	Reqs    uint16
	FoldDur int64
	// Child is a descendant process whose op ended during this op's think gap, at
	// recorded time ChildEnd (the latest such): the thread was waiting for it (see
	// children.go). 0: none.
	Child    uint32
	ChildEnd int64

	NDeps uint8
	Deps  [maxDeps]opDep
}

// PlanOptions tune how recorded FUSE events are folded into replay ops.
type PlanOptions struct {
	// Window is the number of events held to restore start-time order (default 65536).
	Window int
	// FoldWindow is the longest gap between a lookup's end and the op of the same thread it
	// is folded into (default 2 ms).
	FoldWindow int64
	// MergeGap is the longest gap between two pieces of one split read or write (default
	// 200 µs).
	MergeGap int64
	// NoFold replays every lookup as its own lstat (for a syscall-level trace).
	NoFold bool
}

func (o *PlanOptions) defaults() {
	if o.Window <= 0 {
		o.Window = 1 << 16
	}
	if o.FoldWindow <= 0 {
		o.FoldWindow = 2e6
	}
	if o.MergeGap <= 0 {
		o.MergeGap = 200e3
	}
}

// FoldStats counts what planning did to the recorded events.
type FoldStats struct {
	Events    uint64               // recorded events read
	ByOp      [trace.NumOps]uint64 // recorded events read, per op
	Folded    [trace.NumOps]uint64 // events folded into another op (or dropped as kernel traffic)
	Merged    uint64               // read/write pieces merged into the previous piece
	Implicit  uint64               // implicit opens added for handles opened before the trace
	Unknown   uint64               // events with an unknown path, skipped
	Escapes   uint64               // events whose path is refused (absolute, "..")
	Unordered uint64               // events that arrived after the sort window had passed them
}

type pathInfo struct {
	name      string
	res       uint32 // resource id of the path
	parentRes uint32 // resource id of the parent directory
	bad       bool   // name refused by CheckName or unknown
}

// resource bookkeeping for the overlap-aware ordering rule.
type resState struct {
	started uint32
	pending []int64 // recorded end times of started ops that may not have ended yet
}

type handleState struct {
	node     uint64 // FUSE node id of the open file (0 if unknown)
	worker   uint32
	slot     int32
	pathID   uint32
	flushErr uint16
	flushDur int64
	flushed  bool
	dir      bool
	// pos is where the handle's last write or copy ended: the file position a
	// copy_file_range with no output offset writes at. Only a version-1 trace needs it
	// (it records only the input offset).
	pos int64
}

type threadState struct {
	held   []replayOp // lookups waiting to be folded, then at most one mergeable data op last
	listed bool       // in planner.holding
	// The worker's planned ops: the recorded ends of those that may still be running,
	// the latest end of those that had ended, and the latest start.
	running   []int64
	doneEnd   int64
	lastStart int64
	started   bool
}

// planner turns a stream of recorded events into replay ops in a dispatch order that
// keeps each thread's program order. It is used from one goroutine.
type planner struct {
	src   Source
	opts  PlanOptions
	fuse  bool // a FUSE recording: estimate the layer's round trip
	off2  bool // the trace records copy_file_range's output offset (format version ≥ 2)
	rtt   rttEstimator
	procs procTree

	// The sort window: events live in slots of evs; heap is a min-heap of slot indices by
	// (Start, file order); free lists unused slots.
	evs     []trace.Event
	heap    []heapEntry
	free    []int32
	seq     uint64
	eof     bool
	lastOut int64

	paths    map[uint32]*pathInfo
	resByDir map[string]uint32
	nextRes  uint32
	res      []resState // by resource id
	handles  map[uint64]*handleState
	// superseded holds a handle's previous incarnation when an open reused its number
	// before the old one's release was seen: go-fuse frees the number when the release
	// starts, and the open that reuses it may have started earlier.
	superseded map[uint64]*handleState
	byPath     map[uint32]uint64 // path id -> an open handle on it (for fstat/ftruncate)
	threads    map[uint32]*threadState
	holding    []uint32 // threads that may hold ops (see expire)
	freeSlot   []int32
	nSlots     int32

	cur     trace.Event
	slotRes []resState // by slot

	out   []replayOp // ready ops, FIFO
	outAt int
	opSeq uint64

	Stats FoldStats
}

func newPlanner(src Source, o PlanOptions) *planner {
	o.defaults()
	return &planner{
		src: src, opts: o, fuse: recordedThroughFUSE(src.Header()), off2: src.Header().Version >= trace.Version2,
		paths: map[uint32]*pathInfo{}, resByDir: map[string]uint32{},
		handles: map[uint64]*handleState{}, byPath: map[uint32]uint64{}, superseded: map[uint64]*handleState{},
		threads: map[uint32]*threadState{}, nextRes: 1, res: make([]resState, 1, 1024),
		lastOut: -1 << 62,
	}
}

// Resources returns the number of resource ids handed out so far.
func (p *planner) Resources() uint32 { return p.nextRes }

// Slots returns the size the open-file table needs.
func (p *planner) Slots() int32 { return p.nSlots }

func (p *planner) newRes() uint32 {
	r := p.nextRes
	p.nextRes++
	p.res = append(p.res, resState{})
	return r
}

func (p *planner) dirRes(name string) uint32 {
	if r, ok := p.resByDir[name]; ok {
		return r
	}
	r := p.newRes()
	p.resByDir[name] = r
	return r
}

func (p *planner) path(id uint32) *pathInfo {
	if pi, ok := p.paths[id]; ok {
		return pi
	}
	pi := &pathInfo{}
	if id == 0 {
		pi.bad = true
	} else {
		pi.name = p.src.PathName(id)
		if len(pi.name) > 0 && pi.name[0] == '?' || CheckName(pi.name) != nil {
			pi.bad = true
		}
	}
	if !pi.bad {
		pi.res = p.dirRes(pi.name) // one resource per name, shared with its use as a parent
		if pi.name != "" {
			pi.parentRes = p.dirRes(parentOf(pi.name))
		}
	}
	p.paths[id] = pi
	return pi
}

// next returns the next op in dispatch order, or io.EOF.
func (p *planner) next() (*replayOp, error) {
	for p.outAt >= len(p.out) {
		p.out, p.outAt = p.out[:0], 0
		ev, err := p.nextEvent()
		if err == io.EOF {
			if !p.flushAll() {
				return nil, io.EOF
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		p.feed(ev)
	}
	op := &p.out[p.outAt]
	p.outAt++
	return op, nil
}

// nextEvent returns recorded events in start order within the sort window.
func (p *planner) nextEvent() (*trace.Event, error) {
	for !p.eof && len(p.heap) < p.opts.Window {
		ev, err := p.src.Next()
		if err == io.EOF {
			p.eof = true
			break
		}
		if err != nil {
			return nil, err
		}
		p.seq++
		var slot int32
		if n := len(p.free); n > 0 {
			slot = p.free[n-1]
			p.free = p.free[:n-1]
			p.evs[slot] = *ev
		} else {
			slot = int32(len(p.evs))
			p.evs = append(p.evs, *ev)
		}
		p.heap = append(p.heap, heapEntry{start: ev.Start, seq: p.seq, slot: slot})
		p.up(len(p.heap) - 1)
	}
	if len(p.heap) == 0 {
		return nil, io.EOF
	}
	slot := p.heap[0].slot
	n := len(p.heap) - 1
	p.heap[0] = p.heap[n]
	p.heap = p.heap[:n]
	p.down(0)
	p.free = append(p.free, slot)
	p.cur = p.evs[slot]
	if p.cur.Start < p.lastOut {
		p.Stats.Unordered++
	} else {
		p.lastOut = p.cur.Start
	}
	return &p.cur, nil
}

// heapEntry is a sort window slot keyed by (start, file order).
type heapEntry struct {
	start int64
	seq   uint64
	slot  int32
}

func (p *planner) less(i, j int) bool {
	a, b := &p.heap[i], &p.heap[j]
	if a.start != b.start {
		return a.start < b.start
	}
	return a.seq < b.seq
}

func (p *planner) swap(i, j int) { p.heap[i], p.heap[j] = p.heap[j], p.heap[i] }

func (p *planner) up(i int) {
	for i > 0 {
		par := (i - 1) / 2
		if !p.less(i, par) {
			return
		}
		p.swap(i, par)
		i = par
	}
}

func (p *planner) down(i int) {
	n := len(p.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && p.less(r, l) {
			m = r
		}
		if !p.less(m, i) {
			return
		}
		p.swap(i, m)
		i = m
	}
}

func (p *planner) thread(tid uint32) *threadState {
	t, ok := p.threads[tid]
	if !ok {
		t = &threadState{}
		p.threads[tid] = t
	}
	return t
}

// flushAll releases every held op (end of trace), threads in id order. It reports
// whether anything was queued.
func (p *planner) flushAll() bool {
	tids := make([]uint32, 0, len(p.threads))
	for tid, t := range p.threads {
		if len(t.held) > 0 {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	for _, tid := range tids {
		p.release(tid)
	}
	return len(p.out) > p.outAt
}

// expire releases the held ops of threads whose oldest held op ended longer ago than any
// fold or merge could reach, before the event starting at now is planned: otherwise a
// thread that goes quiet after a lookup would have it dispatched after later ops of
// other threads on the same path.
func (p *planner) expire(now int64) {
	horizon := max(p.opts.FoldWindow, p.opts.MergeGap)
	j := 0
	for _, tid := range p.holding {
		t := p.threads[tid]
		if len(t.held) > 0 {
			if h := &t.held[0]; h.Start+h.Dur+horizon < now {
				p.release(tid)
			}
		}
		if len(t.held) == 0 {
			t.listed = false
			continue
		}
		p.holding[j] = tid
		j++
	}
	p.holding = p.holding[:j]
}

// release emits the ops held for tid.
func (p *planner) release(tid uint32) {
	t := p.threads[tid]
	if t == nil || len(t.held) == 0 {
		return
	}
	for i := range t.held {
		p.emit(&t.held[i])
	}
	t.held = t.held[:0]
}

// feed takes one recorded event.
func (p *planner) feed(ev *trace.Event) {
	if len(p.holding) > 0 {
		p.expire(ev.Start)
	}
	p.feed1(ev)
	if t := p.threads[ev.Tid]; t != nil && len(t.held) > 0 && !t.listed {
		t.listed = true
		p.holding = append(p.holding, ev.Tid)
	}
}

// feed1 plans one event: it folds kernel-generated requests into the op they belong to,
// merges split reads and writes, and holds or emits the resulting op.
func (p *planner) feed1(ev *trace.Event) {
	p.Stats.Events++
	if p.fuse {
		p.rtt.observe(ev)
	}
	if ev.Op < trace.NumOps {
		p.Stats.ByOp[ev.Op]++
	}
	if p.feedEnd(ev) {
		return
	}
	if ev.Op == trace.OpWrite && ev.Errno == 0 {
		if h := p.handles[ev.Handle]; h != nil {
			h.pos = ev.Offset + ev.Ret // also for a piece merged below
		}
	}
	pi, pi2, ok := p.eventPaths(ev)
	if !ok {
		return
	}
	t := p.thread(ev.Tid)
	if ev.Op == trace.OpLookup && !p.opts.NoFold {
		p.holdLookup(ev, t, pi)
		return
	}
	walk, foldReqs, foldDur := p.foldWalk(ev, t, pi, pi2)
	if ev.Op == trace.OpGetattr && !p.opts.NoFold {
		if n := len(t.held); n > 0 && t.held[n-1].Rec == trace.OpGetxattr && t.held[n-1].Name == pi.name {
			op := p.base(ev, pi, nil)
			op.Kind = kStat
			t.held = append(t.held, op)
			return
		}
	}
	// Another thread's held ops on a name this op creates or removes happened before it:
	// issue them first, or they would see the name the other way (rm's lookup of a
	// directory the next command creates).
	if changesName(ev.Op) && ev.Errno == 0 && len(p.holding) > 0 {
		p.releaseUnder(ev.Tid, pi.name, ev.Start)
		if pi2 != nil {
			p.releaseUnder(ev.Tid, pi2.name, ev.Start)
		}
	}
	if p.mergePiece(ev, t) {
		return
	}
	p.release(ev.Tid)

	op := p.base(ev, pi, pi2)
	op.Walk = walk
	op.fold(foldReqs, foldDur)
	if !p.setKind(ev, &op, pi, pi2) {
		return
	}
	if op.Kind == kGetxattr && op.Size == 0 && !p.opts.NoFold && len(t.held) == 0 {
		t.held = append(t.held, op) // maybe the kernel's privilege probe: see foldWalk
		return
	}
	if op.Kind == kRead || op.Kind == kWrite {
		if n := len(t.held); n == 0 { // hold it: the next piece may merge into it
			t.held = append(t.held, op)
			return
		}
	}
	p.emit(&op)
}

// feedEnd takes the events that end a handle or a node rather than become an op of their
// own (forget, flush, release), and reports whether ev was one.
func (p *planner) feedEnd(ev *trace.Event) bool {
	switch ev.Op {
	case trace.OpForget:
		p.Stats.Folded[ev.Op]++
		return true
	case trace.OpFlush:
		if h := p.handleOf(ev); h != nil {
			h.flushed, h.flushErr, h.flushDur = true, ev.Errno, ev.Dur
			// A close ends the reads and writes held for merging on the handle.
			p.releaseOn(h.slot)
		}
		p.Stats.Folded[ev.Op]++
		return true
	case trace.OpRelease, trace.OpReleasedir:
		p.close(ev)
		return true
	}
	return false
}

// eventPaths returns ev's paths (pi2 for a second operand other than a symlink's target),
// or false, counting the event, when one is unknown or leaves the root.
func (p *planner) eventPaths(ev *trace.Event) (pi, pi2 *pathInfo, ok bool) {
	pi = p.path(ev.Path)
	if pi.bad && ev.Op != trace.OpStatfs {
		if ev.Path == 0 || (len(pi.name) > 0 && pi.name[0] == '?') {
			p.Stats.Unknown++
		} else {
			p.Stats.Escapes++
		}
		return nil, nil, false
	}
	if ev.Path2 != 0 && ev.Op != trace.OpSymlink {
		pi2 = p.path(ev.Path2)
		if pi2.bad {
			p.Stats.Escapes++
			return nil, nil, false
		}
	}
	return pi, pi2, true
}

// holdLookup holds a lookup: it may be a step of the path walk of the thread's next op.
// A held lookup of an ancestor of this one was a step of this one's walk: it is folded.
func (p *planner) holdLookup(ev *trace.Event, t *threadState, pi *pathInfo) {
	walk := parentOf(pi.name)
	reqs, dur := t.dropHeld(p, func(h *replayOp) bool {
		if h.Kind == kStat && h.Rec == trace.OpLookup && IsUnder(pi.name, h.Name) && h.Name != pi.name {
			if len(h.Walk) < len(walk) {
				walk = h.Walk
			}
			return true
		}
		return false
	})
	if n := len(t.held); n > 0 && t.held[n-1].Kind != kStat {
		p.release(ev.Tid) // a held data op ends when the thread does something else
	}
	op := p.base(ev, pi, nil)
	op.Kind, op.Walk = kStat, walk
	op.fold(reqs, dur)
	t.held = append(t.held, op)
	if len(t.held) > 32 {
		p.emit(&t.held[0])
		t.held = append(t.held[:0], t.held[1:]...)
	}
}

// foldWalk folds the held requests that were part of ev's call: the lookups of its path
// walk (within FoldWindow), and the kernel's privilege probe before a setattr or write. It
// returns the directory the walk started from and the requests and time folded.
func (p *planner) foldWalk(ev *trace.Event, t *threadState, pi, pi2 *pathInfo) (walk string, reqs int, dur int64) {
	walk = parentOf(pi.name)
	if len(t.held) > 0 {
		reqs, dur = t.dropHeld(p, func(h *replayOp) bool {
			if h.Kind != kStat || h.Rec != trace.OpLookup || ev.Start-(h.Start+h.Dur) > p.opts.FoldWindow {
				return false
			}
			if IsUnder(pi.name, h.Name) {
				if len(h.Walk) < len(walk) {
					walk = h.Walk
				}
				return true
			}
			return pi2 != nil && IsUnder(pi2.name, h.Name)
		})
	}
	// The kernel probes security.capability (getxattr, size 0) and refreshes attributes
	// (getattr) before a chown, truncate or write that may have to drop privileges: a
	// replayed setattr or write makes it do so again.
	if (ev.Op == trace.OpSetattr || ev.Op == trace.OpWrite) && len(t.held) > 0 && !p.opts.NoFold {
		r, d := t.dropHeld(p, func(h *replayOp) bool {
			return (h.Rec == trace.OpGetxattr || h.Rec == trace.OpGetattr) && h.Name == pi.name &&
				ev.Start-(h.Start+h.Dur) <= p.opts.FoldWindow
		})
		reqs, dur = reqs+r, dur+d
	}
	return walk, reqs, dur
}

// mergePiece merges a read or write into the thread's held piece of the same buffer (a
// large request the kernel split, e.g. 1 MiB as 1048560+16 bytes with an unaligned
// buffer), and reports whether it did.
func (p *planner) mergePiece(ev *trace.Event, t *threadState) bool {
	if (ev.Op != trace.OpRead && ev.Op != trace.OpWrite) || len(t.held) == 0 {
		return false
	}
	h := &t.held[len(t.held)-1]
	if h.Rec == ev.Op && h.Handle == ev.Handle && h.WantErrno == 0 && ev.Errno == 0 &&
		h.WantRet == h.Size && h.Offset+h.Size == ev.Offset && h.Size >= 64<<10 && h.Size%4096 != 0 &&
		ev.Start-(h.Start+h.Dur) <= p.opts.MergeGap {
		h.Size += int64(ev.Size)
		h.WantRet += ev.Ret
		h.Dur = ev.End() - h.Start
		h.Events++
		p.Stats.Merged++
		p.Stats.Folded[ev.Op]++
		return true
	}
	return false
}

// setKind chooses the call op replays for ev, with the handles it uses. It returns false
// when the op cannot be replayed (counted).
func (p *planner) setKind(ev *trace.Event, op *replayOp, pi, pi2 *pathInfo) bool {
	switch ev.Op {
	case trace.OpGetattr, trace.OpStatx:
		op.Kind = kStat
		if fh, ok := p.byPath[ev.Path]; ok {
			if h := p.handles[fh]; h != nil && h.worker == ev.Tid {
				op.Kind, op.Handle, op.Slot = kFstat, fh, h.slot
			}
		}
	case trace.OpLookup: // NoFold
		op.Kind = kStat
	case trace.OpSetattr:
		p.setattrKind(ev, op)
	case trace.OpReadlink:
		op.Kind, op.CheckRet = kReadlink, true
	case trace.OpSymlink:
		op.Kind = kSymlink
		op.Name2 = p.src.PathName(ev.Path2)
	case trace.OpMknod:
		op.Kind = kMknod
	case trace.OpMkdir:
		op.Kind = kMkdir
	case trace.OpUnlink:
		op.Kind = kUnlink
	case trace.OpRmdir:
		op.Kind = kRmdir
	case trace.OpRename:
		op.Kind = kRename
	case trace.OpLink:
		op.Kind = kLink
	case trace.OpOpen, trace.OpCreate, trace.OpOpendir, trace.OpTmpfile:
		p.openKind(ev, op)
	case trace.OpRead, trace.OpWrite, trace.OpReaddir, trace.OpReaddirplus, trace.OpFsync,
		trace.OpFsyncdir, trace.OpFallocate, trace.OpLseek, trace.OpGetlk, trace.OpSetlk, trace.OpSetlkw:
		p.handleKind(ev, op, pi)
	case trace.OpCopyFileRange:
		return p.copyKind(ev, op, pi, pi2)
	case trace.OpStatfs:
		op.Kind = kStatfs
		op.Name, op.PathID = "", 0
	case trace.OpGetxattr:
		op.Kind = kGetxattr
	case trace.OpListxattr:
		op.Kind = kListxattr
	case trace.OpSetxattr:
		op.Kind = kSetxattr
	case trace.OpRemovexattr:
		op.Kind = kRemovexattr
	case trace.OpAccess:
		op.Kind = kAccess
	default: // ioctl, bmap, poll, ...
		op.Kind = kSkip
	}
	return true
}

// setattrKind chooses the call of a setattr by the attribute it sets: truncate (ftruncate
// on a handle the thread holds), chmod, utimes or chown.
func (p *planner) setattrKind(ev *trace.Event, op *replayOp) {
	switch {
	case ev.Flags&trace.SetattrSize != 0:
		op.Kind, op.Size = kTruncate, ev.Offset
		if fh, ok := p.byPath[ev.Path]; ok {
			if h := p.handles[fh]; h != nil && h.worker == ev.Tid && !h.dir {
				op.Kind, op.Handle, op.Slot = kFtruncate, fh, h.slot
			}
		}
	case ev.Flags&trace.SetattrMode != 0:
		op.Kind = kChmod
	case ev.Flags&trace.SetattrTimes != 0:
		op.Kind = kUtimes
	case ev.Flags&(trace.SetattrUID|trace.SetattrGID) != 0:
		op.Kind = kChown
	default:
		op.Kind = kSkip // only bits replay cannot express (ctime, lock owner, kill-priv)
	}
}

// openKind makes op the open of an open, create, opendir or tmpfile request, with the
// handle it opens.
func (p *planner) openKind(ev *trace.Event, op *replayOp) {
	op.Kind = kOpen
	switch ev.Op {
	case trace.OpCreate:
		op.Flags |= unix.O_CREAT
	case trace.OpOpendir:
		op.Flags = unix.O_RDONLY | unix.O_DIRECTORY
	}
	if ev.Errno != 0 {
		op.Slot = -1
		return
	}
	node := ev.Node // open, opendir: the node opened
	if ev.Op == trace.OpCreate || ev.Op == trace.OpTmpfile {
		node = ev.Node2 // the node created
	}
	p.opened(op, ev.Op == trace.OpOpendir, node)
}

// handleKind chooses the call of a request on an open handle, opening the handle
// implicitly if the trace never showed its open.
func (p *planner) handleKind(ev *trace.Event, op *replayOp, pi *pathInfo) {
	switch ev.Op {
	case trace.OpGetlk, trace.OpSetlk, trace.OpSetlkw:
		op.Kind = kLock
	case trace.OpRead:
		op.Kind, op.CheckRet = kRead, true
	case trace.OpWrite:
		op.Kind, op.CheckRet = kWrite, true
	case trace.OpReaddir, trace.OpReaddirplus:
		op.Kind = kReaddir
	case trace.OpFsync, trace.OpFsyncdir:
		op.Kind = kFsync
	case trace.OpFallocate:
		op.Kind = kFallocate
	case trace.OpLseek:
		op.Kind, op.CheckRet = kLseek, true
	}
	h := p.handles[ev.Handle]
	if h == nil {
		h = p.implicitOpen(ev, ev.Handle, ev.Path, pi, op.Kind == kReaddir)
	}
	op.Slot = h.slot
	if ev.Op == trace.OpWrite && ev.Errno == 0 {
		h.pos = ev.Offset + ev.Ret
	}
}

// copyKind makes op a copy_file_range between its two handles; false if the output's
// path is unknown.
func (p *planner) copyKind(ev *trace.Event, op *replayOp, pi, pi2 *pathInfo) bool {
	op.Kind, op.CheckRet = kCopy, true
	h := p.handles[ev.Handle]
	if h == nil {
		h = p.implicitOpen(ev, ev.Handle, ev.Path, pi, false)
	}
	op.Slot = h.slot
	if pi2 == nil {
		p.Stats.Unknown++
		return false
	}
	h2 := p.handles[ev.Handle2]
	if h2 == nil {
		h2 = p.implicitOpen(ev, ev.Handle2, ev.Path2, pi2, false)
	}
	op.Handle2, op.Slot2, op.Offset2 = ev.Handle2, h2.slot, ev.Offset2
	if !p.off2 {
		// A version-1 trace has the input offset only. cp and cat copy with the
		// output's file position (no output offset): where the output handle's last
		// write or copy ended (cp: the input offset; `cat a b > c`: the end of a).
		op.Offset2 = h2.pos
	}
	if ev.Errno == 0 {
		h2.pos = op.Offset2 + ev.Ret
	}
	return true
}

// dropHeld folds the held ops fn accepts (counting them as folded), returning the recorded requests and time they
// stood for (to be charged to the op they fold into).
func (t *threadState) dropHeld(p *planner, fn func(*replayOp) bool) (reqs int, dur int64) {
	j := 0
	for i := range t.held {
		if h := &t.held[i]; fn(h) {
			p.Stats.Folded[h.Rec]++
			reqs += int(h.Reqs)
			dur += h.Dur + h.FoldDur
			continue
		}
		t.held[j] = t.held[i]
		j++
	}
	t.held = t.held[:j]
	return reqs, dur
}

// fold charges folded requests to op.
func (op *replayOp) fold(reqs int, dur int64) {
	op.Reqs = uint16(min(int(op.Reqs)+reqs, 1<<16-1))
	op.FoldDur += dur
}

func (p *planner) base(ev *trace.Event, pi, pi2 *pathInfo) replayOp {
	op := replayOp{
		Rec: ev.Op, Worker: ev.Tid, Tid: ev.Tid, Pid: ev.Pid, Start: ev.Start, Dur: ev.Dur,
		Name: pi.name, PathID: ev.Path, Handle: ev.Handle, Slot: -1, Slot2: -1,
		Offset: ev.Offset, Size: int64(ev.Size), Flags: ev.Flags, Mode: ev.Mode,
		WantErrno: ev.Errno, WantRet: ev.Ret, Events: 1, Reqs: 1,
	}
	if pi2 != nil {
		op.Name2, op.PathID2 = pi2.name, ev.Path2
	}
	return op
}

func (p *planner) allocSlot() int32 {
	if n := len(p.freeSlot); n > 0 {
		s := p.freeSlot[n-1]
		p.freeSlot = p.freeSlot[:n-1]
		return s
	}
	p.nSlots++
	return p.nSlots - 1
}

func (p *planner) opened(op *replayOp, dir bool, node uint64) {
	if old := p.handles[op.Handle]; old != nil { // handle reused before its release was seen
		if prev := p.superseded[op.Handle]; prev != nil {
			p.freeSlot = append(p.freeSlot, prev.slot) // two reuses: the oldest is lost
		}
		p.superseded[op.Handle] = old
	}
	h := &handleState{worker: op.Worker, slot: p.allocSlot(), pathID: op.PathID, node: node, dir: dir}
	p.handles[op.Handle] = h
	p.byPath[op.PathID] = op.Handle
	op.Slot = h.slot
}

// implicitOpen adds an open of pi for handle fh, which the trace uses but never opened.
func (p *planner) implicitOpen(ev *trace.Event, fh uint64, pathID uint32, pi *pathInfo, dir bool) *handleState {
	op := p.base(ev, pi, nil)
	op.Kind, op.Rec, op.Implicit, op.Handle, op.PathID = kOpen, trace.OpOpen, true, fh, pathID
	op.Flags, op.WantErrno, op.WantRet, op.CheckRet, op.Dur, op.Events = unix.O_RDWR, 0, 0, false, 0, 0
	if dir {
		op.Flags = unix.O_RDONLY | unix.O_DIRECTORY
	}
	p.opened(&op, dir, ev.Node)
	p.Stats.Implicit++
	p.emit(&op)
	return p.handles[fh]
}

// changesName reports whether op creates, removes or renames a name.
func changesName(op trace.Op) bool {
	switch op {
	case trace.OpMkdir, trace.OpMknod, trace.OpSymlink, trace.OpLink, trace.OpUnlink, trace.OpRmdir,
		trace.OpRename, trace.OpCreate:
		return true
	}
	return false
}

// releaseUnder emits the held ops of threads other than tid on name or below it that
// started no later than start.
func (p *planner) releaseUnder(tid uint32, name string, start int64) {
	for _, o := range p.holding {
		if o == tid {
			continue
		}
		t := p.threads[o]
		for i := range t.held {
			if IsUnder(t.held[i].Name, name) && t.held[i].Start <= start {
				p.release(o)
				break
			}
		}
	}
}

// releaseOn emits the held ops of every thread that uses open-file slot s, before an op
// that ends the handle (flush, release) is planned: a read or write held for merging,
// often by another thread than the opener's (a shell redirection's file written by the
// command it started), must be issued before the close that followed it in the trace.
func (p *planner) releaseOn(s int32) {
	for _, tid := range p.holding {
		t := p.threads[tid]
		for i := range t.held {
			if h := &t.held[i]; h.Slot == s || (h.Kind == kCopy && h.Slot2 == s) {
				p.release(tid)
				break
			}
		}
	}
}

// close turns a release into a close in the opener's worker.
// handleOf returns the state of the handle a flush or release names: the previous
// incarnation of the number if the event is about that one's file (same node id; the
// same path when node ids are unknown, as in hand-made traces).
func (p *planner) handleOf(ev *trace.Event) *handleState {
	h := p.handles[ev.Handle]
	old := p.superseded[ev.Handle]
	if old == nil {
		return h
	}
	if ev.Node != 0 && old.node != 0 {
		if old.node == ev.Node && (h == nil || h.node != ev.Node) {
			return old
		}
		return h
	}
	if ev.Path != 0 && old.pathID == ev.Path && (h == nil || h.pathID != ev.Path) {
		return old
	}
	return h
}

func (p *planner) close(ev *trace.Event) {
	h := p.handleOf(ev)
	if h == nil {
		p.Stats.Folded[ev.Op]++
		return
	}
	if p.superseded[ev.Handle] == h {
		delete(p.superseded, ev.Handle)
	} else {
		delete(p.handles, ev.Handle)
	}
	if p.byPath[h.pathID] == ev.Handle {
		delete(p.byPath, h.pathID)
	}
	p.releaseOn(h.slot) // other threads' held reads and writes on the handle come first
	p.release(h.worker)
	pi := p.path(h.pathID)
	op := p.base(ev, pi, nil)
	op.Kind, op.Worker, op.Slot = kClose, h.worker, h.slot
	op.WantErrno, op.WantRet = ev.Errno, 0
	if h.flushed { // the application's close() is what flush timed
		op.Rec, op.Dur, op.WantErrno = trace.OpFlush, h.flushDur, h.flushErr
		p.Stats.Folded[ev.Op]++
		p.Stats.Folded[trace.OpFlush]--
		op.Events = 2
	}
	if op.Tid == 0 {
		op.Tid = h.worker
	}
	p.emit(&op)
	p.freeSlot = append(p.freeSlot, h.slot)
}

// emit assigns the op its sequence number, think time and ordering dependencies and
// queues it.
func (p *planner) emit(op *replayOp) {
	p.opSeq++
	op.Seq = p.opSeq
	anchor := p.threadOverlap(op)
	p.procs.plan(p.src, op, anchor)
	op.NDeps = 0
	if op.Kind != kStatfs {
		if pi := p.paths[op.PathID]; pi != nil && !pi.bad {
			p.dep(op, pi.res)
			if mutatesParent(op) && pi.name != "" {
				p.dep(op, pi.parentRes)
			}
		}
		if op.Name2 != "" && op.Kind != kSymlink {
			if pi := p.paths[op.PathID2]; pi != nil && !pi.bad {
				p.dep(op, pi.res)
				if op.Kind == kRename || op.Kind == kLink {
					p.dep(op, pi.parentRes)
				}
			}
		}
	}
	if op.Slot >= 0 {
		p.dep(op, slotRes(op.Slot))
	}
	if op.Kind == kCopy && op.Slot2 >= 0 && op.Slot2 != op.Slot {
		p.dep(op, slotRes(op.Slot2))
	}
	p.out = append(p.out, *op)
}

// threadOverlap sets op's Overlap (the worker's earlier ops still running when it started
// in the recording), Think and AfterIssue, and returns the recorded time Think counts from:
// the thread's latest completion before op, or the previous op's start when the thread
// issued op right after it with no completion in between (a batch of submissions).
func (p *planner) threadOverlap(op *replayOp) int64 {
	t := p.thread(op.Worker)
	j := 0
	for _, end := range t.running {
		if end > op.Start {
			t.running[j] = end
			j++
		} else {
			t.doneEnd = max(t.doneEnd, end)
		}
	}
	t.running = t.running[:j]
	op.Overlap = uint16(min(len(t.running), maxOverlap))
	anchor := t.doneEnd
	switch {
	case !t.started:
		op.Think, t.started = -1, true
	case len(t.running) > 0 && t.lastStart > t.doneEnd:
		op.AfterIssue, anchor = true, t.lastStart
		op.Think = max(op.Start-t.lastStart, 0)
	default:
		op.Think = max(op.Start-t.doneEnd, 0)
	}
	t.running = append(t.running, op.Start+op.Dur)
	t.lastStart = max(t.lastStart, op.Start)
	return anchor
}

func mutatesParent(op *replayOp) bool {
	switch op.Kind {
	case kMkdir, kMknod, kUnlink, kRmdir, kRename, kLink, kSymlink:
		return true
	case kOpen:
		return op.Flags&unix.O_CREAT != 0 && op.WantErrno == 0
	}
	return false
}

// slotRes maps an open-file slot to a resource id: slots count down from the top.
func slotRes(s int32) uint32 { return ^uint32(s) }

// dep adds an ordering dependency of op on resource r (overlap-aware: ops on r whose
// recorded run overlapped this op's start are not waited for).
func (p *planner) dep(op *replayOp, r uint32) {
	for i := 0; i < int(op.NDeps); i++ {
		if op.Deps[i].Res == r {
			return
		}
	}
	var rs *resState
	if r > 1<<31 {
		rs = p.slotState(^r)
	} else {
		rs = &p.res[r]
	}
	j := 0
	for _, end := range rs.pending {
		if end > op.Start {
			rs.pending[j] = end
			j++
		}
	}
	rs.pending = rs.pending[:j]
	need := rs.started - uint32(len(rs.pending))
	if r > 1<<31 && (op.Kind == kOpen || op.Kind == kClose) {
		// An open-file slot is reused only after the previous handle's close, and a
		// handle is closed only after its other calls, whatever the recorded times say:
		// all the slot's earlier ops must complete. Calls between the open and the
		// close that overlapped in the trace (an application's queue of reads on one
		// descriptor) may overlap again.
		need = rs.started
	}
	rs.started++
	rs.pending = append(rs.pending, op.Start+op.Dur)
	if need > 0 && int(op.NDeps) < maxDeps {
		op.Deps[op.NDeps] = opDep{Res: r, Need: need}
		op.NDeps++
	} else if need == 0 && int(op.NDeps) < maxDeps {
		op.Deps[op.NDeps] = opDep{Res: r, Need: 0}
		op.NDeps++ // still counted on completion
	}
}

func (p *planner) slotState(s uint32) *resState {
	for uint32(len(p.slotRes)) <= s {
		p.slotRes = append(p.slotRes, resState{})
	}
	return &p.slotRes[s]
}
