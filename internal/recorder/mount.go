// Mount: a traced view served until it is unmounted or the context ends; Unmount takes one
// down.

package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
)

// Mount serves a traced view of s.Target at s.MountAt in this process, writing the trace,
// until the view is unmounted (Unmount, umount, fusermount3 -u) or ctx ends. It checks s
// before anything is mounted, calls ready (if not nil) once the view serves, and prints the
// summary when it is down. Its error wraps ErrUsage for a bad spec, or says what failed.
func Mount(ctx context.Context, s Spec, e Env, ready func()) error {
	e.defaults()
	if s.Target == "" || s.MountAt == "" {
		return usageErrorf("--target and --mount-at are both required")
	}
	started := trace.Now()
	p, err := s.check(kindMount, e.Version)
	if err != nil {
		return err
	}
	p.Started = started
	created, err := createOutput(p.Output)
	if err != nil {
		return err
	}
	if created {
		defer removeIfEmpty(p.Output)
	}
	ml, err := listenMetrics(p.Metrics)
	if err != nil {
		return err
	}
	sess, err := openSession(e, p, ml)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.Stderr, "iotap: serving %s at %s, trace %s; stop with Ctrl-C or 'iotap unmount %s'\n",
		p.Target, p.MountPoint, p.Output, p.MountPoint)
	if ready != nil {
		ready()
	}
	stopLive := make(chan struct{})
	sess.startLive(stopLive)
	gone := make(chan struct{})
	go func() { sess.srv.Wait(); close(gone) }()
	outcome := "mount unmounted"
	select {
	case <-gone:
	case <-ctx.Done():
		outcome = "mount stopped by signal"
		sess.unmount()
	}
	close(stopLive)
	return sess.close(outcome)
}

// ErrNotIotapMount is returned by Unmount for a directory iotap did not mount.
var ErrNotIotapMount = errors.New("not an iotap mount")

// Unmount unmounts the traced view at dir (its server then closes the trace); notes go to
// stderr. It refuses a directory where iotap mounted nothing.
func Unmount(stderr io.Writer, dir string) error {
	dir, err := filepath.Abs(dir)
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
		return fmt.Errorf("%s: %w (nothing is mounted there)", dir, ErrNotIotapMount)
	}
	if !isIotapMount(m) {
		return fmt.Errorf("%s: %w (it is a %s mount of %s)", dir, ErrNotIotapMount, m.FSType, m.Source)
	}
	return unmountDir(stderr, dir)
}

func isIotapMount(m sysinfo.Mount) bool {
	return m.FSType == "fuse.iotap" || strings.HasPrefix(m.Source, "iotap")
}

// unmountDir unmounts dir: umount2, then a lazy detach if it is busy; without the right to
// unmount, through fusermount3 (which lets a user unmount their own FUSE mounts).
func unmountDir(stderr io.Writer, dir string) error {
	err := unix.Unmount(dir, 0)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EBUSY) {
		_, _ = fmt.Fprintf(stderr, "iotap: %s is busy; detaching it lazily (it goes away when no longer used)\n", dir)
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
