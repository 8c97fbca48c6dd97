// A recording session: the trace writer and the mounted layer, the job run under them,
// and taking both down.

package recorder

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusectl"
	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/internal/metrics"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/tally"
	"github.com/iotap/iotap/trace"
	"golang.org/x/sys/unix"
)

// session is a mounted tracing layer writing one trace.
type session struct {
	spec    *plan
	w       *trace.Writer
	closeW  func() error // closes w and, for an s3:// trace, completes the upload
	srv     *fusefs.Server
	tally   tally.Tally
	started time.Time
	e       Env
	sampler *procsample.Sampler // nil when not sampling
	rt      trace.RoundTrip     // the layer's round trip, when measured
	kernel  kernelPlan          // what is measured in the kernel
	metrics *metrics.Collector  // nil without --metrics
	stopMet func()              // stops serving the metrics
	waiting *fusectl.Waiting    // the kernel's requests in flight, for the metrics; nil if unavailable
}

// openSession writes the header, creates the trace and mounts the layer. In place, it
// first moves into the target so that the layer reaches the real directory through the
// working directory, under the mount it is about to put on top. With --metrics, ml is the
// listener bound for them: served once the layer is mounted, closed if it is not.
func openSession(e Env, spec *plan, ml net.Listener) (*session, error) {
	s, err := mountSession(e, spec, ml)
	if err != nil {
		if ml != nil {
			_ = ml.Close()
		}
		return nil, err
	}
	if ml != nil {
		s.stopMet = s.metrics.Serve(limitMetrics(ml), e.Log)
		_, _ = fmt.Fprintf(e.Stderr, "iotap: metrics at %s\n", servedAt(ml))
	}
	return s, nil
}

// mountSession is openSession up to the mounted layer: the metrics, when asked for, are
// counted but not yet served.
func mountSession(e Env, spec *plan, ml net.Listener) (*session, error) {
	h := trace.Header{
		Kind:         "record",
		WallStart:    time.Now().UTC(),
		Origin:       trace.Now(),
		Hostname:     sysinfo.Hostname(),
		IotapVersion: spec.Version,
		Kernel:       sysinfo.KernelRelease(),
		Target:       trace.Target{Path: spec.Target},
		Command:      spec.Argv,
		Labels:       spec.Labels,
	}
	if m, err := sysinfo.MountOf(spec.Target); err == nil {
		h.Target.FSType, h.Target.Source, h.Target.Mount = m.FSType, m.Source, m.MountPoint
	}
	o := spec.fuseOptions(e.Log)
	if spec.Kind == kindRecord {
		o.ProbeName = probeName()
	}
	if spec.InPlace {
		// Hold the real directory before covering it (fusefs also opens it by descriptor).
		if err := os.Chdir(spec.Target); err != nil {
			return nil, fmt.Errorf("enter target: %w", err)
		}
	}
	// The summary's and the live line's tally, and the metrics, are fed by the trace
	// writer's encoder, off the requests' path: the layer records into the writer directly,
	// as benchmarks measure it.
	s := &session{spec: spec, e: e}
	wo := trace.WriterOptions{
		DropWhenFull: spec.DropWhenFull, Logger: e.Log, Observe: s.tally.AddBatch,
		FlushInterval: flushInterval(spec.StatsInterval),
	}
	if ml != nil {
		s.metrics = metrics.New(metrics.Info{Version: spec.Version, Kind: spec.Kind, Target: spec.Target,
			MountPoint: spec.MountPoint, Trace: spec.Output, Cache: spec.Cache})
		wo.Observe = func(evs []trace.Event) {
			s.tally.AddBatch(evs)
			s.metrics.Observe(evs)
		}
	}
	tl := spec.timeline(e.Log)
	tl.mark("header ready")
	var err error
	if s.kernel, err = openKernel(spec, e.Log, &h, &wo, spec.Kind == kindRecord); err != nil {
		return nil, err
	}
	tl.mark("kernel measurement loaded")
	o.Passthrough = s.kernel.data
	h.FUSE = o.TraceOptions()
	w, closeW, err := createTrace(context.Background(), spec.Store, spec.Output, h, wo)
	if err != nil {
		s.detachLegs()
		return nil, fmt.Errorf("cannot write the trace: %w", err)
	}
	s.w, s.closeW = w, closeW
	tl.mark("trace created")
	// The storage client serving the target, found before the layer covers it.
	var sink procsample.Sink = w
	if s.metrics != nil {
		sink = metricsSink{w: w, c: s.metrics}
	}
	s.sampler = spec.Sample.Start(e.Stderr, e.Log, sink, w.Origin(), spec.Target)
	procs := spec.ServerProcs
	if procs <= 0 {
		procs = fusefs.DefaultServerProcs()
	}
	runtime.GOMAXPROCS(procs)
	srv, err := fusefs.Mount(spec.MountPoint, spec.Target, w, o)
	if err != nil {
		if s.sampler != nil {
			s.sampler.Stop()
		}
		_ = closeW()
		s.detachLegs()
		return nil, explainMountError(spec, err)
	}
	s.srv = srv
	tl.mark("layer mounted")
	if s.metrics != nil {
		s.registerMetrics()
	}
	if v := s.kernel.view; v != nil {
		var sink dataSink
		if s.kernel.data {
			sink = srv
		}
		if err := v.watch(spec.MountPoint, os.Getpid(), sink); err != nil {
			e.Log.Warn("the kernel's view is not measured", "err", err)
		}
	}
	s.started = time.Now()
	return s, nil
}

