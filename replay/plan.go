package replay

import (
	"io"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Source is the stream of recorded events the planner reads; *trace.Reader satisfies it.
type Source interface {
	Header() *trace.Header
	Next() (*trace.Event, error)
	PathName(id uint32) string
	Files() []trace.File
	Processes() []trace.Process
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
	Seq    uint64    // dispatch order, from 1
	Kind   fold.Kind // what to issue
	Rec    trace.Op  // op code written to the replay trace (the recorded primary event's)
	Worker uint32    // traced thread whose worker issues it
	Tid    uint32    // recorded caller
	Pid    uint32
	Start  int64 // recorded start of the first folded event (ns since the trace origin)
	Dur    int64 // recorded duration of the primary event(s)
	Idle   int64 // within Dur, the time none of a merged read's or write's pieces was in the storage
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
	// the output offset (fold.Copy only).
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
	// CallStart and CallEnd are the recorded application system call the op stands for,
	// as the kernel saw it enter and return (fold.Call's; 0: not measured). AppThink is
	// the time the thread spent outside the file system before it: from the return of its
	// previous op's system call to this one's entry, when ThinkMeasured (otherwise think
	// mode takes the round trip estimate out of Think).
	CallStart, CallEnd int64
	AppThink           int64
	ThinkMeasured      bool
	// RunDelay is the part of AppThink the thread waited for a CPU while it was recorded
	// (fold.Call's, plus one; 0: not measured).
	RunDelay int64
	// WakeTid is the traced thread whose progress the op waits for, when another thread
	// of the job woke this one between its previous call and this op's (fold.Call's Waker,
	// as the kernel saw it: a thread blocked in pthread_join, wait4 or on a pipe): the op
	// is due once WakeTid's op that ended at recorded time WakeEnd (its last op to end
	// before the wake-up) has completed, plus WakeGap, the recorded time from that op's
	// return to this op's call; and no sooner than AfterWake (the thread's own time from
	// its wake-up to this call) after its previous op. 0: none.
	WakeTid          uint32
	WakeEnd, WakeGap int64
	AfterWake        int64
	// Child is a descendant process whose op ended during this op's think gap, at
	// recorded time ChildEnd (the latest such): the thread was waiting for it (see
	// children.go). 0: none.
	Child    uint32
	ChildEnd int64
	// ChildCallEnd is the return of the descendant's system call that ended at ChildEnd
	// (0: not measured).
	ChildCallEnd int64

	NDeps uint8
	Deps  [maxDeps]opDep
}

// PlanOptions tune how recorded FUSE events are folded into replay ops (see fold.Options;
// NoFold replays every lookup as its own lstat, for a syscall-level trace).
type PlanOptions = fold.Options

// FoldStats count what planning did to the recorded events.
type FoldStats = fold.Stats

// pathRes are the resources of a path: its own and its parent directory's.
type pathRes struct {
	res, parent uint32
	ok          bool // the folder accepted the path
}

// resource bookkeeping for the overlap-aware ordering rule.
type resState struct {
	started uint32
	pending []int64 // recorded end times of started ops that may not have ended yet
}

// emitState is what emit keeps per worker: the recorded ends of its planned ops that may
// still be running, the latest end of those that had ended, and the latest start.
// span is a recorded op's [start, end).
type span struct{ start, end int64 }

type emitState struct {
	running   []span // the thread's ops that had not ended at the latest op's start
	doneEnd   int64
	lastStart int64
	started   bool
	// The thread's latest system call (entry) among its ops, and the latest call whose
	// return is known, with its entry: AppThink counts from that return when the two are
	// the same call.
	callStart, callEnd, callEndOf int64
	// ends are the recorded ends (Start+Dur) and call returns of the thread's latest ops,
	// for the ops another thread woke up after (wakeEdge).
	ends [wakeRing]opEnd
	nEnd int
}

// wakeRing is how many of a thread's latest ops a wake-up edge can point to.
const wakeRing = 16

// opEnd is an op's recorded end and its system call's return (0: not measured).
type opEnd struct{ end, callEnd int64 }

// wakeEdge points op, woken by op.WakeTid at recorded time op.WakeEnd, at the waker's
// latest op that ended before the wake-up; without one (the waker had not yet ended an op
// the planner saw) the op keeps its think time.
func (p *planner) wakeEdge(op *replayOp) {
	waker, woken := op.WakeTid, op.WakeEnd
	op.WakeTid, op.WakeEnd = 0, 0
	t := p.threads[waker]
	if t == nil {
		return
	}
	var best opEnd
	for i := range min(t.nEnd, wakeRing) {
		if e := t.ends[i]; e.end <= woken && e.end > best.end {
			best = e
		}
	}
	if best.end == 0 {
		return
	}
	from := best.callEnd
	if from == 0 || from > woken {
		from = best.end
	}
	op.WakeTid, op.WakeEnd, op.WakeGap = waker, best.end, max(op.CallStart-from, 0)
}

// planner turns a stream of recorded events into replay ops in a dispatch order that
// keeps each thread's program order: the folder finds the calls; the planner adds the
// think times, the waits for child processes and the ordering dependencies. It is used
// from one goroutine.
type planner struct {
	*fold.Folder
	src   Source
	fuse  bool // a FUSE recording: estimate the layer's round trip
	rtt   rttEstimator
	procs procTree

	paths    map[uint32]pathRes
	resByDir map[string]uint32
	nextRes  uint32
	res      []resState // by resource id
	slotRes  []resState // by slot
	threads  map[uint32]*emitState

	op    replayOp // the op next returned
	opSeq uint64
}

func newPlanner(src Source, o PlanOptions) *planner {
	p := &planner{
		Folder: fold.New(src, src.Header(), o),
		src:    src, fuse: recordedThroughFUSE(src.Header()),
		paths: map[uint32]pathRes{}, resByDir: map[string]uint32{},
		threads: map[uint32]*emitState{}, nextRes: 1, res: make([]resState, 1, 1024),
	}
	if p.fuse {
		p.OnEvent = p.rtt.observe
	}
	return p
}

// Resources returns the number of resource ids handed out so far.
func (p *planner) Resources() uint32 { return p.nextRes }

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

// path returns the resources of path id: one per name, shared with its use as a parent.
func (p *planner) path(id uint32) pathRes {
	if pr, ok := p.paths[id]; ok {
		return pr
	}
	var pr pathRes
	if name, ok := p.PathName(id); ok {
		pr = pathRes{res: p.dirRes(name), ok: true}
		if name != "" {
			pr.parent = p.dirRes(fold.Parent(name))
		}
		p.paths[id] = pr
	}
	return pr
}

// next returns the next op in dispatch order, or io.EOF. The op is valid until the next
// call.
func (p *planner) next() (*replayOp, error) {
	f := p.Folder
	for {
		if c, ok := f.Next(); ok {
			p.op = opOf(c)
			p.emit(&p.op)
			return &p.op, nil
		}
		if f.Ended() {
			return nil, io.EOF
		}
		ev, err := p.src.Next()
		if err == io.EOF {
			f.End()
			continue
		}
		if err != nil {
			return nil, err
		}
		f.Add(ev)
	}
}

// opOf makes the replay op of a call: the call's arguments as replay issues it.
func opOf(c *fold.Call) replayOp {
	op := replayOp{
		Kind: c.Kind, Rec: c.Rec, Worker: c.Worker, Tid: c.Tid, Pid: c.Pid, Start: c.Start, Dur: c.Dur,
		Name: c.Name, Name2: c.Name2, Walk: c.Walk, PathID: c.PathID, PathID2: c.PathID2,
		Handle: c.Handle, Slot: c.Slot, Handle2: c.Handle2, Slot2: c.Slot2, Offset2: c.Offset2,
		Offset: c.Offset, Size: c.Size, Flags: c.Flags, Mode: c.Mode,
		WantErrno: c.Errno, WantRet: c.Ret, Implicit: c.Implicit,
		Events: c.Events, Reqs: c.Reqs, FoldDur: c.FoldDur, Idle: c.Idle,
		CallStart: c.CallStart, CallEnd: c.CallEnd, RunDelay: c.RunDelay,
	}
	if c.Waker != 0 && c.Waker != c.Worker && c.WokenAt != 0 && c.CallStart >= c.WokenAt {
		op.WakeTid, op.WakeEnd, op.AfterWake = c.Waker, c.WokenAt, c.CallStart-c.WokenAt // WakeEnd: the wake-up, until emit finds the op
	}
	if c.Tid != c.Worker {
		// Another thread's call (a close of a file this worker opened): its times say
		// nothing of this worker's think time.
		op.CallStart, op.CallEnd, op.RunDelay = 0, 0, 0
		op.WakeTid = 0
	}
	switch c.Kind {
	case fold.Read, fold.Write, fold.Readlink, fold.Lseek, fold.Copy:
		op.CheckRet = true
	case fold.Open:
		switch {
		case c.Implicit && c.Dir:
			op.Flags = unix.O_RDONLY | unix.O_DIRECTORY
		case c.Implicit:
			op.Flags = unix.O_RDWR
		case c.Rec == trace.OpCreate:
			op.Flags |= unix.O_CREAT
		case c.Rec == trace.OpOpendir:
			op.Flags = unix.O_RDONLY | unix.O_DIRECTORY
		}
	}
	return op
}

// emit assigns the op its sequence number, think time and ordering dependencies.
func (p *planner) emit(op *replayOp) {
	p.opSeq++
	op.Seq = p.opSeq
	if op.WakeTid != 0 {
		p.wakeEdge(op)
	}
	anchor := p.threadOverlap(op)
	p.procs.plan(p.src, op, anchor)
	op.NDeps = 0
	if op.Kind != fold.Statfs {
		if pr := p.path(op.PathID); pr.ok {
			p.dep(op, pr.res)
			if mutatesParent(op) && pr.parent != 0 { // the root has no parent
				p.dep(op, pr.parent)
			}
		}
		if op.Name2 != "" && op.Kind != fold.Symlink {
			if pr := p.path(op.PathID2); pr.ok {
				p.dep(op, pr.res)
				if op.Kind == fold.Rename || op.Kind == fold.Link {
					p.dep(op, pr.parent)
				}
			}
		}
	}
	if op.Slot >= 0 {
		p.dep(op, slotRes(op.Slot))
	}
	if op.Kind == fold.Copy && op.Slot2 >= 0 && op.Slot2 != op.Slot {
		p.dep(op, slotRes(op.Slot2))
	}
}

// threadOverlap sets op's Overlap (the worker's earlier ops still running when it started
// in the recording), Think and AfterIssue, and returns the recorded time Think counts from:
// the thread's latest completion before op, or the previous op's start when the thread
// issued op right after it with no completion in between (a batch of submissions).
func (p *planner) threadOverlap(op *replayOp) int64 {
	t := p.threads[op.Worker]
	if t == nil {
		t = &emitState{}
		p.threads[op.Worker] = t
	}
	j, overlap := 0, 0
	for _, r := range t.running {
		if r.end > op.Start {
			t.running[j] = r
			j++
			if r.start <= op.Start {
				overlap++
			}
		} else {
			t.doneEnd = max(t.doneEnd, r.end)
		}
	}
	t.running = t.running[:j]
	// Ops that started after op are not its queue: op comes later than its start (a
	// close, emitted when the kernel's asynchronous release arrived, is timed by the
	// flush the application waited for).
	op.Overlap = uint16(min(overlap, maxOverlap))
	anchor := t.doneEnd
	switch {
	case !t.started:
		op.Think, t.started = -1, true
	case overlap > 0 && t.lastStart > t.doneEnd:
		op.AfterIssue, anchor = true, t.lastStart
		op.Think = max(op.Start-t.lastStart, 0)
	default:
		op.Think = max(op.Start-t.doneEnd, 0)
		switch {
		case op.CallStart == 0:
		case op.CallStart == t.callStart:
			// Another part of the system call the previous op came from (the kernel's
			// privilege probe before a chown, a request split in two): the gap between
			// them is the kernel's and the layer's, none of it the application's.
			op.AppThink, op.ThinkMeasured = 0, true
		case op.CallStart < t.callStart:
			// An op that comes after a later call's (a close the planner had to hold
			// for its release): its call is over; it is issued at once.
			op.AppThink, op.ThinkMeasured = 0, true
		case t.callEnd != 0 && t.callEndOf == t.callStart && op.CallStart >= t.callEnd:
			op.AppThink, op.ThinkMeasured = op.CallStart-t.callEnd, true
		}
	}
	switch {
	case op.CallStart == 0:
		t.callStart, t.callEnd, t.callEndOf = 0, 0, 0
	case op.CallStart >= t.callStart:
		// The thread's latest call: later ops' think times count from its return.
		t.callStart = op.CallStart
		if op.CallEnd != 0 {
			t.callEnd, t.callEndOf = op.CallEnd, op.CallStart
		}
	}
	// A close that sent no flush (a directory's, a file's last reference dropped outside
	// close()) is timed by its release, which the kernel sends once close() has returned:
	// the thread did not keep it in flight.
	releaseOnly := op.Kind == fold.Close && (op.Rec == trace.OpRelease || op.Rec == trace.OpReleasedir)
	if !releaseOnly {
		t.running = append(t.running, span{op.Start, op.Start + op.Dur})
	}
	t.lastStart = max(t.lastStart, op.Start)
	t.ends[t.nEnd%wakeRing] = opEnd{end: op.Start + op.Dur, callEnd: op.CallEnd}
	t.nEnd++
	return anchor
}

func mutatesParent(op *replayOp) bool {
	switch op.Kind {
	case fold.Mkdir, fold.Mknod, fold.Unlink, fold.Rmdir, fold.Rename, fold.Link, fold.Symlink:
		return true
	case fold.Open:
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
	if r > 1<<31 && (op.Kind == fold.Open || op.Kind == fold.Close) {
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
