package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
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
	var ready *os.File
	if opts.ReadyFD >= 0 {
		f, err := readyFile(opts.ReadyFD)
		if err != nil {
			return err
		}
		ready = f
		defer func() { _ = ready.Close() }() // without a line, if the mount failed
	}
	spec, err := prepare(&opts.layerOptions, "mount")
	if err != nil {
		return err
	}
	if err := createOutput(spec.Output); err != nil {
		return err
	}
	ml, err := listenMetrics(spec.Metrics)
	if err != nil {
		return err
	}
	s, err := openSession(e, spec, ml)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: serving %s at %s, trace %s; stop with Ctrl-C or 'iotap unmount %s'\n",
		spec.Target, spec.MountPoint, spec.Output, spec.MountPoint)
	if ready != nil {
		if _, err := fmt.Fprintln(ready, "ready"); err != nil {
			e.log.Warn("mount: write the ready line", "fd", opts.ReadyFD, "err", err)
		}
		_ = ready.Close()
		ready = nil
	}
	stopLive := make(chan struct{})
	s.startLive(stopLive)
	gone := make(chan struct{})
	go func() { s.srv.Wait(); close(gone) }()
	outcome := "mount unmounted"
	select {
	case <-gone:
	case <-ctx.Done():
		outcome = "mount stopped by signal"
		s.unmount()
	}
	close(stopLive)
	return s.close(outcome)
}

// errNotIotapMount is returned by unmount for a directory iotap did not mount.
var errNotIotapMount = errors.New("not an iotap mount")

func runUnmount(_ context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return usageErrorf("want exactly one directory")
	}
	dir, err := filepath.Abs(args[0])
	if err != nil {
		return err
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	m, ok, err := sysinfo.IsMountPoint(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w (nothing is mounted there)", dir, errNotIotapMount)
	}
	if !isIotapMount(m) {
		return fmt.Errorf("%s: %w (it is a %s mount of %s)", dir, errNotIotapMount, m.FSType, m.Source)
	}
	return unmountDir(e, dir)
}

func isIotapMount(m sysinfo.Mount) bool {
	return m.FSType == "fuse.iotap" || strings.HasPrefix(m.Source, "iotap")
}

// unmountDir unmounts dir: umount2, then a lazy detach if it is busy; without the right to
// unmount, through fusermount3 (which lets a user unmount their own FUSE mounts).
func unmountDir(e *env, dir string) error {
	err := unix.Unmount(dir, 0)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EBUSY) {
		_, _ = fmt.Fprintf(e.stderr, "iotap: %s is busy; detaching it lazily (it goes away when no longer used)\n", dir)
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		return nil
	}
	if errors.Is(err, unix.EPERM) {
		if fm, lerr := exec.LookPath("fusermount3"); lerr == nil {
			out, ferr := exec.Command(fm, "-u", dir).CombinedOutput()
			if ferr == nil {
				return nil
			}
			out2, ferr := exec.Command(fm, "-u", "-z", dir).CombinedOutput()
			if ferr == nil {
				return nil
			}
			return fmt.Errorf("unmount %s: fusermount3: %s", dir, strings.TrimSpace(string(append(out, out2...))))
		}
	}
	return fmt.Errorf("unmount %s: %w", dir, err)
}
