package loopback

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// POSIX record locks.
//
// The mount asks for the kernel's lock requests (GETLK, SETLK, SETLKW), so that the locks a
// job takes reach the backing file system: processes that use the backing directory
// directly, and other mounts of it, see them. Each request names its owner: the process (its
// table of descriptors) for fcntl F_SETLK/F_SETLKW and lockf, the open file for OFD locks
// and flock(2).
//
// POSIX locks belong to the process: a process's locks on a file never conflict with each
// other, whichever descriptor it used, they merge and split by range, and closing any of
// its descriptors of the file releases all of them. The server is one process, so its own
// POSIX locks would all be one owner's. Instead each owner gets an open file description
// of its own on the backing file (the owner's descriptor), and its locks are OFD locks
// there: OFD locks of one description behave as one process's POSIX locks, and conflict
// with every other description's and with every process's POSIX locks. The kernel sends the
// owner with every FLUSH (each close(2)): the owner's locks on the file are released then
// (posixFlush), and its descriptor closed. An OFD owner's locks end with the last close of
// the open file, at RELEASE.
//
// A blocking request (F_SETLKW) that must wait does so in a process of its own, on a
// descriptor of its own (waitProbe), and takes the lock on the owner's descriptor once the
// range is free. When the kernel interrupts the request (a signal to the waiting process),
// the waiting process is killed, and once it is gone (with anything it held) the reply is
// EINTR, which the kernel restarts where the application's signal handler asks for it, as
// natively. (An owner converting locks it holds in the range waits on its own
// descriptor, on a thread of the server; such a wait, given up, is undone when granted.)
// Before waiting, the layer checks for a deadlock among the owners it serves (the owner
// holding the conflicting lock waits, through a chain of others, for this one) and fails
// the request with EDEADLK, as the kernel does for POSIX locks; owners outside the mount
// are not known to it.
//
// F_GETLK reports the process of the conflicting lock: the pid in the owner's requests for
// owners of this mount, the backing file system's for other processes' POSIX locks, 0 for
// locks it cannot attribute (OFD locks of other programs).
//
// flock(2) locks belong to the open file, which is the FUSE handle: they are flock(2) on the
// handle's own descriptor, released with it.

// lockKey names one owner's locks on one file: the inode (its number in the mount) and the
// kernel's lock owner.
type lockKey struct{ ino, owner uint64 }

// lockOwner is one owner's open file description on a backing file.
type lockOwner struct {
	key     lockKey
	fd      int    // the owner's descriptor: its locks are OFD locks on it
	pid     uint32 // the process of the owner's latest lock request (the kernel's l_pid)
	f       *file  // the handle of the first request: an OFD owner's locks end with it
	waiters int    // blocking requests waiting on fd
	gen     uint64 // incremented when the owner's locks are all released
	closed  bool   // fd is closed (the owner's locks were released)
}

// lockTable is the owners of a mount. One mutex guards it: lock requests are rare next to
// reads and writes, and no system call that can wait runs under it.
type lockTable struct {
	mu       sync.Mutex             // guards everything below and the lockOwner fields
	owners   map[lockKey]*lockOwner // GUARDED_BY(mu)
	waiting  map[uint64]uint64      // owner → owner it waits for (deadlock detection); GUARDED_BY(mu)
	flockers map[*file]struct{}     // handles holding flock(2) locks; GUARDED_BY(mu)
	released chan struct{}          // closed (and replaced) when a handle's locks go; GUARDED_BY(mu)
	n        atomic.Int32           // len(owners): a FLUSH without locks around reads only this
}

func newLockTable() *lockTable {
	return &lockTable{owners: map[lockKey]*lockOwner{}, waiting: map[uint64]uint64{},
		flockers: map[*file]struct{}{}, released: make(chan struct{})}
}

