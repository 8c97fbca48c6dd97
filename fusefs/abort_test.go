package fusefs_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
)

// TestUnmountAbortLeavesNoMount: when a copy of the mount lives on in another mount
// namespace, Unmount aborts the connection through fusectl; on a machine where fusectl is
// not mounted, it is reached without leaving a fusectl mount behind.
func TestUnmountAbortLeavesNoMount(t *testing.T) {
	if !testenv.InFreshMounts(t) {
		return
	}
	c := fusetest.Mount(t, nil, fusefs.Options{})
	// A process that unshared its mount namespace while the layer was mounted holds a copy.
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", "echo ready; exec sleep 1000")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "ready\n" {
		t.Fatalf("unshare: %q, %v", l, err)
	}
	if err := c.Server.Unmount(); err != nil {
		t.Fatalf("unmount with a copy of the mount alive: %v", err)
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, " - fusectl ") {
			t.Errorf("fusectl left mounted: %s", l)
		}
	}
}
