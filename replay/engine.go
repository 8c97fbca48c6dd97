package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Sink receives the replay trace; *trace.Writer satisfies it.
type Sink interface {
	Origin() int64
	Append(ev *trace.Event)
	Path(parent uint32, name string) uint32
	Raw(s string) uint32
	AddProcess(p trace.Process)
}

// Timing selects when each op is issued.
type Timing uint8

// Timing modes.
const (
	// TimingThink starts each op when its predecessor in the same thread has completed,
	// plus the recorded think time (closed loop; the default).
	TimingThink Timing = iota
	// TimingOriginal starts each op at its recorded offset from the start of the trace,
	// scheduled against one absolute origin (open loop).
	TimingOriginal
	// TimingAFAP issues ops as fast as possible; ordering constraints still hold.
	TimingAFAP
)

// ParseTiming parses "think", "original" or "afap".
func ParseTiming(s string) (Timing, error) {
	switch s {
	case "think", "":
		return TimingThink, nil
	case "original":
		return TimingOriginal, nil
	case "afap":
		return TimingAFAP, nil
	}
	return 0, fmt.Errorf("replay: unknown timing %q (want think, original or afap)", s)
}

func (t Timing) String() string {
	return [...]string{"think", "original", "afap"}[t]
}

// DivergePolicy says what a divergence from the recorded result does.
type DivergePolicy uint8

// Divergence policies.
const (
	DivergeWarn   DivergePolicy = iota // log the first few, count all
	DivergeIgnore                      // count only
	DivergeAbort                       // stop the replay with an error wrapping ErrDiverged
)

// ParseDivergePolicy parses "ignore", "warn" or "abort".
func ParseDivergePolicy(s string) (DivergePolicy, error) {
	switch s {
	case "warn", "":
		return DivergeWarn, nil
	case "ignore":
		return DivergeIgnore, nil
	case "abort":
		return DivergeAbort, nil
	}
	return 0, fmt.Errorf("replay: unknown divergence policy %q (want ignore, warn or abort)", s)
}

// ErrDiverged is returned (wrapped) when --on-diverge=abort stopped a replay.
var ErrDiverged = errors.New("replay diverged from the trace")

// Options configure one replay run.
type Options struct {
	Timing    Timing
	Speed     float64 // >0; 2 = twice as fast as recorded (think times and offsets halved)
	OnDiverge DivergePolicy
	Plan      PlanOptions
	// RoundTrip is the recording layer's round trip per request (State.RoundTrip): think
	// mode does not wait for it again (see roundtrip.go). 0: think times as recorded,
	// without the folded requests.
	RoundTrip time.Duration
	// RoundTripSource says where RoundTrip comes from, for the summary.
	RoundTripSource string
	// KeepRunDelay makes think mode wait the whole measured think time, including the
	// time the thread waited for a CPU while it was recorded (replayOp.RunDelay). By
	// default that wait is left out: on the recording machine the recorder's own work and
	// other processes caused it. A job that had more runnable threads than CPUs keeps
	// some of it on any machine.
	KeepRunDelay bool
	// NativeRuntime is the job's runtime without the recording layer, when known: the
	// prediction is anchored on it too (Prediction).
	NativeRuntime time.Duration
	// ThinkSpin makes think mode keep the CPU busy through a thread's think time instead of
	// sleeping, as the job's own computing did: the target then serves the replay under
	// the CPU contention the recording had. Waits for child processes and threads' first
	// ops still sleep.
	ThinkSpin bool
	// FillRandom makes written data incompressible instead of zeros.
	FillRandom bool
	// SpinMargin is how long before an op's due time a worker first stops sleeping and
	// spins (default 50 µs); it then adapts to the overshoot of the worker's sleeps.
	SpinMargin time.Duration
	// QueueDepth is the number of planned ops buffered per worker (default 256).
	QueueDepth int
	// Workers is the number of threads the trace will need (State.Workers; 0: unknown).
	// Before its clock starts, a timed run raises GOMAXPROCS for them at once and starts
	// the operating-system threads they will lock, so that a thread's first op does not
	// wait for either.
	Workers int
	// Progress, if set, is incremented once per replayed op.
	Progress *atomic.Uint64
	Log      *slog.Logger
}

// maxProcs caps the GOMAXPROCS raise for timed replays.
const maxProcs = 128

// monotonic clock in the same base as trace.Now (CLOCK_MONOTONIC, ns).
func now() int64 { return trace.Now() }

// engine state shared by the workers of one run.
type engine struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	b      Backend
	walker Walker // b, if it is one
	sink   Sink
	opts   Options
	log    *slog.Logger

	runStart   int64 // monotonic ns when the first op was due
	traceStart int64 // recorded Start of the first op
	speed      float64
	// drift is, in think mode, the replay's lateness against the recording (negative:
	// ahead) at the end of the op that completed last.
	drift atomic.Int64
	// linkedAway holds the names a link fallback renamed away (fallback.go): the job's
	// later unlink of one is done already.
	linkedAway sync.Map
	progress   progressTable // think mode: per process, how far its ops have completed
	threads    progressTable // think mode: per traced thread, how far its ops have completed
	origin     int64         // sink origin

	counters table[atomic.Uint32] // resource id -> completed ops
	slotCnt  table[atomic.Uint32] // slot -> completed ops
	files    table[fileBox]       // slot -> open file

	mu      sync.Mutex // guards cond waits; waiters is read without it
	cond    *sync.Cond
	waiters atomic.Int32

	warned atomic.Int32
	fill   []byte // maxPiece bytes of write data, shared by the workers (read only)

	causes causeTable // first failures, and what failed after them (fallback.go)
	calls  inFlight   // when the job's calls were in flight
	lags   lagSpans   // the union of the ops' issue lags (lagspan.go)

	procs *procBudget // the goroutines given a P of their own (see wantProc)
	gate  *startGate  // copies replayed together start at once (nil: one run)
	// arrived: this run reached the gate (see start).
	arrived bool
}

