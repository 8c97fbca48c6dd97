package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// Result is what a campaign that ran to its end leaves to say about its trace.
type Result struct {
	// Damage wraps ErrDamaged when the trace is damaged (the runs replayed its readable
	// events); nil for a whole trace.
	Damage error
	// Footer is the trace's footer (what its recorder dropped), nil when it has none.
	Footer *trace.Footer
}

// Run reads the trace, prints its starting state, and runs the campaign: the dry run, or
// every run then what the runs say together. It returns an error wrapping ErrDamaged
// when it refuses a corrupt trace, and replay.ErrDiverged from a run that stopped at a
// divergence. Run is called once.
func (c *Campaign) Run(ctx context.Context) (*Result, error) {
	st, damage, err := c.deriveState(ctx)
	if errors.Is(err, context.Canceled) {
		return nil, errors.New("interrupted while reading the trace")
	}
	if err != nil {
		return nil, err
	}
	if damage.err != nil {
		if !damage.cut && !c.spec.Force {
			return nil, fmt.Errorf("%w: %v\nreplay refuses a corrupt trace: --force replays its readable events", ErrDamaged, damage.err)
		}
		_, _ = fmt.Fprintf(c.env.Stderr, "iotap replay: %s\n", termsafe.Text(damage.note))
	}
	// A replay of a damaged trace, or of one whose recorder dropped events, runs to its
	// end, then says so.
	res := &Result{Footer: damage.footer}
	if damage.err != nil {
		res.Damage = fmt.Errorf("%w: %v (replayed the %d readable events)", ErrDamaged, damage.err, damage.events)
	}
	c.setEngine(st)
	if c.spec.DryRun {
		return res, c.dryRun(ctx, st)
	}
	raiseNoFile(c.env.Log)
	targets, err := c.openTargets(ctx)
	defer func() { c.closeTargets(targets) }() // --between-runs may open them again
	if err != nil {
		return res, err
	}
	stores, err := c.openStores(ctx)
	defer c.closeStores(stores)
	if err != nil {
		return res, err
	}
	rs := &runs{targets: targets, stores: stores, st: st, traces: make([][]string, len(targets))}
	if err := c.runAll(ctx, rs); err != nil || c.spec.Prepare == "only" {
		return res, err
	}
	return res, c.conclude(ctx, rs)
}

// setEngine prints the starting state and completes each run's options from it: the
// threads it needs, the job's native runtime, and the recording layer's round trip.
func (c *Campaign) setEngine(st *replay.State) {
	out := c.env.Stdout
	_, _ = fmt.Fprintf(out, "starting state: %d directories, %d files (%s), %d symlinks; %d replay ops\n",
		st.Dirs, st.Files, format.Bytes(uint64(st.Bytes)), st.Symlinks, st.Ops)
	c.engine.Workers = st.Workers
	if c.engine.NativeRuntime == 0 {
		c.engine.NativeRuntime = traceNativeRuntime(c.spec.Trace)
	}
	if c.engine.Timing != replay.TimingThink {
		return
	}
	if c.autoRoundTrip {
		rt := st.AutoRoundTrip()
		c.engine.RoundTrip, c.engine.RoundTripSource = rt.RoundTrip, rt.Source
	} else {
		c.engine.RoundTripSource = "--round-trip"
	}
	if c.engine.RoundTrip > 0 {
		_, _ = fmt.Fprintf(out, "recording layer round trip: %v per request (%s), not waited for again\n",
			c.engine.RoundTrip, c.engine.RoundTripSource)
	}
	if note := st.Contended(); note != "" {
		_, _ = fmt.Fprintf(out, "NOTE: %s\n", note)
	}
}

// runs is what the runs of a campaign share, and what they leave.
type runs struct {
	targets []target
	stores  []replay.Backend // per target, nil without a store
	st      *replay.State
	// traces are each target's replay traces, in run order.
	traces   [][]string
	diverged uint64 // ops that diverged, over all runs
	n        uint64 // runs that left a summary
}

// run is one run: of target i, repetition rep (from 0), its results named base.*.
type run struct {
	i, rep int
	base   string
	t      target
}

