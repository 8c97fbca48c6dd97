package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
)

// recordCommands returns the record subcommand and the hidden one it re-executes itself as.
func recordCommands() []*command {
	return []*command{
		{
			name:    "record",
			summary: "run a command with its I/O under --target traced, and write the trace",
			usage:   "[flags] -- COMMAND [ARGS...]",
			setup:   withOptions(runRecord),
		},
		{
			name:    recordChildCommand,
			summary: "internal: the recorder inside its private mount namespace",
			usage:   "(internal)",
			hidden:  true,
			setup:   withoutOptions(func(ctx context.Context, e *env, _ []string) error { return runRecordChild(ctx, e) }),
		},
	}
}

// recordOptions are the flags of `iotap record`.
type recordOptions struct {
	layerOptions
	NativeFirst   bool
	NativeRuntime time.Duration
}

// AddFlags registers the flags of `iotap record`.
func (o *recordOptions) AddFlags(fs *pflag.FlagSet) {
	o.addFlags(fs, "trace the directory `dir` in place (default: the current directory)")
	fs.StringVar(&o.MountAt, "mount-at", "", "expose the traced view at `dir` instead of over --target (no mount namespace needed)")
	fs.BoolVar(&o.NativeFirst, "native-first", false, "run the job once without the layer first and keep its runtime in the trace, "+
		"for replays to anchor their predictions on (the job runs twice in the same place: only for a job that can)")
	fs.DurationVar(&o.NativeRuntime, "native-runtime", 0, "the job's runtime without the layer, as `duration` measured elsewhere, kept in the trace for replays to anchor on")
}

// Test hooks.
var (
	fuseAvailable = fusefs.Available
	geteuid       = os.Geteuid
	nowUTC        = func() time.Time { return time.Now().UTC() }
)

func runRecord(ctx context.Context, e *env, opts *recordOptions, args []string) error {
	if len(args) == 0 {
		return usageErrorf("missing the command to run (iotap record [flags] -- COMMAND [ARGS...])")
	}
	spec, err := prepare(&opts.layerOptions, "record")
	if err != nil {
		return err
	}
	spec.Argv = args
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("current directory: %w", err)
	}
	spec.Dir = cwd
	if !spec.InPlace {
		spec.Dir = mapDir(cwd, spec.RealTarget, spec.MountPoint)
	}
	// Find the command before mounting anything: a typo costs no mount.
	if _, err := job.Lookup(args[0], cwd); err != nil {
		var se *job.StartError
		if errors.As(err, &se) {
			return &exitCodeError{code: se.Code, err: describeStartError(se)}
		}
		return err
	}
	if err := createOutput(spec.Output); err != nil {
		return err
	}
	// The metrics' address is bound here, before the job runs and anything is mounted: an
	// address in use is a usage error. The recorder serves it.
	ml, err := listenMetrics(spec.Metrics)
	if err != nil {
		return err
	}
	if ml != nil {
		defer func() { _ = ml.Close() }() // the recorder has its own descriptor
	}
	// The job's processes that lose their parent stay below this process, which kills them
	// when the job must end with iotap (reexecRecorder).
	if err := job.Subreaper(); err != nil {
		e.log.Warn("the job's processes may outlive a killed recorder", "err", err)
	}
	native := opts.NativeRuntime
	switch {
	case native < 0:
		return usageErrorf("--native-runtime must not be negative")
	case opts.NativeFirst && native > 0:
		return usageErrorf("--native-first measures the native runtime: give it or --native-runtime, not both")
	case opts.NativeFirst:
		if native, err = runNative(ctx, e, spec); err != nil {
			return err
		}
	}
	if native > 0 {
		spec.Labels = append(spec.Labels, trace.Label{Key: report.NativeRuntimeLabel, Value: strconv.FormatInt(int64(native), 10)})
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: tracing %s%s, trace %s\n", spec.Target, viewNote(spec), spec.Output)
	return reexecRecorder(e, spec, ml)
}

// runNative runs the job once without the layer, in its own directory, and returns its
// runtime; a job that fails stops the recording.
func runNative(ctx context.Context, e *env, spec *recordSpec) (time.Duration, error) {
	_, _ = fmt.Fprintf(e.stderr, "iotap: running the job once without the layer (--native-first)\n")
	// As under the layer, the job ends with iotap (reexecRecorder): its command dies with
	// the thread that starts it, and what it leaves is killed if iotap is told to stop.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	cmd, err := job.Start(job.Spec{
		Argv: spec.Argv, Dir: spec.Dir, Env: job.EnvWithPWD(os.Environ(), spec.Dir),
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
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
		return 0, &exitCodeError{code: code, err: fmt.Errorf("--native-first: the job without the layer exited %d; nothing recorded", code)}
	case ctx.Err() != nil:
		return 0, ctx.Err()
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: the job ran in %v without the layer\n", d.Round(time.Microsecond))
	return d, nil
}

func viewNote(s *recordSpec) string {
	if s.InPlace {
		return " in place (private mount namespace)"
	}
	return " at " + s.MountPoint
}

func describeStartError(se *job.StartError) error {
	if errors.Is(se, job.ErrNotFound) {
		return fmt.Errorf("%s: command not found", se.Name)
	}
	return se
}
