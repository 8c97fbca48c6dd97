package fusectl_test

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusectl"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
)

// fusectlMounts returns where this process sees fusectl mounted.
func fusectlMounts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if pre, post, ok := strings.Cut(l, " - "); ok && strings.HasPrefix(post, "fusectl ") {
			out = append(out, strings.Fields(pre)[4])
		}
	}
	return out
}

// TestWaitingFresh, on a machine where fusectl is not mounted: the "waiting" file of a
// real mount opens, counts a request the layer holds (a blocked flock(2) through the mount)
// and reads 0 once it is answered, says when the connection has ended, and nothing is left
// mounted.
func TestWaitingFresh(t *testing.T) {
	if !testenv.InFreshMounts(t) {
		return
	}
	testenv.Programs(t, testenv.FUSE, "flock")
	if m := fusectlMounts(t); len(m) > 0 {
		t.Fatalf("fusectl is mounted at %v in the fresh namespace", m)
	}
	c := fusetest.Mount(t, nil, fusefs.Options{})
	w, err := fusectl.OpenWaiting(c.Server.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if m := fusectlMounts(t); len(m) > 0 {
		t.Errorf("fusectl left mounted at %v", m)
	}
	if n, err := w.Read(); n != 0 || err != nil {
		t.Errorf("waiting on an idle mount = %d, %v; want 0", n, err)
	}
	// One process holds a lock on f through the mount; another waits for it there: its
	// SETLKW request stays in flight until the first lets go.
	f := filepath.Join(c.Mnt, "f")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("flock", "-x", f, "-c", "echo locked; read x")
	in, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close(); _ = holder.Wait() }()
	if l, err := bufio.NewReader(out).ReadString('\n'); l != "locked\n" {
		t.Fatalf("flock holder: %q, %v", l, err)
	}
	waiter := exec.Command("flock", "-x", f, "true")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, w, 1)
	_ = in.Close()
	if err := waiter.Wait(); err != nil {
		t.Errorf("the waiting flock: %v", err)
	}
	_ = holder.Wait()
	waitFor(t, w, 0)

	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Read(); !errors.Is(err, fusectl.ErrGone) {
		t.Errorf("waiting after unmount: %v, want ErrGone", err)
	}
	if m := fusectlMounts(t); len(m) > 0 {
		t.Errorf("fusectl left mounted at %v", m)
	}
}

// waitFor waits until the connection has want requests in flight: the count moves when
// the processes above reach the kernel, which tells nobody.
func waitFor(t *testing.T, w *fusectl.Waiting, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := w.Read()
		if err != nil {
			t.Fatal(err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting = %d after 10 s, want %d", n, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAbortFresh: Open finds the abort file with fusectl unmounted, writing it ends the
// connection (the mount answers ENOTCONN), and nothing is left mounted.
func TestAbortFresh(t *testing.T) {
	if !testenv.InFreshMounts(t) {
		return
	}
	c := fusetest.Mount(t, nil, fusefs.Options{})
	f, err := fusectl.Open(c.Server.Conn(), "abort", os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("1"); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := os.Stat(filepath.Join(c.Mnt, "x")); !errors.Is(err, unix.ENOTCONN) {
		t.Errorf("stat on the aborted mount: %v, want ENOTCONN", err)
	}
	if m := fusectlMounts(t); len(m) > 0 {
		t.Errorf("fusectl left mounted at %v", m)
	}
}

// TestOpenMounted: with fusectl mounted (here, privately in this test's fresh namespace, at
// a directory of its own), Open uses that mount.
func TestOpenMounted(t *testing.T) {
	if !testenv.InFreshMounts(t) {
		return
	}
	dir := t.TempDir()
	if err := unix.Mount("fusectl", dir, "fusectl", 0, ""); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }()
	c := fusetest.Mount(t, nil, fusefs.Options{})
	if _, err := os.Stat(filepath.Join(dir, "1048576000")); err == nil {
		t.Fatal("a connection that cannot exist is listed")
	}
	w, err := fusectl.OpenWaiting(c.Server.Conn())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	if n, err := w.Read(); n != 0 || err != nil {
		t.Errorf("waiting = %d, %v", n, err)
	}
	if _, err := fusectl.Open(1<<30, "waiting", os.O_RDONLY); !errors.Is(err, fusectl.ErrUnavailable) {
		t.Errorf("Open of a connection that does not exist: %v, want ErrUnavailable", err)
	}
	if m := fusectlMounts(t); len(m) != 1 || m[0] != dir {
		t.Errorf("fusectl mounted at %v, want only %s", m, dir)
	}
}