// Closing an open file.
//
// The locks of an open file (flock(2), OFD locks) end with its last close. The kernel sends
// FLUSH, waits for it, and sends RELEASE only after close(2) has returned: a process that
// closes a file and at once asks for a lock the file held, or a process it told so, would
// find it still held and get EAGAIN. So a non-blocking request that conflicts with the
// locks of a handle of the same file that was flushed in the last releaseGrace waits for
// that handle's RELEASE (at most until releaseGrace after the flush) and tries again. A
// FLUSH that is not the last close (another descriptor of the open file stays) delays such
// a request by releaseGrace.
const releaseGrace = 100 * time.Millisecond

// flushed notes a FLUSH of f, if it holds locks that end with its RELEASE.
func (f *file) flushed() {
	if f.locks != nil && (f.locked.Load() || f.flocked.Load()) {
		f.flushedAt.Store(time.Now().UnixNano())
	}
}

// pendingReleaseLocked returns when the grace for a handle of inode ino other than self
// ends: one that holds locks ending with its RELEASE and was flushed less than
// releaseGrace ago (0: none).
func (t *lockTable) pendingReleaseLocked(ino uint64, self *file) int64 {
	now := time.Now().UnixNano()
	var until int64
	note := func(f *file) {
		if f == self || f.ino != ino {
			return
		}
		if end := f.flushedAt.Load() + int64(releaseGrace); end > now {
			until = max(until, end)
		}
	}
	for f := range t.flockers {
		note(f)
	}
	for _, o := range t.owners {
		note(o.f)
	}
	return until
}

// awaitRelease waits (t.mu held, and held again on return) until a handle's locks go or
// the time until (unix ns) comes.
func (t *lockTable) awaitRelease(until int64) {
	ch := t.released
	t.mu.Unlock()
	tm := time.NewTimer(time.Duration(until - time.Now().UnixNano()))
	select {
	case <-ch:
	case <-tm.C:
	}
	tm.Stop()
	t.mu.Lock()
}

// releasedLocked wakes the requests waiting in awaitRelease.
func (t *lockTable) releasedLocked() {
	close(t.released)
	t.released = make(chan struct{})
}

// active reports whether any owner holds, or held, locks that are not yet released.
func (t *lockTable) active() bool { return t.n.Load() > 0 }

// flockT converts a FUSE lock range to an OFD lock request (l_pid must be 0).
func flockT(lk *fuse.FileLock, typ uint32) unix.Flock_t {
	fl := unix.Flock_t{Type: int16(typ), Whence: 0, Start: int64(lk.Start)}
	if lk.End != 1<<63-1 {
		fl.Len = int64(lk.End - lk.Start + 1)
	}
	return fl
}

// wholeFile reports whether lk covers every byte.
func wholeFile(lk *fuse.FileLock) bool { return lk.Start == 0 && lk.End == 1<<63-1 }

// getlk answers F_GETLK for owner on f.
func (t *lockTable) getlk(f *file, owner uint64, lk *fuse.FileLock, out *fuse.FileLock) syscall.Errno {
	fl := flockT(lk, lk.Typ)
	t.mu.Lock()
	defer t.mu.Unlock()
	fd := f.fd // holds no fcntl locks: it sees every owner's
	o := t.owners[lockKey{f.ino, owner}]
	if o != nil {
		fd = o.fd // sees every owner's but this one's
	}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &fl); err != nil {
		return errnoOf(err)
	}
	*out = fuse.FileLock{Typ: uint32(fl.Type)}
	if fl.Type == unix.F_UNLCK {
		return 0
	}
	out.Start = uint64(fl.Start)
	out.End = 1<<63 - 1
	if fl.Len > 0 {
		out.End = uint64(fl.Start + fl.Len - 1)
	}
	switch {
	case fl.Pid > 0: // a process's POSIX lock outside the mount
		out.Pid = uint32(fl.Pid)
	default:
		if h := t.holder(f.ino, o, &fl); h != nil {
			out.Pid = h.pid
		}
	}
	return 0
}

