package replay

import "sync"

// Waiting for child processes.
//
// A shell running a job script records a few requests of its own between commands, and
// each gap between them holds a whole command: the shell was waiting for its child. Think
// mode would wait the recorded gap again, so a faster target could never finish the
// script sooner, and a slower one would start the next command before the previous one
// ended. Instead, an op whose thread's gap contains requests of a descendant process is
// due after that descendant's last such request completes in the replay, plus the
// recorded time from it to the op (less the round trips, as for any think time).

// maxAncestry bounds the walk up the process tree.
const maxAncestry = 16

// descendant is the latest-ending op of a process's descendants, as planned so far.
type descendant struct {
	pid     uint32
	end     int64
	callEnd int64 // the return of the op's system call (0: not measured)
}

type procTree struct {
	ppid   map[uint32]uint32 // pid -> parent pid
	seen   int               // Source.Processes() read so far
	latest map[uint32]descendant
}

// refresh reads process records the source has added since the last call.
func (pt *procTree) refresh(src Source) {
	ps := src.Processes()
	if len(ps) == pt.seen {
		return
	}
	if pt.ppid == nil {
		pt.ppid = make(map[uint32]uint32)
		pt.latest = make(map[uint32]descendant)
	}
	for _, pr := range ps[pt.seen:] {
		if pr.Pid != 0 && pr.PPid != pr.Pid {
			pt.ppid[pr.Pid] = pr.PPid
		}
	}
	pt.seen = len(ps)
}

// plan sets op.Child and op.ChildEnd when a descendant of op's process ended an op after
// the thread's previous op (prevEnd), then records op as the latest op of its ancestors'
// descendants.
func (pt *procTree) plan(src Source, op *replayOp, prevEnd int64) {
	if op.Pid == 0 {
		return
	}
	pt.refresh(src)
	if pt.ppid == nil {
		return
	}
	if d, ok := pt.latest[op.Pid]; ok && op.Think >= 0 && d.end > prevEnd && d.end <= op.Start {
		op.Child, op.ChildEnd, op.ChildCallEnd = d.pid, d.end, d.callEnd
	}
	end := op.Start + op.Dur
	pid := op.Pid
	for i := 0; i < maxAncestry; i++ {
		parent, ok := pt.ppid[pid]
		if !ok || parent == 0 || parent == op.Pid {
			return
		}
		if d := pt.latest[parent]; end > d.end {
			pt.latest[parent] = descendant{pid: op.Pid, end: end, callEnd: op.CallEnd}
		}
		pid = parent
	}
}

// pidProgress is how far a process's ops have completed in the replay: the latest
// recorded end among its completed ops, and when that op completed.
type pidProgress struct {
	mu        sync.Mutex
	recEnd    int64
	replayEnd int64
}

type progressTable struct{ m sync.Map } // pid -> *pidProgress

func (t *progressTable) get(pid uint32) *pidProgress {
	if v, ok := t.m.Load(pid); ok {
		return v.(*pidProgress)
	}
	v, _ := t.m.LoadOrStore(pid, &pidProgress{})
	return v.(*pidProgress)
}

// done records the completion at end (monotonic ns) of an op that ended at recorded time
// recEnd.
func (p *pidProgress) done(recEnd, end int64) {
	p.mu.Lock()
	if recEnd > p.recEnd {
		p.recEnd, p.replayEnd = recEnd, end
	}
	p.mu.Unlock()
}

func (p *pidProgress) reached(recEnd int64) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.replayEnd, p.recEnd >= recEnd
}

// waitChild blocks until op's descendant has completed its op ending at op.ChildEnd and
// returns when that happened in the replay (false: the run was cancelled).
func (w *worker) waitChild(op *replayOp) (int64, bool) {
	return w.waitProgress(w.e.progress.get(op.Child), op.ChildEnd)
}

// waitProgress blocks until the ops p counts have completed up to recorded end recEnd and
// returns when that happened in the replay (false: the run was cancelled).
func (w *worker) waitProgress(p *pidProgress, recEnd int64) (int64, bool) {
	if at, ok := p.reached(recEnd); ok {
		return at, true
	}
	t0 := now()
	var at int64
	if !w.e.await(func() (ok bool) { at, ok = p.reached(recEnd); return ok }) {
		return 0, false
	}
	w.st.depWait += now() - t0
	return at, true
}

// wakeDue is when an op another thread woke up for (replayOp.WakeTid) is due: once the
// waker's op has completed (at) and the recorded time from it to the op has passed, and
// no sooner than the thread's own time after its wake-up from its previous op (anchor);
// each without the time the thread waited for a CPU while recorded.
func (w *worker) wakeDue(op *replayOp, at, anchor int64) int64 {
	gap := w.cutRunDelay(op.RunDelay, op.WakeGap)
	own := min(op.AfterWake, gap)
	due := max(at+int64(float64(gap)/w.e.speed), anchor+int64(float64(own)/w.e.speed))
	w.st.thinkWait += due - anchor
	w.st.wokenOps++
	return due
}

// childDue is when an op that waited for a descendant is due: the descendant's op
// completed at at; the recorded time from it to the op follows, without round trips.
func (w *worker) childDue(op *replayOp, at int64) int64 {
	gap := op.Start - op.ChildEnd
	at2 := replayOp{Think: gap, Reqs: op.Reqs, FoldDur: op.FoldDur}
	if op.CallStart != 0 && op.ChildCallEnd != 0 && op.CallStart >= op.ChildCallEnd {
		at2.AppThink, at2.ThinkMeasured = op.CallStart-op.ChildCallEnd, true
	}
	cut := thinkAfter(&at2, int64(w.e.opts.RoundTrip))
	if at2.ThinkMeasured {
		cut = w.cutRunDelay(op.RunDelay, cut)
	}
	w.st.thinkCut += gap - cut
	wait := int64(float64(cut) / w.e.speed)
	w.st.thinkWait += wait
	return at + wait
}
