package loopback

import (
	"testing"
	"time"
)

// TestReleasingWait: an unlink waits for the closes of its inode in progress, and for no
// other inode's.
func TestReleasingWait(t *testing.T) {
	var r releasing
	r.wait(1) // nothing in progress: returns at once
	r.begin(1, false)
	r.begin(1, false)
	r.begin(2, false)
	waited := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		r.wait(1)
		waited <- time.Since(start)
	}()
	r.wait(3) // another inode: returns at once
	r.end(2)
	r.end(1)
	select {
	case d := <-waited:
		t.Fatalf("wait returned after %v with one close of the inode still in progress", d)
	case <-time.After(50 * time.Millisecond):
	}
	r.end(1)
	select {
	case <-waited:
	case <-time.After(releaseWaitMax / 2):
		t.Fatal("wait did not return when the inode's last close ended")
	}
	if len(r.busy) != 0 {
		t.Errorf("%d inodes left busy", len(r.busy))
	}
}

// TestReleasingFlushed: after a handle's FLUSH, an unlink or rename of its inode waits for
// the RELEASE that follows (and for the close it starts), or flushWaitMax when none comes
// (the application holds another descriptor).
func TestReleasingFlushed(t *testing.T) {
	var r releasing
	r.flush(1, true)
	r.flush(1, false) // the same handle flushed again: counted once
	waited := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		r.wait(1)
		waited <- time.Since(start)
	}()
	time.Sleep(5 * time.Millisecond)
	r.begin(1, true) // the RELEASE: its close starts
	select {
	case d := <-waited:
		t.Fatalf("wait returned after %v with the close in progress", d)
	case <-time.After(flushWaitMax + 20*time.Millisecond):
	}
	r.end(1)
	select {
	case <-waited:
	case <-time.After(releaseWaitMax / 2):
		t.Fatal("wait did not return when the close ended")
	}
	if len(r.busy) != 0 {
		t.Errorf("%d inodes left busy", len(r.busy))
	}
	// A handle flushed whose RELEASE does not come: the wait ends after flushWaitMax.
	r.flush(2, true)
	t0 := time.Now()
	r.wait(2)
	if d := time.Since(t0); d < flushWaitMax || d > releaseWaitMax/2 {
		t.Errorf("wait on a flushed handle without a release took %v, want about %v", d, flushWaitMax)
	}
}