// runAll prepares and replays each target Repeat times, targets interleaved, printing
// each run's summary.
func (c *Campaign) runAll(ctx context.Context, rs *runs) error {
	s := &c.spec
	for rep := 0; rep < s.Repeat; rep++ {
		for i := range rs.targets {
			if err := ctx.Err(); err != nil {
				return err
			}
			r := run{i: i, rep: rep, base: fmt.Sprintf("%s.t%d.r%d", c.prefix, i+1, rep+1)}
			c.printRunHeader(r, rs.targets[i])
			if err := c.prepareRun(ctx, rs, r); err != nil {
				return err
			}
			r.t = rs.targets[i] // after prepareRun: --between-runs opens a directory target again
			r.t.start = c.startLabel(i, rep)
			if s.Prepare == "only" {
				_, _ = fmt.Fprintf(c.env.Stdout, "prepared %s\n", preparedWhere(r.t, rs.stores[i]))
				continue
			}
			if s.DropCaches {
				dropCaches(c.env.Stderr)
			}
			var err error
			if len(r.t.copies) > 0 {
				err = c.runCopies(ctx, rs, r)
			} else {
				err = c.runOnce(ctx, rs, r)
			}
			if err != nil {
				return err
			}
		}
		if s.Prepare == "only" {
			return nil
		}
	}
	return nil
}

// printRunHeader prints the header of run r of t. It comes first, so that what is logged
// while the target is prepared and replayed (divergences, warnings) stands under it.
func (c *Campaign) printRunHeader(r run, t target) {
	switch n := len(t.copies); {
	case c.spec.Prepare == "only":
	case n > 0:
		_, _ = fmt.Fprintf(c.env.Stdout, "run %d/%d, target %s: %d copies at once: %s.c{1..%d}.iotap, figures in %s.copies.json\n",
			r.rep+1, c.spec.Repeat, termsafe.Text(t.b.Target().Path), n, termsafe.Text(r.base), n, termsafe.Text(r.base))
	default:
		_, _ = fmt.Fprintf(c.env.Stdout, "run %d/%d, target %d (%s): %s\n", r.rep+1, c.spec.Repeat, r.i+1,
			termsafe.Text(c.targetName(r.i)), termsafe.Text(r.base+".iotap"))
	}
}

// targetName names target i as it was given (an S3 target with its settings).
func (c *Campaign) targetName(i int) string {
	if i < len(c.spec.Targets) {
		return c.spec.Targets[i]
	}
	return fmt.Sprintf("target %d", i+1)
}

// runOnce replays run r and prints its summary.
func (c *Campaign) runOnce(ctx context.Context, rs *runs, r run) error {
	sum, sampled, err := c.replayOnce(ctx, rs.st, r)
	if sum != nil {
		var out strings.Builder
		sum.Print(&out)
		procsample.WriteSummaries(&out, sampled, uint64(sum.ReplayedRead+sum.ReplayedWrite), "replayer")
		if sum.Interrupted {
			_, _ = fmt.Fprintf(&out, "  INTERRUPTED  the run stopped before the trace's end: %d of its %d replay ops were issued\n", sum.ReplayedOps, rs.st.Ops)
		}
		_, _ = io.WriteString(c.env.Stdout, termsafe.Text(out.String())) // the examples name the job's files
		rs.traces[r.i] = append(rs.traces[r.i], r.base+".iotap")
		rs.diverged += sum.Divergences
		rs.n++
	}
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted: the result trace and summary above cover the ops replayed until then")
	}
	return err
}

