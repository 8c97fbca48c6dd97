package loopback

import (
	"sync"
	"time"
)

// releasing is the inodes of a mount whose open files the layer is closing in the backend
// now (a RELEASE being served), or will close soon (a FLUSH served, its RELEASE not yet),
// so that an unlink or a rename of such a file, or over it, reaches the backend after the
// close, as it would natively.
//
// The kernel answers an application's close(2) after the FLUSH but before it sends the
// RELEASE, and the layer serves requests concurrently: without this, an application's
// `cp a b; rm b` could reach the backend as unlink(b) while the layer still holds b open,
// and git's `close(config.lock); rename(config.lock, config)` as a rename of a file the
// layer holds open. A backend that tells open files apart then does what it does to such a
// file, which the application never asked for: s3fs, like every high-level libfuse file
// system, renames a file unlinked while open to a hidden name and uploads it again under
// that name; rclone's VFS writes a file renamed while open back under its old name, where
// git's next lock then finds it (EEXIST).
//
// A FLUSH is sent for every close(2) of a descriptor of the open file, the last one
// included: after it, the RELEASE follows at once unless the application still holds
// another descriptor (dup, fork). So a wait after a FLUSH is bounded by flushWaitMax: a
// file the application still holds costs an unlink or rename of it that much.
type releasing struct {
	mu   sync.Mutex
	busy map[uint64]*releaseWait // GUARDED_BY(mu)
}

// releaseWait is the closes of one inode in progress (n) and its handles flushed and not
// yet released (flushed); done is closed when both are none.
type releaseWait struct {
	n, flushed int
	done       chan struct{}
}

// releaseWaitMax bounds how long an unlink waits for a close in progress: a backend whose
// close hangs must not hang the unlinks of other names. flushWaitMax bounds how long it
// waits for the RELEASE of a handle flushed, which does not come while the application
// holds another descriptor of the file.
const (
	releaseWaitMax = 2 * time.Second
	flushWaitMax   = 50 * time.Millisecond
)

// entryLocked returns ino's entry, made if there is none.
func (r *releasing) entryLocked(ino uint64) *releaseWait {
	if r.busy == nil {
		r.busy = map[uint64]*releaseWait{}
	}
	w := r.busy[ino]
	if w == nil {
		w = &releaseWait{done: make(chan struct{})}
		r.busy[ino] = w
	}
	return w
}

// settleLocked closes w's done and forgets it once nothing is pending.
func (r *releasing) settleLocked(ino uint64, w *releaseWait) {
	if w.n == 0 && w.flushed == 0 {
		close(w.done)
		delete(r.busy, ino)
	}
}

// flush notes that a handle of ino was flushed (first is whether it was not already): its
// RELEASE is likely to follow.
func (r *releasing) flush(ino uint64, first bool) {
	if !first {
		return
	}
	r.mu.Lock()
	r.entryLocked(ino).flushed++
	r.mu.Unlock()
}

// begin notes that a close of ino starts; flushed is whether its handle was flushed (flush).
func (r *releasing) begin(ino uint64, flushed bool) {
	r.mu.Lock()
	w := r.entryLocked(ino)
	w.n++
	if flushed {
		w.flushed--
	}
	r.mu.Unlock()
}

func (r *releasing) end(ino uint64) {
	r.mu.Lock()
	if w := r.busy[ino]; w != nil {
		w.n--
		r.settleLocked(ino, w)
	}
	r.mu.Unlock()
}

// wait returns once no close of inode ino is in progress or due (a handle flushed), or
// releaseWaitMax after it was called while a close is in progress, or flushWaitMax while
// only flushed handles are pending.
func (r *releasing) wait(ino uint64) {
	start := time.Now()
	for {
		r.mu.Lock()
		w := r.busy[ino]
		limit := flushWaitMax
		if w != nil && w.n > 0 {
			limit = releaseWaitMax
		}
		r.mu.Unlock()
		left := limit - time.Since(start)
		if w == nil || left <= 0 {
			return
		}
		t := time.NewTimer(left)
		select {
		case <-w.done:
			t.Stop()
			return
		case <-t.C: // a close may have started meanwhile: look again
		}
	}
}
