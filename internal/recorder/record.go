// Record: a job run under the layer, from the spec to its exit code.

package recorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
)

// Record runs the job s.Argv with its I/O under s.Target traced, and writes the trace. It
// checks s, finds the command, checks that the trace can be written and binds the metrics'
// address before anything is mounted or run; then (with NativeFirst) runs the job once
// without the layer, and re-executes the program as the recorder (ChildCommand), which
// mounts the layer, runs the job and takes everything down. Its error wraps ErrUsage for a
// bad spec, is an *ExitError for the job's exit status (or the recorder's), or says what
// failed.
func Record(ctx context.Context, s Spec, e Env) error {
	started := trace.Now()
	e.defaults()
	switch {
	case len(s.Argv) == 0:
		return usageErrorf("missing the command to run (iotap record [flags] -- COMMAND [ARGS...])")
	case s.NativeRuntime < 0:
		return usageErrorf("--native-runtime must not be negative")
	case s.NativeFirst && s.NativeRuntime > 0:
		return usageErrorf("--native-first measures the native runtime: give it or --native-runtime, not both")
	}
	p, err := s.check(kindRecord, e.Version)
	if err != nil {
		return err
	}
	p.Argv, p.Started = s.Argv, started
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("current directory: %w", err)
	}
	p.Dir = cwd
	if !p.InPlace {
		p.Dir = mapDir(cwd, p.RealTarget, p.MountPoint)
	}
	// Find the command before mounting anything: a typo costs no mount.
	if _, err := job.Lookup(s.Argv[0], cwd); err != nil {
		var se *job.StartError
		if errors.As(err, &se) {
			return &ExitError{Code: se.Code, Err: describeStartError(se)}
		}
		return err
	}
	created, err := createOutput(p.Output)
	if err != nil {
		return err
	}
	if created {
		// A recording that fails before its trace is written leaves no empty file.
		defer removeIfEmpty(p.Output)
	}
	// The metrics' address is bound here, before the job runs and anything is mounted: an
	// address in use is a usage error. The recorder serves it.
	ml, err := listenMetrics(p.Metrics)
	if err != nil {
		return err
	}
	if ml != nil {
		defer func() { _ = ml.Close() }() // the recorder has its own descriptor
	}
	// The job's processes that lose their parent stay below this process, which kills them
	// when the job must end with iotap (reexecRecorder).
	if err := job.Subreaper(); err != nil {
		e.Log.Warn("the job's processes may outlive a killed recorder", "err", err)
	}
	native := s.NativeRuntime
	if s.NativeFirst {
		if native, err = runNative(ctx, e, p); err != nil {
			return err
		}
	}
	if native > 0 {
		p.Labels = append(p.Labels, trace.Label{Key: report.NativeRuntimeLabel, Value: strconv.FormatInt(int64(native), 10)})
	}
	_, _ = fmt.Fprintf(e.Stderr, "iotap: tracing %s%s, trace %s\n", p.Target, viewNote(p), p.Output)
	tl := p.timeline(e.Log)
	tl.mark("checked")
	err = reexecRecorder(e, p, ml)
	tl.mark("recorder ended")
	return err
}

// runNative runs the job once without the layer, in its own directory, and returns its
// runtime; a job that fails stops the recording.
func runNative(ctx context.Context, e Env, p *plan) (time.Duration, error) {
	_, _ = fmt.Fprintf(e.Stderr, "iotap: running the job once without the layer (--native-first)\n")
	// As under the layer, the job ends with iotap (reexecRecorder): its command dies with
	// the thread that starts it, and what it leaves is killed if iotap is told to stop.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	cmd, err := job.Start(job.Spec{
		Argv: p.Argv, Dir: p.Dir, Env: job.EnvWithPWD(os.Environ(), p.Dir),
		Stdin: e.Stdin, Stdout: e.Stdout, Stderr: e.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return 0, fmt.Errorf("--native-first: %w", err)
	}
	stop := job.Forward(cmd.Process)
	code, werr := job.Wait(cmd)
	stop()
	d := time.Since(t0)
	if ctx.Err() != nil {
		job.KillDescendants(killWait)
	}
	switch {
	case werr != nil:
		return 0, fmt.Errorf("--native-first: %w", werr)
	case code != 0:
		return 0, &ExitError{Code: code, Err: fmt.Errorf("--native-first: the job without the layer exited %d; nothing recorded", code)}
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	_, _ = fmt.Fprintf(e.Stderr, "iotap: the job ran in %v without the layer\n", d.Round(time.Microsecond))
	return d, nil
}

func viewNote(p *plan) string {
	if p.InPlace {
		return " in place (private mount namespace)"
	}
	return " at " + p.MountPoint
}

func describeStartError(se *job.StartError) error {
	if errors.Is(se, job.ErrNotFound) {
		return fmt.Errorf("%s: command not found", se.Name)
	}
	return se
}
