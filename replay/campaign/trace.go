package campaign

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
)

// Reading the recorded trace: its starting state and damage (the first pass), the dry run,
// and what its header keeps for the runs.

func openTrace(path string) (*trace.Reader, error) {
	r, err := trace.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: open trace: %w", err)
	}
	return r, nil
}

// traceDamage is what reading a whole trace found wrong with it.
type traceDamage struct {
	err    error         // the first damage, nil if none
	cut    bool          // only the tail is missing: the writer was killed or its disk filled
	note   string        // what a replay of it does, for the user
	events uint64        // events readable
	footer *trace.Footer // nil when the trace has none
}

// cancellable is a trace whose Next fails once ctx is done: the passes over a trace that
// issue no I/O (the starting state, the dry run) end on SIGINT and SIGTERM too.
type cancellable struct {
	*trace.Reader
	ctx context.Context
}

func (c cancellable) Next() (*trace.Event, error) {
	select {
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	default:
		return c.Reader.Next()
	}
}

// deriveState reads the whole trace: its starting state, and what is wrong with it.
func (c *Campaign) deriveState(ctx context.Context) (*replay.State, traceDamage, error) {
	path := c.spec.Trace
	r, err := openTrace(path)
	if err != nil {
		return nil, traceDamage{}, err
	}
	defer func() { _ = r.Close() }()
	st, err := replay.DeriveState(cancellable{r, ctx}, c.engine.Plan)
	if err != nil {
		return nil, traceDamage{}, err
	}
	d := traceDamage{cut: r.CutShort(), events: r.EventsRead()}
	if f, ok := r.Footer(); ok {
		d.footer = f
	}
	dmg := r.Damage()
	if len(dmg) == 0 {
		return st, d, nil
	}
	d.err = dmg[0]
	if d.cut {
		lost := "it ends at a chunk boundary"
		for _, x := range dmg {
			if errors.Is(x, trace.ErrTruncated) {
				lost = fmt.Sprintf("its last chunk is cut off (%v)", x)
			}
		}
		d.note = fmt.Sprintf("%s was cut short (no footer: its recorder was killed, or its disk filled); %s. Replaying the %d events before the cut: what the job did after it is missing from the trace and from the replay",
			path, lost, d.events)
	} else {
		d.note = fmt.Sprintf("%s is corrupt (%d problems, the first: %v); --force: replaying the %d readable events, the corrupt chunks' events are missing",
			path, len(dmg), dmg[0], d.events)
	}
	return st, d, nil
}

// dryRun plays the trace on a model of the starting state and lists the ops whose
// recorded outcome cannot be reproduced.
func (c *Campaign) dryRun(ctx context.Context, st *replay.State) error {
	r, err := openTrace(c.spec.Trace)
	if err != nil {
		return err
	}
	problems, n, err := replay.Check(cancellable{r, ctx}, st, c.engine.Plan)
	_ = r.Close()
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted: dry run not finished")
	}
	if err != nil {
		return err
	}
	out := c.env.Stdout
	if n == 0 {
		_, _ = fmt.Fprintln(out, "dry run: every op's recorded outcome is reproducible from the starting state")
		return nil
	}
	_, _ = fmt.Fprintf(out, "dry run: %d ops cannot reproduce their recorded outcome:\n", n)
	shown := 0
	for _, p := range problems {
		_, _ = fmt.Fprintf(out, "  %s\n", termsafe.Text(p.String()))
		shown += p.Ops()
	}
	if n > shown {
		_, _ = fmt.Fprintf(out, "  ... and %d more\n", n-shown)
	}
	return nil
}

// traceNativeRuntime returns the job's native runtime the trace keeps (record
// --native-first or --native-runtime), 0 if none.
func traceNativeRuntime(tracePath string) time.Duration {
	r, err := openTrace(tracePath)
	if err != nil {
		return 0
	}
	defer func() { _ = r.Close() }()
	v, ok := r.Header().Label(report.NativeRuntimeLabel)
	if !ok {
		return 0
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ns <= 0 {
		return 0
	}
	return time.Duration(ns)
}