type fileBox struct{ f File }

// table is a growable array that is safe to index concurrently while it grows: fixed
// chunks of 4096 hung from a two-level directory, each level allocated when first used
// (2^28 entries; the engine holds three, and the garbage collector scans only the parts
// in use).
type table[T any] struct {
	dir [1 << 8]atomic.Pointer[[1 << 8]atomic.Pointer[[1 << 12]T]]
}

func (t *table[T]) at(i uint32) *T {
	mid := loadOrMake(&t.dir[(i>>20)&(1<<8-1)])
	c := loadOrMake(&mid[(i>>12)&(1<<8-1)])
	return &c[i&(1<<12-1)]
}

// loadOrMake returns the array p points to, allocating it if p is nil.
func loadOrMake[A any](p *atomic.Pointer[A]) *A {
	if c := p.Load(); c != nil {
		return c
	}
	n := new(A)
	if p.CompareAndSwap(nil, n) {
		return n
	}
	return p.Load()
}

func (e *engine) counter(res uint32) *atomic.Uint32 {
	if res > 1<<31 {
		return e.slotCnt.at(^res)
	}
	return e.counters.at(res)
}

// worker replays the ops of one traced thread in program order, issuing those that
// overlapped in the recording through helpers, workers of its own (see overlap.go).
type worker struct {
	e       *engine
	id      uint32
	ch      *opQueue     // the thread's planned ops, shared with the helpers
	q       *threadQueue // shared with the helpers
	wake    chan bool    // true: the baton is handed to this member; false: the thread ended
	holding bool         // this member holds the thread's baton
	helper  bool
	margin  int64  // current spin margin: a high quantile of this thread's sleep overshoot
	buf     []byte // read buffer, at most maxPiece
	zbuf    []byte // zeros, for fallocate's fallback
	// fellBack says what the last op did instead of a call the target refused (fallback.go).
	fellBack string
	st       runStats
	views    map[string]Backend // Walker views by walk start directory
	// ev is the replay event account writes (a Sink's Append takes a pointer: one per
	// worker, not one per op).
	ev trace.Event
	// thread and proc are the progress entries of this worker's thread and of the process
	// of its last op (procID), looked up once.
	thread *pidProgress
	proc   *pidProgress
	procID uint32
}

// backend returns the backend to issue op with: a view that starts the path walk where
// the recorded call's did, when the backend supports it.
func (w *worker) backend(op *replayOp) Backend {
	wk := w.e.walker
	if wk == nil || op.Walk == "" {
		return w.e.b
	}
	v, ok := w.views[op.Walk]
	if !ok {
		if w.views == nil {
			w.views = map[string]Backend{}
		}
		v = wk.From(op.Walk)
		w.views[op.Walk] = v
	}
	return v
}

// Run replays the trace from src onto b, writing measured events to sink (which may be
// nil). It returns the fidelity summary; the error is non-nil when the replay could not
// run to the end (cancelled, aborted on divergence, unreadable trace).
func Run(ctx context.Context, src Source, b Backend, sink Sink, o Options) (*Summary, error) {
	trace.CalibrateClock()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	return run(ctx, src, b, sink, o, &procBudget{}, nil)
}

// run is Run with the processor budget it shares with the runs of other copies, and the
// gate they start together at (nil: none).
func run(ctx context.Context, src Source, b Backend, sink Sink, o Options, procs *procBudget, gate *startGate) (*Summary, error) {
	o.defaults()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e := newEngine(ctx, cancel, b, sink, o)
	e.procs, e.gate = procs, gate
	if sink != nil {
		e.origin = sink.Origin()
		for _, p := range src.Processes() {
			sink.AddProcess(p)
		}
	}
	stop := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		e.cond.Broadcast()
		e.mu.Unlock()
	})
	defer stop()

	p := newPlanner(src, o.Plan)
	if o.Timing != TimingAFAP && o.Workers > 0 {
		e.reserveProcs(o.Workers)
		warmThreads(min(o.Workers, maxProcs))
	}
	cpu0 := processCPU()
	workers, lastRec, planErr := e.dispatch(p, src)
	cpu := processCPU() - cpu0
	if gate != nil && !e.arrived {
		gate.leave()
	}
	end := now()
	// Close files the trace left open (handles opened before it ended).
	for s := int32(0); s < p.Slots(); s++ {
		if fb := e.files.at(uint32(s)); fb.f != nil {
			_ = fb.f.Close(context.Background())
			fb.f = nil
		}
	}
	sum := &Summary{Timing: o.Timing.String(), Speed: o.Speed, Target: b.Target(), Fold: p.Stats, Threads: len(workers),
		ReplayerCPU: cpu, CPUs: runtime.NumCPU()}
	if o.Timing == TimingThink {
		sum.RoundTrip, sum.RoundTripSource = o.RoundTrip, o.RoundTripSource
	}
	for _, w := range workers {
		sum.add(&w.st)
		for _, h := range w.q.pool {
			sum.add(&h.st)
		}
	}
	if len(workers) > 0 {
		sum.RecordedSpan = time.Duration(lastRec - e.traceStart)
		sum.ReplaySpan = time.Duration(end - e.runStart)
	}
	sum.Causes = e.causes.causes()
	if len(workers) > 0 {
		sum.Idle = max(sum.ReplaySpan-time.Duration(e.calls.busy), 0)
	}
	sum.finish()
	sum.Interrupted = ctx.Err() != nil
	sum.predict(o)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return sum, cause
	}
	if planErr != nil {
		return sum, planErr
	}
	return sum, ctx.Err()
}

