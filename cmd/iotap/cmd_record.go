package main

import (
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/recorder"
)

// recordCommands returns the record subcommand and the hidden ones the recorder
// re-executes iotap as (recorder.ChildCommand, recorder.ProbeCommand).
func recordCommands() []*command {
	return []*command{
		{
			name:    "record",
			summary: "run a command with its I/O under --target traced, and write the trace",
			usage:   "[flags] -- COMMAND [ARGS...]",
			setup:   withOptions(runRecord),
		},
		{
			name:    recorder.ChildCommand,
			summary: "internal: the recorder inside its private mount namespace",
			usage:   "(internal)",
			hidden:  true,
			setup: withoutOptions(func(ctx context.Context, e *env, _ []string) error {
				return recorder.RunChild(ctx, e.recorderEnv())
			}),
		},
		{
			name:    recorder.ProbeCommand,
			summary: "internal: times lookups of a name through the recording layer",
			usage:   "PATH FIRST N INTERVAL (internal)",
			hidden:  true,
			setup: withoutOptions(func(ctx context.Context, e *env, args []string) error {
				return recorder.RunProbe(ctx, e.stdin, e.stdout, args)
			}),
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

func runRecord(ctx context.Context, e *env, opts *recordOptions, args []string) error {
	s, err := opts.spec()
	if err != nil {
		return err
	}
	s.Argv, s.NativeFirst, s.NativeRuntime = args, opts.NativeFirst, opts.NativeRuntime
	return recorder.Record(ctx, s, e.recorderEnv())
}

// recorderEnv is what the recorder gets of the command's environment.
func (e *env) recorderEnv() recorder.Env {
	return recorder.Env{Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, Log: e.log, Version: version}
}