// setlk is F_SETLK (or F_SETLKW when block) for owner on f.
func (t *lockTable) setlk(ctx context.Context, f *file, owner uint64, lk *fuse.FileLock, block bool) syscall.Errno {
	key := lockKey{f.ino, owner}
	fl := flockT(lk, lk.Typ)
	if lk.Typ == unix.F_UNLCK {
		t.mu.Lock()
		defer t.mu.Unlock()
		o := t.owners[key]
		if o == nil {
			return 0
		}
		if wholeFile(lk) {
			t.releaseLocked(key, o)
			return 0
		}
		return errnoOf(unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_SETLK, &fl))
	}
	for {
		t.mu.Lock()
		o := t.owners[key]
		fresh := o == nil
		if fresh {
			fd, err := reopen(f)
			if err != nil {
				t.mu.Unlock()
				return errnoOf(err)
			}
			o = &lockOwner{key: key, fd: fd, f: f}
			t.owners[key] = o
			t.n.Add(1)
			f.locked.Store(true)
		}
		o.pid = lk.Pid
		err := unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_SETLK, &fl)
		if err == unix.EAGAIN && !block {
			if until := t.pendingReleaseLocked(f.ino, f); until != 0 {
				t.awaitRelease(until)
				if o.closed { // released meanwhile
					t.mu.Unlock()
					continue
				}
				err = unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_SETLK, &fl)
			}
		}
		if err == nil || !block || err != unix.EAGAIN {
			if err != nil && fresh {
				t.releaseLocked(key, o)
			}
			t.mu.Unlock()
			return errnoOf(err)
		}
		// Blocking, and another owner holds a conflicting lock.
		if t.deadlockLocked(f.ino, o, &fl) {
			if fresh {
				t.releaseLocked(key, o)
			}
			t.mu.Unlock()
			return syscall.EDEADLK
		}
		var own []lockRange
		if !fresh {
			own = ownLocks(o.fd)
		}
		var done bool
		var errno syscall.Errno
		if overlaps(own, &fl) {
			// The owner holds locks in the range (it converts them): it waits on its
			// own descriptor, where the wait can merge with them.
			o.waiters++
			gen := o.gen
			t.mu.Unlock()
			done, errno = t.waitOwner(ctx, o, fl, gen, own)
		} else {
			t.mu.Unlock()
			done, errno = waitProbe(ctx, f, fmt.Sprintf("posix %d %d %d", fl.Type, fl.Start, fl.Len))
		}
		t.mu.Lock()
		delete(t.waiting, owner)
		t.mu.Unlock()
		if done {
			return errno
		}
		// The range was free a moment ago (or the owner's locks were released while it
		// waited): try again.
	}
}

// deadlockLocked finds the owner of this mount that holds the lock conflicting with owner
// o's request fl, and reports whether o would wait in a cycle (that owner waits, through a
// chain of others, for o); if not, it notes that o waits for it. Locks of processes outside
// the mount are not known here.
func (t *lockTable) deadlockLocked(ino uint64, o *lockOwner, fl *unix.Flock_t) bool {
	probe := *fl
	if unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_GETLK, &probe) != nil || probe.Type == unix.F_UNLCK || probe.Pid > 0 {
		return false
	}
	h := t.holder(ino, o, &probe)
	if h == nil {
		return false
	}
	if t.deadlock(o.key.owner, h.key.owner) {
		return true
	}
	t.waiting[o.key.owner] = h.key.owner
	return false
}

// overlaps reports whether any of own intersects the range of fl.
func overlaps(own []lockRange, fl *unix.Flock_t) bool {
	end := rangeEnd(fl.Start, fl.Len)
	for _, r := range own {
		if r.start < end && fl.Start < r.end {
			return true
		}
	}
	return false
}