// replayOnce runs one replay onto r.t, writing base.iotap, base.json (the summary) and,
// for a backend that counts requests (S3), base.requests.json. It returns the summary and
// what sampling saw of the storage client and the replayer.
func (c *Campaign) replayOnce(ctx context.Context, st *replay.State, r run) (*replay.Summary, []procsample.Summary, error) {
	b := r.t.b
	tr, err := openTrace(c.spec.Trace)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = tr.Close() }()
	h := c.replayHeader(tr.Header(), b, r.rep)
	if r.t.start != "" {
		h.Labels = append(h.Labels, trace.Label{Key: "replay.start", Value: r.t.start})
	}
	w, err := trace.Create(r.base+".iotap", h, trace.WriterOptions{Logger: c.env.Log})
	if err != nil {
		return nil, nil, fmt.Errorf("replay: create result: %w", err)
	}
	// Preparing (and earlier runs) left garbage in the heap: give it back to the system so
	// that the replayer's memory sampled during the run is the run's own.
	debug.FreeOSMemory()
	var sampler *procsample.Sampler
	if c.env.Sample != nil {
		sampler = c.env.Sample(w, r.t.dir)
	}
	ro := c.engine
	var done atomic.Uint64
	ro.Progress = &done
	stop := startProgress(c.env.Stderr, c.spec.Progress, int64(st.Ops), fmt.Sprintf("%s run %d", b.Target().Path, r.rep+1), &done)
	sum, runErr := replay.Run(ctx, tr, b, w, ro)
	stop()
	if sum != nil && sum.Prediction != nil {
		w.SetPrediction(sum.Prediction.Figures())
	}
	var sampled []procsample.Summary
	if sampler != nil {
		sampled = sampler.Stop()
	}
	if err := w.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("replay: write result: %w", err)
	}
	if sum != nil {
		if js, err := json.MarshalIndent(sum, "", "  "); err == nil {
			if err := private.WriteFile(r.base+".json", append(js, '\n')); err != nil && runErr == nil {
				runErr = fmt.Errorf("replay: write summary: %w", err)
			}
		}
	}
	if f, ok := tr.Footer(); ok && r.rep == 0 {
		if f.Dropped > f.Lost {
			_, _ = fmt.Fprintf(c.env.Stderr, "iotap replay: the recording dropped %d events (buffer full): ops on their handles and paths may diverge\n", f.Dropped-f.Lost)
		}
		if f.Lost > 0 {
			_, _ = fmt.Fprintf(c.env.Stderr, "iotap replay: the recording ends early: its last %d events were lost when the trace could not be written (%s)\n", f.Lost, termsafe.Name(f.WriteError))
		}
	}
	if r.t.requests != nil {
		if err := s3req.Write(r.base+".requests.json", r.t.requests.TakeRequests()); err != nil && runErr == nil {
			runErr = err
		}
	}
	return sum, sampled, runErr // damage was found, and said, by deriveState
}

// replayHeader is the header of a replay trace of the trace (header src) onto b, run rep.
func (c *Campaign) replayHeader(src *trace.Header, b replay.Backend, rep int) trace.Header {
	h := trace.Header{
		Kind:         "replay",
		WallStart:    time.Now().UTC(),
		Hostname:     sysinfo.Hostname(),
		IotapVersion: c.env.Version,
		Kernel:       sysinfo.KernelRelease(),
		Target:       b.Target(),
		Command:      src.Command,
		Labels: append(append([]trace.Label(nil), src.Labels...),
			trace.Label{Key: "replay.of", Value: c.spec.Trace},
			trace.Label{Key: "replay.timing", Value: c.engine.Timing.String()},
			trace.Label{Key: "replay.speed", Value: strconv.FormatFloat(c.engine.Speed, 'g', -1, 64)},
			trace.Label{Key: "replay.run", Value: strconv.Itoa(rep + 1)},
			trace.Label{Key: "replay.recorded_fstype", Value: src.Target.FSType}),
	}
	h.Labels = append(h.Labels, c.env.Places.Labels(b)...)
	return h
}

// raiseNoFile raises the open-file soft limit to the hard limit: a trace may hold many
// handles open at once.
func raiseNoFile(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("replay: raise open-file limit", "err", err)
		}
	}
}

// dropWarned is set once a failure to drop the page cache was said: it is said once per
// process, whatever the campaigns.
var dropWarned atomic.Bool

// dropCaches writes back dirty data and drops the page cache (root only).
func dropCaches(stderr io.Writer) {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil && !dropWarned.Swap(true) {
		_, _ = fmt.Fprintf(stderr, "iotap replay: --drop-caches: %v (runs continue with a warm cache)\n", err)
	}
}
