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
	r.begin(1)
	r.begin(1)
	r.begin(2)
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