// waitProbe waits until the lock spec (lockWaiter) could be taken on f's file, without
// keeping it: the caller then takes it where it belongs. The wait runs in a process of its
// own (this program again, see lockWaiter) on a descriptor of its own, so that a wait given
// up (the request was interrupted: EINTR) ends at once with a SIGKILL, and nothing of it
// stays once the reply is sent. A wait on a
// thread of the server could not be ended that way (the kernel restarts it after any
// signal the Go runtime handles), and a job that retries a timed-out wait would pile up
// blocked threads. It reports done with the errno when the wait failed or was interrupted.
func waitProbe(ctx context.Context, f *file, spec string) (done bool, errno syscall.Errno) {
	fd, err := reopen(f)
	if err != nil {
		return true, errnoOf(err)
	}
	probe := os.NewFile(uintptr(fd), "lock probe")
	r, w, err := os.Pipe()
	if err != nil {
		_ = probe.Close()
		return true, errnoOf(err)
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"iotap-lock-wait"},
		Env:         []string{lockWaitEnv + "=" + spec, "GOMAXPROCS=1"},
		ExtraFiles:  []*os.File{probe, w},
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	}
	err = cmd.Start()
	_ = probe.Close()
	_ = w.Close()
	if err != nil {
		_ = r.Close()
		return true, errnoOf(err)
	}
	res := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		_ = r.Close()
		res <- string(b)
	}()
	select {
	case m := <-res:
		_ = cmd.Wait()
		n, err := strconv.Atoi(m)
		switch {
		case err != nil: // the waiter died without an answer
			return true, syscall.ENOLCK
		case n != 0:
			return true, syscall.Errno(n)
		}
		return false, 0 // free: the caller takes it
	case <-ctx.Done():
		// Answer only once the waiter is gone: woken by a release before the SIGKILL
		// takes effect, it may hold the lock until it has exited.
		_ = cmd.Process.Kill()
		<-res
		_ = cmd.Wait()
		return true, syscall.EINTR
	}
}

// lockWaitEnv holds, in the environment of a process started by waitProbe, the lock it
// waits for: "posix TYPE START LEN" (an OFD lock) or "flock OP".
const lockWaitEnv = "IOTAP_FUSEFS_LOCK_WAIT"

// A program that imports this package is also the lock waiter of waitProbe: started with
// lockWaitEnv set, it runs lockWaiter instead of its main function.
func init() {
	if spec, ok := os.LookupEnv(lockWaitEnv); ok {
		os.Exit(lockWaiter(spec))
	}
}

// lockWaiter waits until descriptor 3 gets the lock spec, then writes "0" (or the errno of
// the failed wait) to descriptor 4 and exits, which gives the lock up.
func lockWaiter(spec string) int {
	var err error = syscall.EINVAL
	f := strings.Fields(spec)
	switch {
	case len(f) == 4 && f[0] == "posix":
		typ, e1 := strconv.ParseInt(f[1], 10, 16)
		start, e2 := strconv.ParseInt(f[2], 10, 64)
		n, e3 := strconv.ParseInt(f[3], 10, 64)
		if e1 == nil && e2 == nil && e3 == nil {
			err = fcntlWait(3, unix.Flock_t{Type: int16(typ), Start: start, Len: n})
		}
	case len(f) == 2 && f[0] == "flock":
		op, e1 := strconv.Atoi(f[1])
		if e1 == nil {
			for err = unix.Flock(3, op); err == unix.EINTR; err = unix.Flock(3, op) {
			}
		}
	}
	msg := "0"
	if err != nil {
		msg = strconv.Itoa(int(errnoOf(err)))
	}
	if _, err := unix.Write(4, []byte(msg)); err != nil {
		return 1
	}
	return 0
}

