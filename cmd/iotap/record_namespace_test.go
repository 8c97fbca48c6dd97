package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
)

// TestRecordNamespaceFollowsHostUnmounts: the job's mount namespace receives the host's
// mount events (slave propagation), so an unmount on the host (umount -l of a disk) takes
// the mount out of the job's namespace too instead of pinning it until the job ends, while
// mounts made in the job's namespace, the layer's over the target first, stay there.
func TestRecordNamespaceFollowsHostUnmounts(t *testing.T) {
	requireRecord(t)
	// A tree of mounts that propagate their events, as systemd makes every mount shared:
	// the test's directory bound on itself and made shared, with two tmpfs mounts in it.
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s shared: %v", dir, err)
	}
	target, a, b := filepath.Join(dir, "data"), filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{target, a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{a, b} {
		if err := unix.Mount("iotap-test", d, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatalf("mount tmpfs: %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
	}
	inner := filepath.Join(b, "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startIotap(t, target, "record", "-o", filepath.Join(dir, "t.iotap"), "--",
		"sh", "-c", "mount -t tmpfs -o size=1m iotap-inner "+inner+" && echo $$; read x; exit 0")
	pid := p.readLine(t)
	if pid == "" {
		t.Fatalf("the job did not start; stderr: %s", p.stderr)
	}
	mounted := func(pid, mnt string) bool {
		t.Helper()
		ms, err := sysinfo.MountsOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.MountPoint == mnt {
				return true
			}
		}
		return false
	}
	if !mounted(pid, a) || !mounted(pid, inner) {
		t.Fatalf("the job's namespace lacks %s or %s", a, inner)
	}
	for _, m := range []string{target, inner} {
		if mounted("self", m) {
			t.Errorf("the job's namespace's mount on %s leaked out of it", m)
		}
	}
	if err := unix.Unmount(a, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if mounted(pid, a) {
		t.Errorf("%s, unmounted on the host, is still mounted in the job's namespace", a)
	}
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, strings.TrimSpace(p.stderr.String()))
	}
}