// processCPU returns the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// defaults fills in the options left zero.
func (o *Options) defaults() {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	if o.SpinMargin <= 0 {
		o.SpinMargin = 50 * time.Microsecond
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = 256
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

func newEngine(ctx context.Context, cancel context.CancelCauseFunc, b Backend, sink Sink, o Options) *engine {
	e := &engine{ctx: ctx, cancel: cancel, b: b, sink: sink, opts: o, log: o.Log, speed: o.Speed}
	e.cond = sync.NewCond(&e.mu)
	e.walker, _ = b.(Walker)
	e.fill = make([]byte, maxPiece)
	if o.FillRandom {
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i+8 <= len(e.fill); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8; j++ {
				e.fill[i+j] = byte(v >> (8 * j))
			}
		}
	}
	return e
}

// dispatch hands the planner's ops to one worker per traced thread, started at its first
// op, until the trace ends or the run is cancelled; then it waits for the workers. It
// returns them and the recorded end of the last op.
func (e *engine) dispatch(p *planner, src Source) (workers map[uint32]*worker, lastRec int64, err error) {
	outPaths := map[string]uint32{"": trace.RootPath}
	outByID := map[uint32]uint32{} // recorded path id -> replay trace path id
	var procsSeen int
	workers = map[uint32]*worker{}
	var wg sync.WaitGroup
	defer func() {
		for _, w := range workers {
			w.ch.close()
		}
		wg.Wait()
	}()
	for {
		op, err := p.next()
		if err == io.EOF {
			return workers, lastRec, nil
		}
		if err != nil {
			return workers, lastRec, fmt.Errorf("replay: read trace: %w", err)
		}
		if e.ctx.Err() != nil {
			return workers, lastRec, nil
		}
		if len(workers) == 0 {
			e.traceStart = op.Start
			e.runStart = e.start()
		}
		lastRec = max(lastRec, op.Start+op.Dur)
		if e.sink != nil {
			op.OutPath = e.outPathID(outByID, outPaths, op.Name, op.PathID)
			if op.Kind == fold.Symlink {
				op.OutPath2 = e.sink.Raw(op.Name2)
			} else if op.Name2 != "" {
				op.OutPath2 = e.outPathID(outByID, outPaths, op.Name2, op.PathID2)
			}
			if ps := src.Processes(); len(ps) > procsSeen {
				for _, pr := range ps[procsSeen:] {
					e.sink.AddProcess(pr)
				}
				procsSeen = len(ps)
			}
		}
		w := workers[op.Worker]
		if w == nil {
			w = e.startWorker(op.Worker, &wg)
			workers[op.Worker] = w
		}
		w.ch.put(e.ctx, op)
	}
}

// startWorker starts the worker of thread id, the nth.
func (e *engine) startWorker(id uint32, wg *sync.WaitGroup) *worker {
	if e.opts.Timing != TimingAFAP {
		// Timed workers sleep in nanosleep on their own threads, each keeping its P
		// until sysmon takes it back: give every worker a P so that a worker that wakes
		// up never waits for one (up to maxProcs, beyond which the garbage collector's
		// share of Ps gets out of hand).
		e.wantProc()
	}
	w := &worker{e: e, id: id, ch: newOpQueue(e.opts.QueueDepth), margin: int64(e.opts.SpinMargin),
		q: new(threadQueue), wake: make(chan bool, 1), holding: true}
	w.st.init()
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.run()
	}()
	return w
}

// outPathID is outPath with a cache by recorded path id (no string hashing on a hit).
func (e *engine) outPathID(byID map[uint32]uint32, m map[string]uint32, name string, id uint32) uint32 {
	if id != 0 {
		if v, ok := byID[id]; ok {
			return v
		}
	}
	v := e.outPath(m, name, id)
	if id != 0 {
		byID[id] = v
	}
	return v
}

// outPath interns a recorded name in the replay trace, one component at a time.
func (e *engine) outPath(m map[string]uint32, name string, id uint32) uint32 {
	if id == 0 && name == "" {
		return 0
	}
	if v, ok := m[name]; ok {
		return v
	}
	dir, base := fold.SplitName(name)
	parent := e.outPath(m, dir, 1)
	v := e.sink.Path(parent, base)
	m[name] = v
	return v
}