// waitOwner is F_OFD_SETLKW on the owner's own descriptor (o.waiters counts it). A wait
// whose request was interrupted is undone when it is granted: the owner's locks in the
// range go back to what they were (before), unless they were all released meanwhile.
func (t *lockTable) waitOwner(ctx context.Context, o *lockOwner, fl unix.Flock_t, gen uint64, before []lockRange) (done bool, errno syscall.Errno) {
	res := make(chan error, 1)
	go func() { res <- fcntlWait(o.fd, fl) }()
	select {
	case err := <-res:
		t.mu.Lock()
		defer t.mu.Unlock()
		o.waiters--
		if o.closed {
			return false, 0 // released while waiting: the lock went with the descriptor
		}
		return true, errnoOf(err)
	case <-ctx.Done():
		go func() {
			err := <-res
			t.mu.Lock()
			defer t.mu.Unlock()
			o.waiters--
			if err != nil || o.closed {
				return
			}
			un := fl
			un.Type = unix.F_UNLCK
			_ = unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_SETLK, &un)
			if o.gen != gen {
				return
			}
			start, end := fl.Start, rangeEnd(fl.Start, fl.Len)
			for _, r := range before {
				s, e := max(r.start, start), min(r.end, end)
				if s >= e {
					continue
				}
				back := unix.Flock_t{Type: r.typ, Start: s}
				if e != math.MaxInt64 {
					back.Len = e - s
				}
				_ = unix.FcntlFlock(uintptr(o.fd), unix.F_OFD_SETLK, &back)
			}
		}()
		return true, syscall.EINTR
	}
}

// fcntlWait is F_OFD_SETLKW (a signal to the server that interrupts it is restarted).
func fcntlWait(fd int, fl unix.Flock_t) error {
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLKW, &fl)
		if err != unix.EINTR {
			return err
		}
	}
}

// releaseLocked releases all of an owner's locks on a file (closing its descriptor) and
// forgets the owner. A wait in progress on the descriptor keeps the open file until it
// ends; a lock it gets then goes with it.
func (t *lockTable) releaseLocked(key lockKey, o *lockOwner) {
	if o.closed {
		return
	}
	o.gen++
	o.closed = true
	if t.owners[key] == o {
		delete(t.owners, key)
		t.n.Add(-1)
	}
	_ = unix.Close(o.fd)
}

// releaseFile releases the locks of owners whose first request came through f, which the
// kernel releases (the last close of an open file: the end of its OFD locks). A process's
// POSIX locks were released at its FLUSH before.
func (t *lockTable) releaseFile(f *file) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, o := range t.owners {
		if o.f == f {
			t.releaseLocked(k, o)
		}
	}
	delete(t.flockers, f)
	t.releasedLocked()
}

// deadlock reports whether owner would wait in a cycle by waiting for holder: holder waits,
// through a chain of owners, for owner (the kernel follows at most 10 links).
func (t *lockTable) deadlock(owner, holder uint64) bool {
	for range 10 {
		if holder == owner {
			return true
		}
		next, ok := t.waiting[holder]
		if !ok {
			return false
		}
		holder = next
	}
	return false
}

// holder returns the owner (other than self) of this mount whose descriptor holds the lock
// fl on inode ino, as F_OFD_GETLK reported it, or nil.
func (t *lockTable) holder(ino uint64, self *lockOwner, fl *unix.Flock_t) *lockOwner {
	end := rangeEnd(fl.Start, fl.Len)
	for k, o := range t.owners {
		if k.ino != ino || o == self {
			continue
		}
		for _, r := range ownLocks(o.fd) {
			if r.typ == fl.Type && r.start == fl.Start && r.end == end {
				return o
			}
		}
	}
	return nil
}

// lockRange is an OFD lock of one descriptor: [start, end), end math.MaxInt64 meaning to
// the end of the file.
type lockRange struct {
	typ        int16
	start, end int64
}

// rangeEnd is the exclusive end of a lock of n bytes from start (0: to the end).
func rangeEnd(start, n int64) int64 {
	if n == 0 {
		return math.MaxInt64
	}
	return start + n
}

