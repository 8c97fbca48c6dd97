package trace

import (
	"fmt"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestErrnoNames checks the table against the host's names (on Linux they are the same
// numbers).
func TestErrnoNames(t *testing.T) {
	for e := 1; e < 1<<12; e++ {
		want := unix.ErrnoName(syscall.Errno(e))
		if want == "" {
			want = fmt.Sprintf("errno %d", e)
		}
		if got := ErrnoName(uint16(e)); got != want {
			t.Errorf("ErrnoName(%d) = %q, want %q", e, got, want)
		}
	}
	if got := ErrnoName(0); got != "" {
		t.Errorf("ErrnoName(0) = %q, want \"\"", got)
	}
}
