package recorder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/testenv"
)

// TestLegsKernelRefused: with --legs kernel on a kernel that cannot measure the legs (here
// its BTF hidden, in a mount namespace of the test's own), the recording fails saying why,
// before the job runs, and leaves no trace file behind.
func TestLegsKernelRefused(t *testing.T) {
	requireRecord(t)
	if !testenv.InFreshMounts(t) {
		return
	}
	if err := unix.Mount("none", "/sys/kernel/btf", "tmpfs", 0, ""); err != nil {
		t.Fatalf("hide the kernel's BTF: %v", err)
	}
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "t.iotap")
	var stderr syncBuffer
	err := Record(context.Background(), Spec{Target: dir, Output: out, Legs: "kernel", Argv: []string{"sh", "-c", "echo ran > ran"}},
		Env{Stderr: &stderr})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != exitError || !strings.Contains(stderr.String(), "iotap record: --legs kernel: ") {
		t.Errorf("Record: %v; want exit %d naming --legs kernel; stderr:\n%s", err, exitError, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the job ran")
	}
	t.Logf("stderr:\n%s", stderr.String())
	if st, err := os.Stat(out); err == nil {
		t.Errorf("the failed recording left %s behind (%d bytes)", out, st.Size())
	}
}