// ownLocks returns the OFD locks of descriptor fd (the "lock:" lines of its fdinfo).
func ownLocks(fd int) []lockRange {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return nil
	}
	var rs []lockRange
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("lock:"))
		if !ok {
			continue
		}
		// "1: OFDLCK ADVISORY WRITE -1 fe:00:1234 10 14" (last byte inclusive, or EOF)
		f := bytes.Fields(rest)
		if len(f) < 8 || string(f[1]) != "OFDLCK" {
			continue
		}
		r := lockRange{typ: unix.F_RDLCK, end: math.MaxInt64}
		if string(f[3]) == "WRITE" {
			r.typ = unix.F_WRLCK
		}
		var err1, err2 error
		r.start, err1 = strconv.ParseInt(string(f[6]), 10, 64)
		if string(f[7]) != "EOF" {
			r.end, err2 = strconv.ParseInt(string(f[7]), 10, 64)
			r.end++
		}
		if err1 == nil && err2 == nil {
			rs = append(rs, r)
		}
	}
	return rs
}

// reopen opens the backing file of f again, for an owner's locks: read-write when the
// server may, else with f's access mode.
func reopen(f *file) (int, error) {
	p := "/proc/self/fd/" + strconv.Itoa(f.fd)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		fd, err = unix.Open(p, int(f.flags&unix.O_ACCMODE)|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	}
	return fd, err
}

// flock is flock(2) on the handle's descriptor. A blocking request that must wait does so
// in a process of its own (waitProbe), and takes the lock on the handle's descriptor when
// it is free. (A conversion drops the old lock before it waits, natively too.)
func (f *file) flock(ctx context.Context, lk *fuse.FileLock, block bool) syscall.Errno {
	var op int
	switch lk.Typ {
	case unix.F_RDLCK:
		op = unix.LOCK_SH
	case unix.F_WRLCK:
		op = unix.LOCK_EX
	case unix.F_UNLCK:
		op = unix.LOCK_UN
	default:
		return syscall.EINVAL
	}
	for {
		err := unix.Flock(f.fd, op|unix.LOCK_NB)
		if err == unix.EWOULDBLOCK && !block {
			t := f.locks
			t.mu.Lock()
			if until := t.pendingReleaseLocked(f.ino, f); until != 0 {
				t.awaitRelease(until)
				err = unix.Flock(f.fd, op|unix.LOCK_NB)
			}
			t.mu.Unlock()
		}
		if err != unix.EWOULDBLOCK || !block || op == unix.LOCK_UN {
			f.flockDone(op, err)
			return errnoOf(err)
		}
		done, errno := waitProbe(ctx, f, "flock "+strconv.Itoa(op))
		if done {
			return errno
		}
	}
}

// flockDone notes whether f holds a flock(2) lock after a request op that returned err (a
// conversion that fails has dropped the old lock).
func (f *file) flockDone(op int, err error) {
	if f.locks == nil {
		return
	}
	holds := err == nil && op != unix.LOCK_UN
	if f.flocked.Load() == holds {
		return
	}
	t := f.locks
	t.mu.Lock()
	defer t.mu.Unlock()
	f.flocked.Store(holds)
	if holds {
		t.flockers[f] = struct{}{}
		return
	}
	delete(t.flockers, f)
	t.releasedLocked()
}

// posixFlush releases an owner's POSIX locks on a file when the kernel flushes one of its
// descriptors (close(2)): FLUSH carries the owner. It goes through the bridge as an unlock
// of the whole file by that owner, which reaches the handle's Setlk (libfuse does the same).
// Without locks in the mount a FLUSH costs one atomic load more.
type posixFlush struct {
	fuse.RawFileSystem
	locks *lockTable
}

func (p posixFlush) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if p.locks.active() {
		un := fuse.LkIn{InHeader: in.InHeader, Fh: in.Fh, Owner: in.LockOwner,
			Lk: fuse.FileLock{Start: 0, End: 1<<63 - 1, Typ: unix.F_UNLCK}}
		p.SetLk(cancel, &un)
	}
	return p.RawFileSystem.Flush(cancel, in)
}
