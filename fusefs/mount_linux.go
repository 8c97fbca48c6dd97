package fusefs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/fusectl"
	"github.com/iotap/iotap/fusefs/internal/loopback"
	"github.com/iotap/iotap/fusefs/internal/servicetime"
	"github.com/iotap/iotap/trace"
)

// Server is a mounted layer.
type Server struct {
	srv        *fuse.Server
	tracer     *tracer // nil when untraced
	rootFd     int
	mountpoint string

	kdev uint32 // kernel device number of the mount: the fusectl connection name

	passthrough *loopback.Passthrough // with Options.Passthrough, else nil

	mu        sync.Mutex // guards unmounted
	unmounted bool
}

// Mount serves rootDir on mountpoint, recording every request into rec, and returns once the
// mount is ready. A nil rec serves an untraced loopback with identical options and node code
// (the baseline of the overhead benchmarks).
//
// The backend is reached through a descriptor opened before the mount, so rootDir may equal
// mountpoint (in-place tracing): the layer then reads the directory it covers, and files
// written through the mount land in the real directory.
func Mount(mountpoint, rootDir string, rec Recorder, o Options) (*Server, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	mnt, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("fusefs: mount point: %w", err)
	}
	dir, err := filepath.Abs(rootDir)
	if err != nil {
		return nil, fmt.Errorf("fusefs: target: %w", err)
	}
	var dst, mst syscall.Stat_t
	if err := syscall.Stat(dir, &dst); err != nil {
		return nil, fmt.Errorf("fusefs: target %s: %w", dir, err)
	}
	if dst.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("fusefs: target %s: %w", dir, syscall.ENOTDIR)
	}
	if err := syscall.Stat(mnt, &mst); err != nil {
		return nil, fmt.Errorf("fusefs: mount point %s: %w", mnt, err)
	}
	if mst.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, fmt.Errorf("fusefs: mount point %s: %w", mnt, syscall.ENOTDIR)
	}
	rootFd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("fusefs: open target %s: %w", dir, err)
	}
	// The backend is named through the descriptor, never by dir's path: in place, the path
	// leads to the mount itself; at another mount point, whatever is at dir now (the target
	// renamed, covered by another mount, or unmounted lazily) is not what the view shows.
	var times *servicetime.Table // where the node code reports its backend calls to the tracer
	if rec != nil {
		times = new(servicetime.Table)
	}
	fo := o.fsOptions()
	fo.DirectMountFlags = mountFlags(dir)
	lo := o.loopbackOptions(times)
	if o.Passthrough {
		lo.Passthrough = new(loopback.Passthrough)
	}
	raw, err := loopback.New("/proc/self/fd/"+strconv.Itoa(rootFd), rootFd, lo, fo)
	if err != nil {
		_ = unix.Close(rootFd)
		return nil, fmt.Errorf("fusefs: target %s: %w", dir, err)
	}
	s := &Server{rootFd: rootFd, mountpoint: mnt, passthrough: lo.Passthrough}
	if rec != nil {
		s.tracer = newTracer(raw, rec, o)
		if err := s.tracer.startConn(); err != nil && o.Logger != nil {
			o.Logger.Warn("fusefs: attributing requests from /proc, in their path", "err", err)
		}
		s.tracer.serviceTimes = times
		raw = s.tracer
	}
	srv, err := fuse.NewServer(raw, mnt, &fo.MountOptions)
	if err != nil {
		s.closeConn()
		_ = unix.Close(rootFd)
		return nil, fmt.Errorf("fusefs: mount %s: %w", mnt, mountError(err))
	}
	s.srv = srv
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		_ = srv.Unmount()
		s.closeConn()
		_ = unix.Close(rootFd)
		return nil, fmt.Errorf("fusefs: mount %s: %w", mnt, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err == nil {
		s.kdev = fusectl.Conn(st.Dev)
		if o.Cache == CacheKernel {
			relaxDirtyLimit(unix.Major(st.Dev), unix.Minor(st.Dev), o.Logger)
		}
	}
	return s, nil
}

// mountFlags returns the flags for mounting the layer over dir: the set-user-ID, device,
// execute and read-only restrictions of the mount dir is on, no more and no less, so that
// through the layer a job may run, open and write what it may natively. (go-fuse mounts
// nosuid,nodev otherwise: a set-user-ID program of the target would run without its
// privileges, and its device nodes would not open.) fusermount, for a server that is not
// root, always adds nosuid and nodev.
func mountFlags(dir string) uintptr {
	var s unix.Statfs_t
	if unix.Statfs(dir, &s) != nil {
		return 0 // go-fuse's default
	}
	var f uintptr
	for _, m := range [][2]uintptr{{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV},
		{unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_RDONLY, unix.MS_RDONLY}} {
		if uintptr(s.Flags)&m[0] != 0 {
			f |= m[1]
		}
	}
	if f == 0 {
		f = unix.MS_MGC_VAL // no flag at all (0 means go-fuse's default)
	}
	return f
}

// relaxDirtyLimit lifts the kernel's dirty-page limits for FUSE on this mount's
// backing device, so write-back caching works as on a kernel file system. The kernel
// guards against untrusted FUSE daemons by letting a FUSE device hold at most 1% of the
// dirty threshold, strictly ("strict_limit"): a writer is throttled to the daemon's
// write-back speed after a few MiB, which made cache=kernel writes slower than direct I/O.
// The device and its settings go away with the mount. Needs root; failures only log.
func relaxDirtyLimit(major, minor uint32, lg *slog.Logger) {
	dir := fmt.Sprintf("/sys/class/bdi/%d:%d/", major, minor)
	for _, kv := range [][2]string{{"strict_limit", "0"}, {"max_ratio", "100"}} {
		if err := os.WriteFile(dir+kv[0], []byte(kv[1]), 0); err != nil && lg != nil {
			lg.Debug("fusefs: cannot relax the dirty-page limit", "file", dir+kv[0], "err", err)
		}
	}
}

