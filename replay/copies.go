package replay

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/iotap/iotap/trace"
)

// Copy is one of the copies of a trace that RunCopies replays at once: its own reading of
// the trace, its own target (a subdirectory, a key prefix) holding its own starting state,
// and its own sink.
type Copy struct {
	Source  Source
	Backend Backend
	Sink    Sink
}

// RunCopies replays copies of a trace at once, each as Run replays one, as one job that
// runs N times side by side: every copy starts at the same moment (once each has planned
// its first op), each keeps its own threads, ordering and timing, and they share the
// process's processors (GOMAXPROCS is raised for the goroutines of all of them). It
// returns each copy's summary (nil for a copy that could not start) and the first error;
// an error in one copy (an unreadable trace, --on-diverge=abort) stops the others.
func RunCopies(ctx context.Context, copies []Copy, o Options) ([]*Summary, error) {
	trace.CalibrateClock()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	procs := &procBudget{}
	gate := newStartGate(len(copies), o.Timing != TimingAFAP)
	sums := make([]*Summary, len(copies))
	errs := make([]error, len(copies))
	var wg sync.WaitGroup
	for i, c := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = run(ctx, c.Source, c.Backend, c.Sink, o, procs, gate)
			if errs[i] != nil && !errors.Is(errs[i], context.Canceled) {
				cancel(errs[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return sums, err
		}
	}
	return sums, errors.Join(errs...)
}

// startGate makes the runs of copies start their timed parts together: each arrives when
// its first op is planned, and the last to arrive sets the common start.
type startGate struct {
	mu      sync.Mutex // guards the fields below
	cond    *sync.Cond
	need    int   // runs still expected
	at      int64 // the common start, once every run has arrived (0 before)
	settle  int64 // time for the first workers of every run to start
	arrived int
}

func newStartGate(n int, timed bool) *startGate {
	g := &startGate{need: n}
	if timed {
		g.settle = int64(2*time.Millisecond) + int64(n)*int64(200*time.Microsecond)
	}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// arrive waits until every run has arrived (or left, or ctx is done) and returns the
// common start time.
func (g *startGate) arrive(ctx context.Context) int64 {
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arrived++
	g.open()
	for g.at == 0 && ctx.Err() == nil {
		g.cond.Wait()
	}
	if g.at == 0 {
		return now()
	}
	return g.at
}

// leave says a run ends without arriving (no op to replay, or an error before its first).
func (g *startGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.need--
	g.open()
}

// open sets the start once every run expected has arrived (g.mu held).
func (g *startGate) open() {
	if g.at == 0 && g.arrived >= g.need {
		g.at = now() + g.settle
		g.cond.Broadcast()
	}
}

// start returns when the run's first op is due: now (plus time for the first workers to
// start, when timed), or, for copies run together, the start they share.
func (e *engine) start() int64 {
	if e.gate != nil {
		e.arrived = true
		return e.gate.arrive(e.ctx)
	}
	if e.opts.Timing == TimingAFAP {
		return now()
	}
	return now() + int64(2*time.Millisecond)
}
