// Package fusectl opens the control files of a FUSE connection: the fusectl file system's
// /sys/fs/fuse/connections/N/{waiting,abort,max_background,congestion_threshold}, N being
// the connection's device number in the kernel's encoding (major<<20 | minor of the FUSE
// mount's st_dev; see Conn).
//
// fusectl is often not mounted (a machine without systemd, a container, a fresh VM). Open
// then mounts it in a mount namespace that only one short-lived thread of this process
// uses, opens the file there and lets the thread end: the descriptor keeps working, and
// nothing stays mounted where anyone, this process included, sees it. This needs
// CAP_SYS_ADMIN.
package fusectl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
)

// Dir is where fusectl is mounted by convention (systemd mounts it there).
const Dir = "/sys/fs/fuse/connections"

// ErrUnavailable means no fusectl file of the connection could be opened: fusectl is not
// mounted and could not be mounted privately, or the connection is not listed there.
var ErrUnavailable = errors.New("fusectl: the connection's control file cannot be opened")

// Conn returns the fusectl name of the FUSE connection of a file system whose st_dev is
// dev: the kernel's device number, major<<20 | minor (not the user-space encoding).
func Conn(dev uint64) uint32 {
	return unix.Major(dev)<<20 | unix.Minor(dev)
}

// Open opens the control file name ("waiting", "abort", ...) of connection conn with flag
// (os.O_RDONLY or os.O_WRONLY), close-on-exec; name "" opens the connection's directory. It uses a fusectl mount this process sees
// when there is one, and otherwise mounts fusectl privately (see the package comment). The
// error wraps ErrUnavailable and says why.
func Open(conn uint32, name string, flag int) (*os.File, error) {
	rel := filepath.Join(strconv.FormatUint(uint64(conn), 10), name)
	mounts, err := sysinfo.Mounts()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	seen := false
	for _, m := range mounts {
		if m.FSType != "fusectl" {
			continue
		}
		seen = true
		if f, err := os.OpenFile(filepath.Join(m.MountPoint, rel), flag|unix.O_CLOEXEC, 0); err == nil {
			return f, nil
		}
	}
	if seen {
		// Every fusectl mount shows every connection (one superblock): the connection is gone,
		// or it is not listed (a FUSE mount made in another user namespace).
		return nil, fmt.Errorf("%w: connection %d is not listed in fusectl", ErrUnavailable, conn)
	}
	f, err := openPrivate(rel, flag)
	if err != nil {
		return nil, fmt.Errorf("%w: fusectl (%s) is not mounted, and mounting it privately failed: %v", ErrUnavailable, Dir, err)
	}
	return f, nil
}

// openPrivate opens rel under a fusectl mount made in a mount namespace of one thread's
// own. The thread is never handed back to the Go scheduler: it ends with its goroutine,
// and its namespace, with the mount, with it. The main thread is never used: /proc/self
// names it, and the Go runtime parks it instead of ending it.
func openPrivate(rel string, flag int) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// This goroutine holds the main thread, so the one below cannot get it.
			f, err := openPrivate(rel, flag)
			runtime.UnlockOSThread()
			res <- result{f, err}
			return
		}
		// Never unlocked: the thread ends when this goroutine returns.
		f, err := mountAndOpen(rel, flag)
		res <- result{f, err}
	}()
	r := <-res
	return r.f, r.err
}

// mountAndOpen runs on a locked thread that is about to end.
func mountAndOpen(rel string, flag int) (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return nil, fmt.Errorf("unshare the mount namespace: %w", err)
	}
	// The copies of shared mounts would pass the new mount on to their peers.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make the thread's mounts private: %w", err)
	}
	if err := unix.Mount("fusectl", Dir, "fusectl", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount fusectl: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(Dir, rel), flag|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Waiting reads a connection's "waiting" file: the requests the kernel has started on the
// connection and not finished (queued for the daemon, being served by it, or waiting for a
// background slot; FORGETs are not requests). It holds the connection's directory open and
// opens the file anew for each read (fusectl's files are not seekable, and the kernel takes
// the value at a descriptor's first read), so it keeps working after a private fusectl mount
// is gone. It is safe for concurrent use.
type Waiting struct {
	dir *os.File
}

// ErrGone is returned by Waiting.Read once the connection has ended (unmounted or aborted).
var ErrGone = errors.New("fusectl: the connection has ended")

// OpenWaiting opens the directory of connection conn in fusectl (see Open) to read its
// "waiting" file.
func OpenWaiting(conn uint32) (*Waiting, error) {
	dir, err := Open(conn, "", os.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Waiting{dir: dir}, nil
}

// Read returns the connection's requests in flight now.
func (w *Waiting) Read() (uint64, error) {
	fd, err := unix.Openat(int(w.dir.Fd()), "waiting", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, ErrGone // the kernel removes the directory when the connection ends
	}
	if err != nil {
		return 0, fmt.Errorf("fusectl: open waiting: %w", err)
	}
	var buf [32]byte
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	switch {
	case err != nil:
		return 0, fmt.Errorf("fusectl: read waiting: %w", err)
	case n == 0:
		return 0, ErrGone // the file outlived its connection
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fusectl: waiting holds %q: %w", buf[:n], err)
	}
	return v, nil
}

// Close closes the connection's directory.
func (w *Waiting) Close() error { return w.dir.Close() }
