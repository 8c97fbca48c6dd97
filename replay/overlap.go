package replay

import (
	"runtime"
	"sync"
)

// A thread's queue depth.
//
// An application that keeps several requests in flight from one thread (io_uring, libaio,
// a submitter thread) shows, in the recording, ops of one thread that overlap: each
// started while earlier ones were still running. The planner counts them (replayOp.Overlap:
// how many of the thread's earlier ops were still running). The replay issues such an op
// once all but that many of the thread's earlier ops have completed, so it keeps the
// recorded depth and never exceeds it, and it may issue it while those still run.
//
// A thread is replayed by a team of goroutines: its worker, and helpers started when its
// ops overlap (at most one more than its largest recorded depth). One member at a time
// holds the thread's baton: it takes the thread's next op, waits until it is due and its
// dependencies have completed, and issues it. Before issuing, it hands the baton on if
// the thread's next op may start at once (a batch of submissions: an idle helper takes
// it), or leaves it free when that op waits for one of the thread's ops to complete: the
// member whose op completes takes the free baton and goes on with the next op itself, as
// the application's thread, woken by a completion, submits the next request. In the
// steady state of a deep queue no op waits for a goroutine to be woken: the one that saw
// the completion issues the next op. A thread whose ops never overlap keeps the baton in
// its worker, which issues every op, as it did without the team.
//
// Think mode counts an overlapped op's think time from the thread's completion it followed
// in the recording (the last one before its start), or, when no op of the thread
// completed between its previous op's start and its own (a batch), from that start.

// endRing is the number of completion times a thread keeps: more than maxOverlap.
const endRing = 256

// threadQueue is the state a traced thread's worker shares with its helpers.
type threadQueue struct {
	mu sync.Mutex // guards the fields up to pool
	// done counts the thread's completed ops; at[k%endRing] is when the k-th completed
	// (never earlier than the previous one: completions that race for the lock keep
	// the time order).
	done  uint64
	at    [endRing]int64
	free  bool      // no member holds the baton: the next op waits for a completion
	ended bool      // the thread has no more ops
	idle  []*worker // helpers waiting to be given the baton
	pool  []*worker // every helper started

	wg sync.WaitGroup // the helpers

	// Baton holder's state.
	issued    uint64 // ops taken
	lastIssue int64  // when the previous op was ready to be issued
	next      replayOp
	hasNext   bool // next holds the thread's next op, taken from the channel
	closed    bool // the thread's channel is closed: no op follows next
	overlap   bool // an op of the thread overlapped another
}

// need returns how many of the thread's ops must have completed before op is issued.
func (q *threadQueue) need(op *replayOp) uint64 {
	return q.issued - min(uint64(op.Overlap), q.issued)
}

// completed records the completion of one of the thread's ops at end.
func (q *threadQueue) completed(end int64) {
	q.mu.Lock()
	q.done++
	q.at[q.done%endRing] = max(end, q.at[(q.done-1)%endRing])
	q.mu.Unlock()
}

// acquire returns true once w holds its thread's baton, false when the thread has ended.
// A member takes a free baton; otherwise it waits until one hands it over.
func (w *worker) acquire() bool {
	if w.holding {
		return true
	}
	q := w.q
	q.mu.Lock()
	switch {
	case q.ended:
		q.mu.Unlock()
		return false
	case q.free:
		q.free = false
		q.mu.Unlock()
		w.holding = true
		return true
	}
	q.idle = append(q.idle, w)
	q.mu.Unlock()
	w.holding = <-w.wake
	return w.holding
}

