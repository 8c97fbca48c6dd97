package loopback

import (
	"sync"
	"time"
)

// releasing is the inodes of a mount whose open files the layer is closing in the backend
// now (a RELEASE being served), so that an unlink or a rename over such a file reaches the
// backend after the close, as it would natively.
//
// The kernel answers an application's close(2) before it sends the RELEASE, and the layer
// serves requests concurrently: without this, an application's `cp a b; rm b` could reach
// the backend as unlink(b) while the layer still holds b open. A backend that tells open
// files apart then does what it does to a file unlinked while open (s3fs, like every
// high-level libfuse file system, renames it to a hidden name and uploads it again under
// that name), which the application never asked for and may see fail.
type releasing struct {
	mu   sync.Mutex
	busy map[uint64]*releaseWait // GUARDED_BY(mu)
}

// releaseWait is the closes of one inode in progress; done is closed when the last ends.
type releaseWait struct {
	n    int
	done chan struct{}
}

// releaseWaitMax bounds how long an unlink waits for a close: a backend whose close hangs
// must not hang the unlinks of other names.
const releaseWaitMax = 2 * time.Second

func (r *releasing) begin(ino uint64) {
	r.mu.Lock()
	if r.busy == nil {
		r.busy = map[uint64]*releaseWait{}
	}
	w := r.busy[ino]
	if w == nil {
		w = &releaseWait{done: make(chan struct{})}
		r.busy[ino] = w
	}
	w.n++
	r.mu.Unlock()
}

func (r *releasing) end(ino uint64) {
	r.mu.Lock()
	if w := r.busy[ino]; w != nil {
		if w.n--; w.n == 0 {
			close(w.done)
			delete(r.busy, ino)
		}
	}
	r.mu.Unlock()
}

// wait returns once no close of inode ino is in progress, or after releaseWaitMax.
func (r *releasing) wait(ino uint64) {
	r.mu.Lock()
	w := r.busy[ino]
	r.mu.Unlock()
	if w == nil {
		return
	}
	t := time.NewTimer(releaseWaitMax)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
	}
}
