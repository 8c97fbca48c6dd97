package replay

import (
	"context"
	"math"
	"sync"
	"syscall"
	"time"
)

// s3LockTable keeps byte-range locks of an S3 backend's open files the way the kernel keeps
// them for a FUSE mount whose daemon has no lock handler (Mountpoint, s3fs): locally,
// conflicting between open files, and issuing no request.
type s3LockTable struct {
	mu    sync.Mutex // guards locks
	locks map[string][]s3HeldLock
}

type s3HeldLock struct {
	owner      *s3File
	write      bool
	start, end int64 // [start, end)
}

func s3LockRange(start, length int64) (int64, int64) {
	if length <= 0 {
		return start, math.MaxInt64
	}
	return start, start + length
}

// conflict reports whether another owner holds a lock on name that conflicts with
// (write, [start, end)); l.mu held.
func (l *s3LockTable) conflict(name string, owner *s3File, write bool, start, end int64) bool {
	for _, h := range l.locks[name] {
		if h.owner != owner && h.start < end && start < h.end && (write || h.write) {
			return true
		}
	}
	return false
}

// release drops owner's locks on [start, end) of name, splitting ranges; l.mu held.
func (l *s3LockTable) release(name string, owner *s3File, start, end int64) {
	var out []s3HeldLock
	for _, h := range l.locks[name] {
		if h.owner != owner || h.end <= start || end <= h.start {
			out = append(out, h)
			continue
		}
		if h.start < start {
			out = append(out, s3HeldLock{owner: owner, write: h.write, start: h.start, end: start})
		}
		if end < h.end {
			out = append(out, s3HeldLock{owner: owner, write: h.write, start: end, end: h.end})
		}
	}
	if len(out) == 0 {
		delete(l.locks, name)
	} else {
		l.locks[name] = out
	}
}

func (l *s3LockTable) lock(ctx context.Context, f *s3File, cmd LockCmd, typ int16, start, length int64) error {
	s, e := s3LockRange(start, length)
	write := typ == syscall.F_WRLCK
	for {
		l.mu.Lock()
		if l.locks == nil {
			l.locks = map[string][]s3HeldLock{}
		}
		switch {
		case cmd == LockGet:
			l.mu.Unlock()
			return nil
		case typ == syscall.F_UNLCK:
			l.release(f.name, f, s, e)
			l.mu.Unlock()
			return nil
		case !l.conflict(f.name, f, write, s, e):
			l.release(f.name, f, s, e)
			l.locks[f.name] = append(l.locks[f.name], s3HeldLock{owner: f, write: write, start: s, end: e})
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		if cmd != LockWait {
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
func (l *s3LockTable) dropAll(f *s3File) {
	l.mu.Lock()
	if l.locks != nil {
		l.release(f.name, f, 0, math.MaxInt64)
	}
	l.mu.Unlock()
}
