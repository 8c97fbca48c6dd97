package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/job"
)

// recordCommands returns the record subcommand and the hidden one it re-executes itself as.
func recordCommands() []*command {
	return []*command{
		{
			name:    "record",
			summary: "run a command with its I/O under --target traced, and write the trace",
			usage:   "[flags] -- COMMAND [ARGS...]",
			setup: func(fs *pflag.FlagSet) func(context.Context, *env, []string) error {
				opts := &recordOptions{}
				opts.AddFlags(fs)
				return func(ctx context.Context, e *env, args []string) error { return runRecord(ctx, e, opts, args) }
			},
		},
		{
			name:    recordChildCommand,
			summary: "internal: the recorder inside its private mount namespace",
			usage:   "(internal)",
			hidden:  true,
			setup: func(fs *pflag.FlagSet) func(context.Context, *env, []string) error {
				return func(ctx context.Context, e *env, args []string) error { return runRecordChild(ctx, e) }
			},
		},
	}
}

// recordOptions are the flags of `iotap record`.
type recordOptions struct {
	layerOptions
}

// AddFlags registers the flags of `iotap record`.
func (o *recordOptions) AddFlags(fs *pflag.FlagSet) {
	o.addFlags(fs, "trace the directory `dir` in place (default: the current directory)")
	fs.StringVar(&o.MountAt, "mount-at", "", "expose the traced view at `dir` instead of over --target (no mount namespace needed)")
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
	_, _ = fmt.Fprintf(e.stderr, "iotap: tracing %s%s, trace %s\n", spec.Target, viewNote(spec), spec.Output)
	if !spec.InPlace {
		return serve(ctx, e, spec)
	}
	return reexecInNamespace(e, spec)
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
