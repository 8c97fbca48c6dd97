package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/recorder"
)

// mountCommands returns the mount and unmount subcommands.
func mountCommands() []*command {
	return []*command{
		{
			name:    "mount",
			summary: "serve a traced view of --target at --mount-at until unmounted or interrupted",
			usage:   "--target DIR --mount-at DIR2 [-o TRACE] [flags]",
			setup:   withOptions(runMount),
		},
		{
			name:    "unmount",
			summary: "unmount a traced view made by 'iotap mount' (its trace is then closed)",
			usage:   "DIR",
			setup:   withoutOptions(runUnmount),
		},
	}
}

// mountOptions are the flags of `iotap mount`.
type mountOptions struct {
	layerOptions
	ReadyFD int // -1: none
}

// AddFlags registers the flags of `iotap mount`.
func (o *mountOptions) AddFlags(fs *pflag.FlagSet) {
	o.addFlags(fs, "the directory `dir` to trace (required)")
	fs.StringVar(&o.MountAt, "mount-at", "", "serve the traced view at `dir` (required)")
	fs.IntVar(&o.ReadyFD, "ready-fd", -1, "once the view serves, write \"ready\" and a newline to the inherited file descriptor `n` (3 or more) and close it; "+
		"if mounting fails it is closed without a line")
}

// readyFile takes over the inherited descriptor fd for `iotap mount --ready-fd`. Programs
// iotap starts do not inherit it, so the reader sees end-of-file as soon as iotap closes it
// or exits.
func readyFile(fd int) (*os.File, error) {
	if fd < 3 {
		return nil, usageErrorf("--ready-fd %d: want an inherited descriptor of 3 or more (0-2 are stdin, stdout, stderr)", fd)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		return nil, usageErrorf("--ready-fd %d: not an open file descriptor: %v", fd, err)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "ready-fd"), nil
}

func runMount(ctx context.Context, e *env, opts *mountOptions, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	if opts.Target == "" || opts.MountAt == "" {
		return usageErrorf("--target and --mount-at are both required")
	}
	var readyFn func()
	if opts.ReadyFD >= 0 {
		ready, err := readyFile(opts.ReadyFD)
		if err != nil {
			return err
		}
		defer func() { _ = ready.Close() }() // without a line, if the mount failed
		readyFn = func() {
			if _, err := fmt.Fprintln(ready, "ready"); err != nil {
				e.log.Warn("mount: write the ready line", "fd", opts.ReadyFD, "err", err)
			}
			_ = ready.Close()
		}
	}
	s, err := opts.spec()
	if err != nil {
		return err
	}
	return recorder.Mount(ctx, s, e.recorderEnv(), readyFn)
}

func runUnmount(_ context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return usageErrorf("want exactly one directory")
	}
	return recorder.Unmount(e.stderr, args[0])
}
