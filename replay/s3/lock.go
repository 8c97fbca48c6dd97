package s3

import (
	"context"
	"math"
	"sync"
	"syscall"
	"time"

	"github.com/iotap/iotap/replay"
)

// lockTable keeps byte-range locks of the backend's open files the way the kernel keeps
// them for a FUSE mount whose daemon has no lock handler (Mountpoint, s3fs): locally,
// conflicting between open files, and issuing no request.
type lockTable struct {
	mu    sync.Mutex // guards locks
	locks map[string][]heldLock
}

type heldLock struct {
	owner      *file
	write      bool
	start, end int64 // [start, end)
}

func lockRange(start, length int64) (int64, int64) {
	if length <= 0 {
		return start, math.MaxInt64
	}
	return start, start + length
}

// conflict reports whether another owner holds a lock on name that conflicts with
// (write, [start, end)); l.mu held.
func (l *lockTable) conflict(name string, owner *file, write bool, start, end int64) bool {
	for _, h := range l.locks[name] {
		if h.owner != owner && h.start < end && start < h.end && (write || h.write) {
			return true
		}
	}
	return false
}

// release drops owner's locks on [start, end) of name, splitting ranges; l.mu held.
func (l *lockTable) release(name string, owner *file, start, end int64) {
	var out []heldLock
	for _, h := range l.locks[name] {
		if h.owner != owner || h.end <= start || end <= h.start {
			out = append(out, h)
			continue
		}
		if h.start < start {
			out = append(out, heldLock{owner: owner, write: h.write, start: h.start, end: start})
		}
		if end < h.end {
			out = append(out, heldLock{owner: owner, write: h.write, start: end, end: h.end})
		}
	}
	if len(out) == 0 {
		delete(l.locks, name)
	} else {
		l.locks[name] = out
	}
}

func (l *lockTable) lock(ctx context.Context, f *file, cmd replay.LockCmd, typ int16, start, length int64) error {
	s, e := lockRange(start, length)
	write := typ == syscall.F_WRLCK
	for {
		l.mu.Lock()
		if l.locks == nil {
			l.locks = map[string][]heldLock{}
		}
		switch {
		case cmd == replay.LockGet:
			l.mu.Unlock()
			return nil
		case typ == syscall.F_UNLCK:
			l.release(f.name, f, s, e)
			l.mu.Unlock()
			return nil
		case !l.conflict(f.name, f, write, s, e):
			l.release(f.name, f, s, e)
			l.locks[f.name] = append(l.locks[f.name], heldLock{owner: f, write: write, start: s, end: e})
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		if cmd != replay.LockWait {
			return syscall.EAGAIN
		}
		select {
		case <-ctx.Done():
			return syscall.EINTR
		case <-time.After(time.Millisecond):
		}
	}
}

// dropAll releases every lock of f (at close).
func (l *lockTable) dropAll(f *file) {
	l.mu.Lock()
	if l.locks != nil {
		l.release(f.name, f, 0, math.MaxInt64)
	}
	l.mu.Unlock()
}