func (w *worker) run() {
	e := w.e
	if e.opts.Timing != TimingAFAP && !w.helper {
		// A worker that sleeps until due times owns its thread, with the smallest timer
		// slack, so that a sleep ends when asked (the default slack is 50 µs). Helpers
		// do not: handing the baton to a goroutine locked to its thread costs two
		// thread switches; their spin margin covers the slack.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	}
	for w.acquire() {
		op, anchor, ok := w.takeReady()
		if !ok {
			continue
		}
		if e.ctx.Err() != nil {
			w.complete(&op, now())
			continue
		}
		w.one(&op, anchor)
	}
	if !w.helper {
		w.q.wg.Wait()
	}
}

// complete counts op as completed at end.
func (w *worker) complete(op *replayOp, end int64) {
	e := w.e
	for i := 0; i < int(op.NDeps); i++ {
		e.counter(op.Deps[i].Res).Add(1)
	}
	w.q.completed(end)
	if e.opts.Timing == TimingThink {
		if op.Pid != 0 {
			if w.proc == nil || w.procID != op.Pid {
				w.proc, w.procID = e.progress.get(op.Pid), op.Pid
			}
			w.proc.done(op.Start+op.Dur, end)
		}
		if op.Worker != 0 {
			if w.thread == nil {
				w.thread = e.threads.get(op.Worker)
			}
			w.thread.done(op.Start+op.Dur, end)
		}
	}
	if e.waiters.Load() > 0 {
		e.mu.Lock()
		e.cond.Broadcast()
		e.mu.Unlock()
	}
	if e.opts.Progress != nil {
		e.opts.Progress.Add(1)
	}
}

// await blocks until ready reports true (spinning briefly, then on the engine's condition
// variable, which every op completion broadcasts to); false when the run was cancelled.
func (e *engine) await(ready func() bool) bool {
	for n := 0; !ready(); n++ {
		if e.ctx.Err() != nil {
			return false
		}
		if n < 64 {
			runtime.Gosched()
			continue
		}
		e.mu.Lock()
		e.waiters.Add(1)
		for !ready() && e.ctx.Err() == nil {
			e.cond.Wait()
		}
		e.waiters.Add(-1)
		e.mu.Unlock()
	}
	return true
}

// waitDeps blocks until every resource op must follow has completed enough ops. It
// returns when the last dependency was seen complete (0 if none had to be waited for),
// and false when the run was cancelled.
func (w *worker) waitDeps(op *replayOp) (readyAt int64, ok bool) {
	e := w.e
	var t0 int64
	for i := 0; i < int(op.NDeps); i++ {
		d := op.Deps[i]
		if d.Need == 0 {
			continue
		}
		c := e.counter(d.Res)
		if c.Load() >= d.Need {
			continue
		}
		if t0 == 0 {
			t0 = now()
		}
		if !e.await(func() bool { return c.Load() >= d.Need }) {
			return 0, false
		}
	}
	if t0 == 0 {
		return 0, true
	}
	readyAt = now()
	w.st.depWait += readyAt - t0
	return readyAt, true
}

// first reports whether think mode times op as its thread's first: it has no completion
// (anchor, see takeReady) or previous issue of the thread to count its think time from.
func (w *worker) first(op *replayOp, anchor int64) bool {
	if op.AfterIssue {
		return op.Think < 0 || w.q.lastIssue == 0
	}
	return op.Think < 0 || anchor == 0
}

// due returns the monotonic time op should be issued at (0: now); anchor is when the
// thread's op it follows completed (see takeReady).
func (w *worker) due(op *replayOp, anchor int64) int64 {
	e := w.e
	switch e.opts.Timing {
	case TimingAFAP:
		return 0
	case TimingThink:
		if !w.first(op, anchor) && op.AfterIssue {
			// Submitted right after the previous op: the recorded gap between the two
			// starts, which holds no round trip of the layer of its own.
			wait := int64(float64(op.Think) / e.speed)
			w.st.thinkWait += wait
			return w.q.lastIssue + wait
		}
		if !w.first(op, anchor) {
			think := thinkAfter(op, int64(e.opts.RoundTrip))
			if op.ThinkMeasured {
				w.st.thinkMeasured++
				think = w.cutRunDelay(op.RunDelay, think)
			} else {
				w.st.thinkEstimated++
			}
			w.st.thinkCut += op.Think - think
			wait := int64(float64(think) / e.speed)
			w.st.thinkWait += wait
			return anchor + wait
		}
		// A thread's first op: at its recorded offset, moved by how far the replay is
		// ahead or behind the recording (as of the op that completed last), so a process
		// that started after another finished starts after it here too, on a faster or a
		// slower target.
		return e.replayTime(op.Start) + e.drift.Load()
	}
	return e.replayTime(op.Start)
}

// cutRunDelay returns a measured think time without the time the thread waited for a CPU
// in it while recorded (runDelay, as replayOp.RunDelay), unless Options.KeepRunDelay.
func (w *worker) cutRunDelay(runDelay, think int64) int64 {
	if runDelay <= 0 || w.e.opts.KeepRunDelay {
		return think
	}
	rd := min(runDelay-1, think)
	w.st.runDelayCut += rd
	return think - rd
}

// replayTime maps a recorded time to the monotonic time it is due at without drift.
func (e *engine) replayTime(rec int64) int64 {
	return e.runStart + int64(float64(rec-e.traceStart)/e.speed)
}

// maxSleep bounds one blocking sleep, so that a cancelled run ends soon even when a
// thread waits out a long think time (a slow --speed stretches them).
const maxSleep = int64(100 * time.Millisecond)

// sleepUntil waits for the monotonic time t, or until the run is cancelled: blocking
// sleeps of at most maxSleep until the spin margin before t, then a spin. The margin adapts
// to the sleeps' observed overshoot (fast up, slow down), between 10 µs and 2 ms.
func (w *worker) sleepUntil(t int64) {
	for {
		n := now()
		d := t - n
		if d <= 0 {
			return
		}
		if d > w.margin+maxSleep {
			ts := unix.NsecToTimespec(maxSleep)
			_ = unix.Nanosleep(&ts, nil)
			if w.e.ctx.Err() != nil {
				return
			}
			continue
		}
		if d > w.margin {
			want := d - w.margin
			ts := unix.NsecToTimespec(want)
			_ = unix.Nanosleep(&ts, nil)
			over := now() - n - want
			if over > w.margin {
				w.margin = min(w.margin+(over-w.margin)/2+1000, 2e6)
			} else {
				w.margin = max(w.margin-(w.margin-over)/64, 10e3)
			}
			if w.e.ctx.Err() != nil {
				return
			}
			continue
		}
		if d > 50e3 {
			// Far from due: let other threads (a worker whose sleep just ended, the
			// planner) have the CPU; on a small machine a spinning thread otherwise
			// delays them by a whole scheduler time slice. The last 50 µs spin without
			// yielding: a yield then can cost a time slice of our own (measured on 2
			// cores: p99 lag 1 ms with yields to the end, 20-80 µs without).
			_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

// one issues op, its thread's next op, once due; anchor is when the last of the thread's
// ops it follows completed (0: none).
func (w *worker) one(op *replayOp, anchor int64) {
	// Of the two edges to another thread's progress, the one whose op ended later in the
	// recording holds less recorded time: a shell woken by a wrapper script that waited for
	// its command waits for the command's last op, not for the wrapper's first.
	childLater := op.Child != 0 && op.ChildEnd > op.WakeEnd
	wake := op.WakeTid != 0 && !childLater
	if w.e.opts.Timing == TimingThink && wake && anchor != 0 && !op.AfterIssue {
		at, ok := w.waitProgress(w.e.threads.get(op.WakeTid), op.WakeEnd)
		if !ok {
			w.complete(op, now())
			return
		}
		w.oneAt(op, w.wakeDue(op, at, anchor), anchor)
		return
	}
	if w.e.opts.Timing == TimingThink && op.Child != 0 && anchor != 0 && !op.AfterIssue {
		at, ok := w.waitChild(op)
		if !ok {
			w.complete(op, now())
			return
		}
		w.oneAt(op, max(w.childDue(op, at), anchor), anchor)
		return
	}
	due := w.due(op, anchor)
	if w.e.opts.ThinkSpin && w.e.opts.Timing == TimingThink && !w.first(op, anchor) {
		// The thread computes until its op is due.
		for now() < due {
			if w.e.ctx.Err() != nil {
				break
			}
		}
	}
	if w.e.opts.Timing == TimingThink && w.first(op, anchor) {
		// A thread's first op moves with the drift of the others: poll it while far away.
		for d := due - now(); d > int64(2*time.Millisecond) && w.e.ctx.Err() == nil; d = due - now() {
			time.Sleep(min(time.Duration(d)-time.Millisecond, time.Millisecond))
			due = w.due(op, anchor)
		}
	}
	w.oneAt(op, due, anchor)
}

// oneAt issues op at due (0: now), after its dependencies; anchor is when the thread's
// ops it had to follow completed.
func (w *worker) oneAt(op *replayOp, due, anchor int64) {
	if due > 0 {
		w.sleepUntil(due)
	}
	if w.e.ctx.Err() != nil { // cancelled while it waited: not issued
		w.complete(op, now())
		return
	}
	waited, ok := w.waitDeps(op)
	if !ok {
		w.complete(op, now())
		return
	}
	// The op was ready when it was due, its dependencies had completed and the thread's
	// ops it follows had returned (in original timing a slow target makes ops late: that
	// is the target's doing, counted apart, not scheduler lag).
	ready := max(due, waited)
	if due > 0 && anchor > due {
		ready = max(ready, anchor)
		if anchor-due > int64(time.Millisecond) {
			w.st.behind++
		}
	}
	w.handOn(ready)
	end := w.issue(op, due, ready)
	w.complete(op, end)
}

// issue issues op (due at due, 0: none; ready at ready), accounts for it and returns when
// it completed.
func (w *worker) issue(op *replayOp, due, ready int64) int64 {
	start, ret, errno := w.exec(op)
	end := now()
	if !op.Implicit {
		w.e.calls.leave(end)
	}
	if w.e.opts.Timing == TimingThink {
		w.e.drift.Store(end - w.e.replayTime(op.Start+op.Dur))
	}
	if due > 0 {
		w.st.recordLag(&w.e.lags, ready, start)
	}
	w.account(op, start, end, ret, errno)
	return end
}

// exec issues op and returns when it was issued, the byte count and the errno.
func (w *worker) exec(op *replayOp) (start, ret int64, errno syscall.Errno) {
	e := w.e
	ctx := e.ctx
	b := w.backend(op)
	var f, f2 File
	if op.Slot >= 0 && op.Kind != fold.Open {
		f = e.files.at(uint32(op.Slot)).f
		if f == nil {
			return w.began(op), 0, syscall.EBADF
		}
	}
	if op.Kind == fold.Copy {
		if op.Slot2 >= 0 {
			f2 = e.files.at(uint32(op.Slot2)).f
		}
		if f == nil || f2 == nil {
			return w.began(op), 0, syscall.EBADF
		}
	}
	var err error
	start = w.began(op)
	switch op.Kind {
	case fold.Skip:
		return start, op.WantRet, syscall.Errno(op.WantErrno)
	case fold.Open:
		err = w.execOpen(ctx, op, b)
	case fold.Fstat, fold.Close, fold.Read, fold.Write, fold.Readdir, fold.Fsync, fold.Fallocate, fold.Ftruncate, fold.Lock, fold.Lseek, fold.Copy:
		ret, err = w.execFile(ctx, op, f, f2)
	default:
		ret, err = w.execName(ctx, op, b)
	}
	if err != nil {
		errno = Errno(err)
		if errors.Is(err, ErrEscape) {
			w.st.escapes++
		}
	}
	return start, ret, errno
}

// began returns the time op is issued at, and counts it in flight from then (an implicit
// open is none of the job's calls).
func (w *worker) began(op *replayOp) int64 {
	t := now()
	if !op.Implicit {
		w.e.calls.enter(t)
	}
	return t
}

// inFlight is the time at least one of the job's calls was in flight in the replay: the
// union of the calls' [start, end), across threads. The rest of the replay's span is the
// job's own time between calls (Summary.Idle).
type inFlight struct {
	mu    sync.Mutex // guards the fields below
	n     int        // calls in flight
	since int64      // start of the current busy period, when n > 0
	last  int64      // the latest end of a call in the current busy period
	busy  int64      // summed length of the busy periods that ended
}

// enter counts a call issued at t.
func (c *inFlight) enter(t int64) {
	c.mu.Lock()
	if c.n == 0 {
		c.since, c.last = t, t
	} else if t < c.since {
		c.since = t
	}
	c.n++
	c.mu.Unlock()
}

// leave counts a call that ended at t. The period ends at the latest end of its calls,
// whichever thread took the lock last: a thread may read its clock and take the lock
// after another thread's later call ended.
func (c *inFlight) leave(t int64) {
	c.mu.Lock()
	c.last = max(c.last, t)
	if c.n--; c.n == 0 {
		c.busy += max(c.last-c.since, 0)
	}
	c.mu.Unlock()
}

// execOpen opens op's file into its slot. An implicit open (a handle opened before the
// trace began) falls back to read-only, then write-only.
func (w *worker) execOpen(ctx context.Context, op *replayOp, b Backend) error {
	f, err := b.Open(ctx, op.Name, int(op.Flags), op.Mode)
	if op.Implicit && err != nil {
		for _, fl := range [...]int{unix.O_RDONLY, unix.O_WRONLY} {
			if f, err = b.Open(ctx, op.Name, fl|int(op.Flags&unix.O_DIRECTORY), 0); err == nil {
				break
			}
		}
	}
	if err == nil && op.Slot >= 0 {
		w.e.files.at(uint32(op.Slot)).f = f
	} else if err == nil {
		_ = f.Close(ctx) // the trace recorded a failure here: nothing refers to the handle
	}
	return err
}

// execFile issues a call on the open file f (f2: copy_file_range's output).
func (w *worker) execFile(ctx context.Context, op *replayOp, f, f2 File) (ret int64, err error) {
	var n int
	switch op.Kind {
	case fold.Fstat:
		var a Attr
		a, err = f.Stat(ctx)
		ret = a.Size
	case fold.Close:
		err = f.Close(ctx)
		w.e.files.at(uint32(op.Slot)).f = nil
	case fold.Read:
		ret, err = w.pieces(ctx, f, w.clampRW(op.Size), op.Offset, false)
	case fold.Write:
		ret, err = w.pieces(ctx, f, w.clampRW(op.Size), op.Offset, true)
	case fold.Readdir:
		n, err = f.ReadDir(ctx, w.rbuf(min(max(op.Size, 4096), maxPiece)), op.Offset)
		ret = int64(n)
	case fold.Fsync:
		err = f.Sync(ctx, op.Flags&trace.FsyncDatasync != 0)
	case fold.Fallocate:
		err = f.Allocate(ctx, op.Flags, op.Offset, op.Size)
		if err != nil && uint16(Errno(err)) != op.WantErrno {
			w.fellBack, err = w.allocateFallback(ctx, f, op.Flags, op.Offset, op.Size, err)
		}
	case fold.Ftruncate:
		err = f.Truncate(ctx, op.Size)
	case fold.Lock:
		cmd := LockSet
		switch op.Rec {
		case trace.OpGetlk:
			cmd = LockGet
		case trace.OpSetlkw:
			cmd = LockWait
		}
		err = f.Lock(ctx, cmd, int16(op.Flags), op.Offset, op.Size)
	case fold.Lseek:
		ret, err = f.Seek(ctx, op.Offset, int(op.Flags))
	case fold.Copy:
		ret, err = w.copyRange(ctx, f, f2, op.Offset, op.Offset2, w.clampRW(op.Size))
	}
	return ret, err
}

// maxPiece is the most one call of the replay reads or writes: a larger read or write (a
// system call that the recording layer saw as many requests, merged again) is issued in
// pieces of maxPiece, one after the other, through the worker's read buffer or the shared
// write data. A worker's memory is bounded by it, whatever sizes a trace holds.
const maxPiece = 4 << 20

// maxRW is the most one read, write or copy_file_range system call moves on Linux
// (MAX_RW_COUNT, 2 GiB less a page): a recorded call that asks for more is damage, and is
// replayed with maxRW (counted in Summary.Clamped).
const maxRW = 1<<31 - 4096

// xattrMax is the largest extended attribute value or list (XATTR_SIZE_MAX,
// XATTR_LIST_MAX): the kernel reads no more whatever size a call gives.
const xattrMax = 1 << 16

// clampRW returns n, or maxRW if n is more than one system call moves (counted).
func (w *worker) clampRW(n int64) int64 {
	if n > maxRW {
		w.st.clamped++
		return maxRW
	}
	return n
}

// pieces reads (or, with write, writes) n bytes of f at off in pieces of at most
// maxPiece, until n are done, a piece comes short (the end of the file, a full disk) or
// fails. It returns the bytes done and, when none were, the error: a system call that
// moved some bytes before failing returns their count, as read(2) and write(2) do.
func (w *worker) pieces(ctx context.Context, f File, n, off int64, write bool) (int64, error) {
	if n <= 0 {
		var err error
		if write {
			_, err = f.WriteAt(ctx, nil, off)
		} else {
			_, err = f.ReadAt(ctx, nil, off)
		}
		return 0, err
	}
	var done int64
	for done < n {
		k := min(n-done, maxPiece)
		var got int
		var err error
		if write {
			got, err = f.WriteAt(ctx, w.e.fill[:k], off+done)
		} else {
			got, err = f.ReadAt(ctx, w.rbuf(k), off+done)
		}
		done += int64(max(got, 0))
		if err != nil {
			if done > 0 {
				return done, nil
			}
			return 0, err
		}
		if int64(got) < k {
			break
		}
	}
	return done, nil
}

// execName issues a call on a name through b, the backend view that starts its path walk
// where the recorded call's did.
func (w *worker) execName(ctx context.Context, op *replayOp, b Backend) (ret int64, err error) {
	var n int
	switch op.Kind {
	case fold.Stat:
		var a Attr
		a, err = b.Lstat(ctx, op.Name)
		ret = a.Size
	case fold.Access:
		err = b.Access(ctx, op.Name, op.Flags)
	case fold.Truncate:
		err = b.Truncate(ctx, op.Name, op.Size)
	case fold.Chmod:
		err = b.Chmod(ctx, op.Name, op.Mode)
	case fold.Utimes:
		err = b.Utimes(ctx, op.Name)
	case fold.Chown:
		err = b.Chown(ctx, op.Name)
	case fold.Mkdir:
		err = b.Mkdir(ctx, op.Name, op.Mode)
	case fold.Mknod:
		err = b.Mknod(ctx, op.Name, op.Mode)
	case fold.Unlink:
		err = b.Remove(ctx, op.Name)
		if err != nil && op.WantErrno == 0 {
			w.fellBack, err = w.unlinkFallback(op.Name, err)
		}
	case fold.Rmdir:
		err = b.Rmdir(ctx, op.Name)
	case fold.Rename:
		err = b.Rename(ctx, op.Name, op.Name2, op.Flags)
		if err != nil && op.Flags != 0 && uint16(Errno(err)) != op.WantErrno {
			w.fellBack, err = renameFallback(ctx, b, op.Name, op.Name2, op.Flags, err)
		}
	case fold.Link:
		err = b.Link(ctx, op.Name2, op.Name)
		if err != nil && op.WantErrno == 0 {
			w.fellBack, err = w.linkFallback(ctx, b, op.Name2, op.Name, err)
		}
	case fold.Symlink:
		err = b.Symlink(ctx, op.Name2, op.Name)
	case fold.Readlink:
		n, err = b.Readlink(ctx, op.Name, w.rbuf(min(max(op.Size, 4096), maxPiece)))
		ret = int64(n)
	case fold.Statfs:
		err = b.Statfs(ctx)
	case fold.Getxattr:
		n, err = b.Getxattr(ctx, op.Name, xattrName, w.rbuf(min(op.Size, xattrMax)))
		ret = int64(n)
	case fold.Listxattr:
		n, err = b.Listxattr(ctx, op.Name, w.rbuf(min(op.Size, xattrMax)))
		ret = int64(n)
	case fold.Setxattr:
		// A value longer than xattrMax fails with E2BIG before the kernel reads it: one
		// byte more says as much.
		err = b.Setxattr(ctx, op.Name, xattrName, w.data(min(op.Size, xattrMax+1)), 0)
	case fold.Removexattr:
		err = b.Removexattr(ctx, op.Name, xattrName)
	}
	return ret, err
}

// copyRange copies n bytes from src at offIn to dst at offOut: in the backend when src
// is a RangeCopier that can (copy_file_range), else through this worker's buffer with
// ReadAt and WriteAt. It stops early at the end of src, as copy_file_range does.
func (w *worker) copyRange(ctx context.Context, src, dst File, offIn, offOut, n int64) (int64, error) {
	if rc, ok := src.(RangeCopier); ok {
		c, err := rc.CopyRange(ctx, dst, offIn, offOut, n)
		if !errors.Is(err, ErrUnsupported) {
			return c, err
		}
	}
	var done int64
	buf := w.rbuf(min(n, maxPiece))
	for done < n {
		p := buf[:min(n-done, int64(len(buf)))]
		r, err := src.ReadAt(ctx, p, offIn+done)
		if r > 0 {
			wr, werr := dst.WriteAt(ctx, p[:r], offOut+done)
			done += int64(wr)
			if werr != nil {
				return done, werr
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return done, err
		}
		if r == 0 || errors.Is(err, io.EOF) {
			break
		}
	}
	return done, nil
}

// xattrName is the attribute replay uses: traces do not record attribute names.
const xattrName = "user.iotap.replay"

// rbuf returns the worker's read buffer, n bytes of it (n at most maxPiece).
func (w *worker) rbuf(n int64) []byte {
	if n <= 0 {
		return nil
	}
	if int64(cap(w.buf)) < n {
		w.buf = make([]byte, n)
	}
	return w.buf[:n]
}

// data returns n bytes of write data, n at most maxPiece.
func (w *worker) data(n int64) []byte {
	if n <= 0 {
		return nil
	}
	return w.e.fill[:n]
}

// account compares the result with the trace, updates the worker's totals and writes the
// replay event.
func (w *worker) account(op *replayOp, start, end, ret int64, errno syscall.Errno) {
	e := w.e
	st := &w.st
	rec := op.Rec
	if op.Implicit {
		st.implicit++
		if errno != 0 {
			st.implicitFailed++
			w.diverge(op, ret, errno, "")
		}
		return
	}
	st.ops[rec].recorded++
	st.recIO += op.Dur - op.Idle
	switch op.Kind {
	case fold.Read:
		st.recRead += op.WantRet
	case fold.Write:
		st.recWrite += op.WantRet
	case fold.Copy: // read and written, as the trace statistics count it
		st.recRead += op.WantRet
		st.recWrite += op.WantRet
	}
	if op.Kind == fold.Skip {
		st.ops[rec].skipped++
		return
	}
	st.ops[rec].replayed++
	st.ioTime += end - start
	if errno == 0 {
		switch op.Kind {
		case fold.Read:
			st.read += ret
		case fold.Write:
			st.write += ret
		case fold.Copy:
			st.read += ret
			st.write += ret
		}
	}
	fellBack := w.fellBack
	w.fellBack = ""
	if op.Kind == fold.Open && errno == 0 {
		e.causes.reopened(op.Slot)
	}
	div := uint16(errno) != op.WantErrno || (op.CheckRet && errno == 0 && ret != op.WantRet)
	switch {
	case fellBack != "" && !div:
		st.ops[rec].fallbacks++
		what := fmt.Sprintf("%s %s %s: %s", op.Rec, op.Kind, opNames(op), fellBack)
		e.causes.note(op, what, true)
		if len(st.unsupExamples) < 5 {
			st.unsupExamples = append(st.unsupExamples, what)
		}
	case div && (unsupported(errno) || unsupported(syscall.Errno(op.WantErrno))):
		st.ops[rec].unsupported++
		what := fmt.Sprintf("%s %s %s: recorded %s, replayed %s",
			op.Rec, op.Kind, opNames(op), errText(syscall.Errno(op.WantErrno)), errText(errno))
		if e.causes.note(op, what, true) && len(st.unsupExamples) < 5 {
			st.unsupExamples = append(st.unsupExamples, what)
		}
	case div:
		st.ops[rec].diverged++
		w.diverge(op, ret, errno, fellBack)
	}
	if e.sink != nil {
		w.ev = trace.Event{
			Start: start - e.origin, Dur: max(end-start, 0), Offset: op.Offset, Ret: ret, Offset2: op.Offset2,
			Handle: op.Handle, Handle2: op.Handle2, Path: op.OutPath, Path2: op.OutPath2, Size: uint32(min(op.Size, 1<<32-1)),
			Flags: op.Flags, Mode: op.Mode, Tid: op.Tid, Pid: op.Pid, Errno: uint16(errno), Op: rec,
		}
		if op.Kind == fold.Setxattr || op.Kind == fold.Truncate || op.Kind == fold.Ftruncate {
			w.ev.Size = uint32(min(max(op.Size, 0), 1<<32-1))
		}
		e.sink.Append(&w.ev)
	}
}

// diverge counts op's divergence; note says what was done instead of a refused call.
func (w *worker) diverge(op *replayOp, ret int64, errno syscall.Errno, note string) {
	e := w.e
	switch e.opts.OnDiverge {
	case DivergeIgnore:
	case DivergeWarn:
		if e.warned.Add(1) <= 10 {
			e.log.Warn("replay diverged", "op", op.Rec.String(), "call", op.Kind.String(), "path", op.Name,
				"want_errno", errText(syscall.Errno(op.WantErrno)), "got_errno", errText(errno),
				"want_bytes", op.WantRet, "got_bytes", ret)
		}
	case DivergeAbort:
		e.cancel(fmt.Errorf("%w: %s %q: recorded errno %d bytes %d, replay errno %d (%s) bytes %d",
			ErrDiverged, op.Kind, op.Name, op.WantErrno, op.WantRet, errno, errText(errno), ret))
	}
	what := fmt.Sprintf("%s %s %s: recorded %s/%d bytes, replayed %s/%d bytes",
		op.Rec, op.Kind, opNames(op), errText(syscall.Errno(op.WantErrno)), op.WantRet, errText(errno), ret)
	if op.Implicit {
		what = fmt.Sprintf("implicit open %q: %s", op.Name, errText(errno))
	}
	if note != "" {
		what += " (" + note + ")"
	}
	if !w.e.causes.note(op, what, false) || op.Implicit {
		return // counted against the failure it follows
	}
	if len(w.st.examples) < 5 {
		w.st.examples = append(w.st.examples, what)
	}
}

// opNames quotes op's path, and its second path for a rename or a link.
func opNames(op *replayOp) string {
	if op.Name2 != "" && (op.Kind == fold.Rename || op.Kind == fold.Link) {
		return fmt.Sprintf("%q -> %q", op.Name, op.Name2)
	}
	return fmt.Sprintf("%q", op.Name)
}

// unsupported reports whether errno says the storage lacks the call or feature: when the
// recording or the replay got it and the other did not, the two backends differ; the
// replay did not diverge.
func unsupported(e syscall.Errno) bool {
	return e == syscall.ENOTSUP || e == syscall.ENOSYS
}

// errText names an outcome in divergence messages: "ok" or the errno's name.
func errText(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return trace.ErrnoName(uint16(e))
}
