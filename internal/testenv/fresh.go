package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// freshEnv marks the child InFreshMounts starts: its value is the test's name and the mount
// namespace the child must not be in (the parent's), "Name ns".
const freshEnv = "IOTAP_TEST_FRESH_MOUNTS"

// InFreshMounts runs the calling test again in a child process, in a mount namespace of its
// own (unshare -m, private) in which fusectl (/sys/fs/fuse/connections) is not mounted: the
// state of a fresh machine, whatever earlier runs left mounted here. It reports whether
// this is that child. The parent returns false once the child has run (its failure is the
// parent's); the child gets true and goes on with the test. Only top-level tests can use it
// (the child runs -test.run ^Name$). It needs root (FUSE's requirement) and unshare(1).
func InFreshMounts(t *testing.T) bool {
	t.Helper()
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		Skip(t, FUSE, "no mount namespace to read: %v", err)
	}
	if v := os.Getenv(freshEnv); v != "" {
		name, parentNS, _ := strings.Cut(v, " ")
		if name != t.Name() {
			t.Fatalf("%s=%q in test %s", freshEnv, v, t.Name())
		}
		if parentNS == self {
			t.Fatalf("the child of InFreshMounts is in its parent's mount namespace %s: it must not unmount anything there", self)
		}
		unmountFusectl(t)
		return true
	}
	Root(t, FUSE, "runs the test in a private mount namespace without fusectl")
	Programs(t, FUSE, "unshare")
	args := []string{"-m", "--propagation", "private", os.Args[0], "-test.run", "^" + t.Name() + "$", "-test.count", "1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), freshEnv+"="+t.Name()+" "+self)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test in a fresh mount namespace: %v\n%s", err, out)
	}
	if testing.Verbose() || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Logf("the test in a fresh mount namespace:\n%s", out)
	}
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skipf("skipped in the fresh mount namespace (see its output)")
	}
	return false
}

// unmountFusectl takes every fusectl mount away in this (private) mount namespace.
func unmountFusectl(t *testing.T) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if fs := strings.Fields(pre); ok && len(fs) >= 5 && strings.HasPrefix(post, "fusectl ") {
			points = append(points, fs[4])
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil {
			t.Fatalf("unmount fusectl at %s in the fresh mount namespace: %v", points[i], err)
		}
	}
}