// detachLegs stops the kernel's measurement, after the trace writer has closed.
func (s *session) detachLegs() {
	if s.kernel.view != nil {
		s.kernel.view.detach()
	}
}

// flushInterval is the trace writer's flush interval for a live line every statsInterval:
// the live line counts the events the encoder has taken, which it does at least this often.
func flushInterval(statsInterval time.Duration) time.Duration {
	if statsInterval > 0 && statsInterval < 2*trace.DefaultFlushInterval {
		return max(statsInterval/2, 10*time.Millisecond)
	}
	return trace.DefaultFlushInterval
}

func explainMountError(spec *plan, err error) error {
	switch {
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		return fmt.Errorf("mount %s: not permitted (needs root, or /dev/fuse access and fusermount3 for --mount-at): %w", spec.MountPoint, err)
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("mount %s: mount point busy: %w", spec.MountPoint, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("mount %s: mount point is not a directory: %w", spec.MountPoint, err)
	}
	return fmt.Errorf("mount %s: %w", spec.MountPoint, err)
}

// unmount takes the layer down. If something still uses it, it is detached lazily and
// given a moment to drain; the trace is closed either way. It never blocks for long: a
// request stuck in the backend (a hung network file system) must not keep the trace open.
func (s *session) unmount() {
	res := make(chan error, 1)
	go func() { res <- s.srv.Unmount() }()
	var err error
	select {
	case err = <-res:
	case <-time.After(unmountTimeout):
		err = errors.New("unmount timed out")
	}
	if err != nil {
		s.e.Log.Debug("unmount failed, detaching", "mountpoint", s.spec.MountPoint, "err", err)
		if derr := unix.Unmount(s.spec.MountPoint, unix.MNT_DETACH); derr != nil && !errors.Is(derr, unix.EINVAL) {
			_, _ = fmt.Fprintf(s.e.Stderr, "iotap: unmount %s: %v\n", s.spec.MountPoint, derr)
			return
		}
	}
	done := make(chan struct{})
	go func() { s.srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(unmountTimeout):
		_, _ = fmt.Fprintf(s.e.Stderr, "iotap: %s is still in use (or its backend hangs); closing the trace anyway\n", s.spec.MountPoint)
	}
}

// unmountTimeout bounds each step of taking the layer down.
const unmountTimeout = 5 * time.Second

// close closes the trace and prints the summary.
func (s *session) close(outcome string) error {
	elapsed := time.Since(s.started)
	cost := s.srv.Cost().LayerCost()
	s.w.SetLayerCost(cost)
	tl := s.spec.timeline(s.e.Log)
	var sums []procsample.Summary
	if s.sampler != nil {
		sums = s.sampler.Stop() // its last samples go into the trace
		tl.mark("sampler stopped")
	}
	var pass *trace.PassthroughStats
	var mapsWhy string
	if v := s.kernel.view; v != nil {
		// The kernel's last records go into the trace before it closes.
		c := v.finish()
		tl.mark("kernel measurement drained")
		if s.kernel.data {
			pt := s.srv.Passthrough()
			pass = &trace.PassthroughStats{Opens: pt.Opens, LayerOpens: pt.LayerOpens, Refused: pt.Refused,
				Calls: c.calls, Async: c.async, Unseen: c.unseen, Lost: c.lost,
				Maps: c.maps, Faults: c.faults, MapsFull: c.mapsFull}
			mapsWhy = c.mapsWhy
			s.w.SetPassthrough(*pass)
		}
	}
	err := s.closeW()
	tl.mark("trace closed")
	if s.stopMet != nil {
		s.stopMet() // after the trace's last events reached the metrics
	}
	if s.waiting != nil {
		_ = s.waiting.Close()
	}
	var legsLine string
	if s.kernel.view != nil {
		legsLine = s.kernel.view.summary()
	}
	s.detachLegs()
	tl.mark("kernel measurement detached")
	st := s.w.Stats()
	snap := s.tally.Snapshot()
	writeSummary(s.e.Stderr, recordEnd{outcome: outcome, elapsed: elapsed, snap: snap, ws: st, cost: cost, path: s.spec.Output})
	_, _, rd, wr := snap.Totals()
	procsample.WriteSummaries(s.e.Stderr, sums, rd+wr, "recorder")
	writeDataSummary(s.e.Stderr, pass, s.kernel.dataWhy, mapsWhy)
	writeLegsSummary(s.e.Stderr, legsLine, s.kernel.legsWhy, s.rt)
	switch {
	case s.rt.Start > 0 && s.rt.Samples == 0:
		_, _ = fmt.Fprintf(s.e.Stderr, "  layer round trip %v per request before the job (the job ended before one was sampled while it ran)\n",
			s.rt.Start.Round(10*time.Nanosecond))
	case s.rt.Start > 0:
		_, _ = fmt.Fprintf(s.e.Stderr, "  layer round trip %v per request before the job, %v while it ran (median of %d samples)\n",
			s.rt.Start.Round(10*time.Nanosecond), s.rt.Run.Round(10*time.Nanosecond), s.rt.Samples)
	}
	switch {
	case err != nil && st.Lost > 0:
		return fmt.Errorf("trace incomplete: %w: the %d events after the last chunk written whole were lost (the trace holds the first %d, and says so in its footer)",
			err, st.Lost, st.Written)
	case err != nil:
		return fmt.Errorf("close trace: %w", err)
	}
	return nil
}

// serve mounts the layer, runs the job (record) and takes everything down. It returns the
// job's exit status as an *ExitError. When parentDied is closed (the iotap process that
// started this recorder died), the job is ended at once.
func serve(ctx context.Context, e Env, spec *plan, ml net.Listener, parentDied <-chan struct{}) error {
	tl := spec.timeline(e.Log)
	var probe *rttProbe
	if spec.Kind == kindRecord {
		// The layer's round trip, measured before the job and sampled while it runs; a
		// replay's think mode leaves it out of the recorded gaps. The probe's process
		// starts while the kernel's program loads and the layer mounts, and times the
		// layer once it is mounted (calibrate).
		var err error
		if probe, err = startProbe(spec.MountPoint); err != nil {
			e.Log.Warn("the recording layer's round trip is not measured", "err", err)
		}
		tl.mark("probe started")
	}
	s, err := openSession(e, spec, ml)
	if err != nil {
		if probe != nil {
			probe.kill()
		}
		return err
	}
	stopLive := make(chan struct{})
	s.startLive(stopLive)

	// go-fuse opens /dev/fuse without O_CLOEXEC: a job holding it would keep the connection
	// alive after iotap dies, and hang on its own requests instead of getting ENOTCONN.
	if err := closeOnExec(); err != nil {
		e.Log.Warn("could not mark descriptors close-on-exec", "err", err)
	}
	if probe != nil {
		if err := probe.calibrate(); err != nil {
			e.Log.Warn("the recording layer's round trip is not measured", "err", err)
			probe = nil
		}
		tl.mark("probe calibrated")
	}
	stopProbe := func() {
		if probe != nil {
			s.rt = probe.stop(s.srv)
			s.w.SetRoundTrip(s.rt)
			probe = nil
		}
	}
	// Enter the job's directory here rather than in the forked job, so the job's first
	// requests come after its exec and are attributed to the job's program.
	// Then step back out (through a descriptor: in place, the old directory is covered), so
	// that iotap itself does not keep the mount busy.
	jobDir := spec.Dir
	back, berr := os.Open(".")
	if berr == nil {
		defer func() { _ = back.Close() }()
		if err := os.Chdir(spec.Dir); err == nil {
			jobDir = ""
		}
	}
	// The job's command dies with the thread that starts it (Pdeathsig): with this recorder,
	// however it ends.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd, err := job.Start(job.Spec{
		Argv: spec.Argv, Dir: jobDir, Env: job.EnvWithPWD(os.Environ(), spec.Dir),
		Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if jobDir == "" {
		if cerr := back.Chdir(); cerr != nil {
			_ = os.Chdir("/")
		}
	}
	if err != nil {
		stopProbe()
		close(stopLive)
		s.unmount()
		code := 1
		var se *job.StartError
		if errors.As(err, &se) {
			code, err = se.Code, describeStartError(se)
		}
		if cerr := s.close(fmt.Sprintf("job not started (exit %d)", code)); cerr != nil {
			_, _ = fmt.Fprintf(e.Stderr, "iotap %s: %v\n", spec.Kind, cerr)
		}
		return &ExitError{Code: code, Err: err}
	}
	tl.mark("job started")
	w := watchJob(e, cmd.Process, parentDied)
	code, werr := job.Wait(cmd)
	tl.mark("job ended")
	w.stop()
	stopProbe()
	tl.mark("probe stopped")
	outcome := "job " + job.Describe(cmd.ProcessState)
	if w.orphaned.Load() {
		outcome += ", ended when iotap record died"
	}
	if w.stopping.Load() {
		// iotap was told to stop: the job ends with it, and so do the processes the job left.
		if n := job.KillDescendants(killWait); n > 0 {
			_, _ = fmt.Fprintf(e.Stderr, "iotap: ended what the job left running (%d processes)\n", n)
		}
	}
	close(stopLive)
	s.unmount()
	tl.mark("layer unmounted")
	cerr := s.close(outcome)
	switch {
	case werr != nil:
		return werr
	case code != 0:
		// The job's failure is the outcome its caller acts on; a trace that could not be
		// finished is printed, and is the outcome only when the job succeeded.
		return &ExitError{Code: code, Err: cerr}
	case cerr != nil:
		return cerr
	}
	return nil
}

// jobWatch relays to the job the signals job.Forward relays, and notes what asks the
// recording to stop before the job ends by itself.
type jobWatch struct {
	stopping atomic.Bool // a signal job.Forward relays came, or the parent died
	orphaned atomic.Bool // the iotap process that started this recorder died
	done     chan struct{}
	exited   chan struct{}
}

// watchJob relays the signals job.Forward relays to p until stop. When parentDied is
// closed, it ends the job's processes at once (SIGKILL), as the kernel does to the job's
// command when this recorder dies.
func watchJob(e Env, p *os.Process, parentDied <-chan struct{}) *jobWatch {
	w := &jobWatch{done: make(chan struct{}), exited: make(chan struct{})}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, job.Forwarded...)
	stopFwd := job.Forward(p)
	go func() {
		defer close(w.exited)
		for {
			select {
			case <-sigs:
				w.stopping.Store(true)
			case <-parentDied:
				w.orphaned.Store(true)
				w.stopping.Store(true)
				_, _ = fmt.Fprintln(e.Stderr, "iotap: iotap record died: ending the job")
				job.KillDescendants(killWait)
				parentDied = nil
			case <-w.done:
				stopFwd()
				signal.Stop(sigs)
				if len(sigs) > 0 {
					w.stopping.Store(true)
				}
				return
			}
		}
	}()
	return w
}

// stop stops relaying signals; the flags are final once it returns.
func (w *jobWatch) stop() {
	close(w.done)
	<-w.exited
}

// closeOnExec marks every descriptor above stderr close-on-exec.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; list fds: %w", err, rerr)
	}
	for _, ent := range ents {
		if fd, err := strconv.Atoi(ent.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