// takeReady takes the thread's next op if all the thread's ops it must follow have
// completed, and returns when the last of those completed (0: it follows none). Otherwise
// it leaves the op for later and the baton free, for the member whose op completes next,
// and waits until it is handed the baton again (or the thread ends); at the end of the
// thread it ends the team. The caller holds the baton; ok false: no op was taken.
func (w *worker) takeReady() (op replayOp, anchor int64, ok bool) {
	q := w.q
	if !q.hasNext && !q.closed {
		q.hasNext = w.ch.take(&q.next)
		q.closed = !q.hasNext
	}
	if !q.hasNext {
		w.endTeam()
		return op, 0, false
	}
	need := q.need(&q.next)
	q.mu.Lock()
	if q.done < need {
		// Free the baton for the member whose op completes next, and wait to be handed
		// it again.
		q.free, w.holding = true, false
		q.idle = append(q.idle, w)
		q.mu.Unlock()
		w.holding = <-w.wake
		return op, 0, false
	}
	if need > 0 {
		anchor = q.at[need%endRing]
	}
	q.mu.Unlock()
	op, q.hasNext = q.next, false
	q.issued++
	if op.Overlap > 0 {
		q.overlap = true
		w.st.overlapped++
		w.st.maxDepth = max(w.st.maxDepth, int(op.Overlap)+1)
	}
	return op, anchor, true
}

// endTeam ends the thread's members: the waiting ones now, the others when their op
// completes.
func (w *worker) endTeam() {
	q := w.q
	q.mu.Lock()
	q.ended, w.holding = true, false
	idle := q.idle
	q.idle = nil
	q.mu.Unlock()
	for _, h := range idle {
		h.wake <- false
	}
}

// handOn gives up the baton before w issues an op whose issue time is ready: to an idle
// helper (or a new one) when the thread's next op may start at once, or else leaves it
// free for the member whose op completes next. When the next op waits for this one, w
// keeps it.
func (w *worker) handOn(ready int64) {
	q := w.q
	q.lastIssue = ready
	if !q.hasNext && !q.closed {
		// Not waiting: the next op may not be planned yet.
		q.hasNext, q.closed = w.ch.tryTake(&q.next, false)
	}
	if q.hasNext && q.next.Overlap == 0 || !q.hasNext && (q.closed || !q.overlap) {
		// The next op waits for this one (or there is none): w keeps the baton and goes
		// on once its op has completed.
		return
	}
	q.mu.Lock()
	w.holding = false
	var now bool
	switch {
	case q.hasNext:
		now = q.need(&q.next) <= q.done
	case !q.closed:
		// The next op is not planned yet: a thread that overlaps may need it at once;
		// another waits for this op anyway.
		now = q.overlap
	}
	// With the baton free, the member whose op completes next goes on (or ends the team).
	if !now {
		q.free = true
		q.mu.Unlock()
		return
	}
	if n := len(q.idle); n > 0 {
		h := q.idle[n-1]
		q.idle = q.idle[:n-1]
		q.mu.Unlock()
		h.wake <- true
		return
	}
	h := &worker{e: w.e, id: w.id, ch: w.ch, q: q, wake: make(chan bool, 1), holding: true, helper: true, margin: w.margin}
	h.st.init()
	q.pool = append(q.pool, h)
	q.wg.Add(1)
	q.mu.Unlock()
	w.e.wantProc()
	go func() {
		defer q.wg.Done()
		h.run()
	}()
}

// wantProc gives one more goroutine that sleeps or blocks in calls alongside the others
// (a timed worker, a helper) a P of its own, up to maxProcs: a goroutine in a system call
// keeps its P until the runtime takes it back (20 µs to 10 ms later), and the others would
// wait for it.
func (e *engine) wantProc() {
	b := e.procs
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	if n := b.n + 2; n <= maxProcs && runtime.GOMAXPROCS(0) < n {
		runtime.GOMAXPROCS(n)
	}
}

// reserveProcs raises GOMAXPROCS once for n workers to come (each wantProc then finds its
// P there): every raise stops the world, which a worker starting mid-run would wait for.
func (e *engine) reserveProcs(n int) {
	b := e.procs
	b.mu.Lock()
	defer b.mu.Unlock()
	if want := min(b.n+n+2, maxProcs); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
}

// warmThreads makes the runtime start n operating-system threads and keep them idle, so
// that a worker locking a thread later takes one instead of cloning a new one.
func warmThreads(n int) {
	var locked, release sync.WaitGroup
	locked.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread()
			locked.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	release.Done()
}

// procBudget counts the goroutines of a run, or of copies run together, that have a P of
// their own.
type procBudget struct {
	mu sync.Mutex // guards n and GOMAXPROCS raises
	n  int
}