// mountError adds what is missing to a mount failure.
func mountError(err error) error {
	if a := Available(); a != nil {
		return fmt.Errorf("%w (%v)", err, a)
	}
	return err
}

// Unmount unmounts the file system; Wait returns after that.
// A second call is a no-op.
func (s *Server) Unmount() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unmounted {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- s.srv.Unmount() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(unmountGrace):
		// umount(2) succeeded but the serving loops did not stop: a copy of the mount lives
		// on in another mount namespace (a process that unshared while we were mounted).
		// Abort our connection so neither we nor that copy hang.
		if !mounted(s.mountpoint, s.kdev) {
			s.abort()
		}
		err = <-done
	}
	if err != nil {
		return fmt.Errorf("fusefs: unmount %s: %w", s.mountpoint, err)
	}
	s.unmounted = true
	return nil
}

const unmountGrace = 2 * time.Second

// mounted reports whether this namespace still has a mount with device kdev at mnt.
func mounted(mnt string, kdev uint32) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return true
	}
	want := fmt.Sprintf(" %d:%d ", kdev>>20, kdev&(1<<20-1))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, want) {
			return true
		}
	}
	return false
}

// abort aborts the FUSE connection through fusectl, mounting it privately when this
// process sees no fusectl mount (package fusectl): nothing is left mounted.
func (s *Server) abort() {
	f, err := fusectl.Open(s.kdev, "abort", os.O_WRONLY)
	if err != nil {
		return
	}
	_, _ = f.WriteString("1")
	_ = f.Close()
}

// Conn returns the mount's FUSE connection number, its name in fusectl (0 if unknown).
func (s *Server) Conn() uint32 { return s.kdev }

// Wait blocks until the file system is unmounted (by Unmount, fusermount -u or umount) and
// releases the backend descriptor.
func (s *Server) Wait() {
	s.srv.Wait()
	s.closeConn()
	if s.rootFd >= 0 {
		_ = unix.Close(s.rootFd)
		s.rootFd = -1
	}
}

// closeConn ends the proc connector's subscription; the threads it was still reading from
// /proc are recorded first.
func (s *Server) closeConn() {
	if s.tracer != nil && s.tracer.conn != nil {
		_ = s.tracer.conn.Close()
	}
}

// Cost returns the layer's request count and its measurement of its own cost so far. It is
// zero for an untraced mount.
func (s *Server) Cost() CostCounters {
	if s.tracer == nil {
		return CostCounters{}
	}
	c := s.tracer.counters.snapshot()
	if r := s.tracer.conn; r != nil {
		st := r.Stats()
		c.Connector = true
		c.Late, c.Missing, c.Overflows = st.Late, st.Missing, st.Overflows
		c.Resolve += st.InPath
		c.Self += st.InPath
		c.InLayer += st.InPath
		c.InPathReads = st.InPathReads
	}
	return c
}

// Probes returns how many lookups of Options.ProbeName the layer answered, and the time it
// spent handling them in all.
func (s *Server) Probes() (n uint64, handling time.Duration) {
	if s.tracer == nil {
		return 0, 0
	}
	return s.tracer.probeN.Load(), time.Duration(s.tracer.probeDur.Load())
}

// CostByOp returns, per operation, the requests served and the layer's own work on them
// (see CostCounters.Self); nil unless mounted with Options.CostByOp.
func (s *Server) CostByOp() map[trace.Op]OpCost {
	if s.tracer == nil || s.tracer.byOp == nil {
		return nil
	}
	m := map[trace.Op]OpCost{}
	for op := range s.tracer.byOp {
		c := &s.tracer.byOp[op]
		if n := c.n.Load(); n > 0 {
			m[trace.Op(op)] = OpCost{Requests: n, Sampled: c.sampled.Load(), Self: scale(c.self.Load(), n, c.sampled.Load()),
				Median: time.Duration(c.median())}
		}
	}
	return m
}

// OpCost is the layer's own work on the requests of one operation, without /proc lookups:
// measured on Sampled requests, scaled to all.
type OpCost struct {
	Requests, Sampled uint64
	Self              time.Duration
	Median            time.Duration // of a sampled request's own work (within 12 %)
}

// Mountpoint returns the absolute mount point.
func (s *Server) Mountpoint() string { return s.mountpoint }

// Available returns nil if this process can mount FUSE file systems, else an error naming
// what is missing.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("/dev/fuse does not exist (load the fuse module, or pass --device /dev/fuse to the container): %w", err)
		}
		return fmt.Errorf("cannot open /dev/fuse: %w", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(int(f.Fd()), &st)
	_ = f.Close()
	if err == nil && (st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 10 || unix.Minor(st.Rdev) != 229) {
		// A container may bind another file there; mounting would then fail with EINVAL.
		return errors.New("/dev/fuse is not the FUSE device (a character device 10:229 is expected; pass --device /dev/fuse to the container)")
	}
	if os.Geteuid() == 0 {
		return nil
	}
	for _, p := range []string{"fusermount3", "fusermount"} {
		if _, err := exec.LookPath(p); err == nil {
			return nil
		}
	}
	return errors.New("not root and neither fusermount3 nor fusermount is in PATH (install fuse3)")
}
