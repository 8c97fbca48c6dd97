package fusefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
)

// pathCallsWorkload makes, on dir/a.txt, the calls that name a file by path and reach the
// layer without a file handle: truncate(2), setxattr, getxattr, listxattr, removexattr and
// statfs, then an O_TRUNC open and a write. It prints the statfs block count and the file's
// content as read back through dir.
func pathCallsWorkload(dir string) error {
	p := filepath.Join(dir, "a.txt")
	if err := unix.Truncate(p, 2); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	for _, a := range []string{"user.iotap", "user.gone"} {
		if err := unix.Setxattr(p, a, []byte("view"), 0); err != nil {
			return fmt.Errorf("setxattr %s: %w", a, err)
		}
	}
	if err := unix.Removexattr(p, "user.gone"); err != nil {
		return fmt.Errorf("removexattr: %w", err)
	}
	buf := make([]byte, 256)
	n, err := unix.Getxattr(p, "user.iotap", buf)
	if err != nil || string(buf[:n]) != "view" {
		return fmt.Errorf("getxattr: %q %v", buf[:max(n, 0)], err)
	}
	if n, err = unix.Listxattr(p, buf); err != nil || !bytes.Contains(buf[:n], []byte("user.iotap\x00")) || bytes.Contains(buf[:n], []byte("user.gone")) {
		return fmt.Errorf("listxattr: %q %v", buf[:max(n, 0)], err)
	}
	var s unix.Statfs_t
	if err := unix.Statfs(p, &s); err != nil {
		return fmt.Errorf("statfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("new"), 0o644); err != nil { // O_TRUNC of an existing file
		return fmt.Errorf("open O_TRUNC: %w", err)
	}
	a, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "b.txt"))
	if err != nil {
		return err
	}
	fmt.Printf("blocks %d\na.txt %s\nb.txt %s\n", s.Blocks, a, b)
	return nil
}

func init() { workloads["pathcalls"] = pathCallsWorkload }

// TestMountAtTargetMoved serves a target at another directory (iotap's --mount-at) and
// then moves the target away: renamed with a decoy made in its place, covered by another
// mount, or lazily unmounted with the file system it is on. Every call through the view
// must still reach the objects the view shows, including those the kernel sends without a
// file handle (truncate by path and the truncation of an O_TRUNC open, the xattr calls,
// statfs), and none may touch the decoy.
func TestMountAtTargetMoved(t *testing.T) {
	fusetest.Require(t)
	testenv.Root(t, testenv.FUSE, "covers the target with a tmpfs mount")
	for _, cache := range []fusefs.CacheMode{fusefs.CacheNone, fusefs.CacheKernel} {
		for _, how := range []string{"renamed", "mounted over", "unmounted"} {
			t.Run(string(cache)+"/"+how, func(t *testing.T) {
				testTargetMoved(t, cache, how)
			})
		}
	}
}

func testTargetMoved(t *testing.T, cache fusefs.CacheMode, how string) {
	base := t.TempDir()
	c := &fusetest.Case{Orig: filepath.Join(base, "data"), Mnt: filepath.Join(base, "view")}
	if how == "unmounted" {
		// The target is the root of a file system of its own, unmounted below the view.
		c.Orig = filepath.Join(base, "disk")
		if err := os.Mkdir(c.Orig, 0o755); err != nil {
			t.Fatal(err)
		}
		mountTmpfs(t, c.Orig, "size=4m")
	} else if err := os.Mkdir(c.Orig, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(c.Mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(c.Orig, f), []byte("original\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want unix.Statfs_t // of the target's file system
	if err := unix.Statfs(c.Orig, &want); err != nil {
		t.Fatal(err)
	}
	// The target as the view reaches it, whatever happens to its path.
	held, err := unix.Open(c.Orig, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(held) })
	fusetest.MountCase(t, c, nil, fusefs.Options{Cache: cache})

	switch how {
	case "renamed":
		if err := os.Rename(c.Orig, c.Orig+"2"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(c.Orig, 0o755); err != nil {
			t.Fatal(err)
		}
	case "mounted over":
		mountTmpfs(t, c.Orig, "size=1m")
	case "unmounted":
		if err := unix.Unmount(c.Orig, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
	}
	decoy := []byte("DECOY\n")
	if how != "unmounted" {
		for _, f := range []string{"a.txt", "b.txt"} {
			if err := os.WriteFile(filepath.Join(c.Orig, f), decoy, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	cmd := workloadCmd("pathcalls", c.Mnt)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("calls through the view: %v", err)
	}
	if w := fmt.Sprintf("blocks %d\na.txt or\nb.txt new\n", want.Blocks); out.String() != w {
		t.Errorf("through the view:\n%s\nwant (statfs of the target's file system, the truncated and rewritten files):\n%s", out.String(), w)
	}
	// The objects behind the view changed, the decoys did not.
	for f, w := range map[string]string{"a.txt": "or", "b.txt": "new"} {
		fd, err := unix.Openat(held, f, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 64)
		n, _ := unix.Read(fd, got)
		x := make([]byte, 64)
		xn, xerr := unix.Fgetxattr(fd, "user.iotap", x)
		_ = unix.Close(fd)
		if string(got[:max(n, 0)]) != w {
			t.Errorf("target's %s: %q, want %q", f, got[:max(n, 0)], w)
		}
		if f == "a.txt" && (xerr != nil || string(x[:max(xn, 0)]) != "view") {
			t.Errorf("target's a.txt: user.iotap %q %v, want \"view\"", x[:max(xn, 0)], xerr)
		}
	}
	if how == "unmounted" {
		return
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		p := filepath.Join(c.Orig, f)
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, decoy) {
			t.Errorf("decoy %s: %q %v: a call through the view reached it", f, got, err)
		}
		if n, err := unix.Getxattr(p, "user.iotap", make([]byte, 64)); err == nil || n > 0 {
			t.Errorf("decoy %s got the view's xattr", f)
		}
	}
}

// mountTmpfs mounts a tmpfs on dir until the test ends.
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	if err := unix.Mount("iotap-test", dir, "tmpfs", 0, opts); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: the test unmounted it
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}
