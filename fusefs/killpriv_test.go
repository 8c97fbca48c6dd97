package fusefs_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// TestKillPriv: in both cache modes the mount takes over dropping set-user-ID and
// set-group-ID bits (FUSE_HANDLE_KILLPRIV_V2). Real programs, as an unprivileged user and as
// root, write, truncate and O_TRUNC-open files with those bits, on the mount and on a native
// directory of the same file system: the modes afterwards must be the same. And the kernel
// does not ask for security.capability before each write: 100 writes of 4 KiB reach the
// layer with at most one GETXATTR.
func TestKillPriv(t *testing.T) { asOtherUser(t, killPriv) }

// asOtherUser runs f in both cache modes; f runs programs as another user on an
// allow_other mount (otherUserCase), which needs root.
func asOtherUser(t *testing.T, f func(*testing.T, fusefs.CacheMode)) {
	testenv.Root(t, testenv.FUSE, "runs programs as another user on an allow_other mount")
	for _, cache := range []fusefs.CacheMode{fusefs.CacheNone, fusefs.CacheKernel} {
		t.Run(string(cache), func(t *testing.T) { f(t, cache) })
	}
}

// otherUserCase makes, in a new directory another user can enter, a native directory and
// an allow_other mount (in cache mode cache, recording into rec) of a backend directory
// beside it, both empty, so that programs run as that user can be compared on the two.
func otherUserCase(t *testing.T, cache fusefs.CacheMode, rec fusefs.Recorder) (native string, c *fusetest.Case) {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // let the other user in
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	native = filepath.Join(base, "native")
	c = &fusetest.Case{Orig: filepath.Join(base, "orig"), Mnt: filepath.Join(base, "mnt")}
	for _, d := range []string{native, c.Orig, c.Mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fusetest.MountCase(t, c, rec, fusefs.Options{Cache: cache, AllowOther: true})
	return native, c
}

func killPriv(t *testing.T, cache fusefs.CacheMode) {
	rec := fusetest.NewMemRecorder(0)
	native, c := otherUserCase(t, cache, rec)

	const nobody = 65534
	cases := []struct {
		name string
		mode os.FileMode // with os.ModeSetuid / os.ModeSetgid
		uid  uint32      // who runs the program (and its group)
		argv []string    // F is replaced by the file
		gid  int         // the file's group
	}{
		{"append as user, setuid", 0o777 | os.ModeSetuid, nobody, []string{"sh", "-c", `printf x >> "$0"`, "F"}, 0},
		{"append as user, setgid+group x", 0o777 | os.ModeSetgid, nobody, []string{"sh", "-c", `printf x >> "$0"`, "F"}, 0},
		{"append as user, setgid without group x", 0o767 | os.ModeSetgid, nobody, []string{"sh", "-c", `printf x >> "$0"`, "F"}, 0},
		{"append as user in the group, setgid without group x", 0o767 | os.ModeSetgid, nobody, []string{"sh", "-c", `printf x >> "$0"`, "F"}, nobody},
		{"dd as user, setuid+setgid", 0o777 | os.ModeSetuid | os.ModeSetgid, nobody, []string{"dd", "if=/dev/zero", "of=F", "bs=4k", "count=3", "conv=notrunc", "status=none"}, 0},
		{"append as root, setuid", 0o777 | os.ModeSetuid, 0, []string{"sh", "-c", `printf x >> "$0"`, "F"}, 0},
		{"O_TRUNC as user, setuid", 0o777 | os.ModeSetuid, nobody, []string{"sh", "-c", `: > "$0"`, "F"}, 0},
		{"truncate as user, setuid", 0o777 | os.ModeSetuid, nobody, []string{"truncate", "-s", "1", "F"}, 0},
		{"truncate as root, setgid", 0o777 | os.ModeSetgid, 0, []string{"truncate", "-s", "1", "F"}, 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2]os.FileMode
			for j, dir := range []string{native, c.Mnt} {
				name := fmt.Sprintf("f%d", i)
				// Create in the backend (or natively): the file is root's, with the bits set.
				p := filepath.Join([]string{native, c.Orig}[j], name)
				if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(p, 0, tc.gid); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(p, tc.mode); err != nil {
					t.Fatal(err)
				}
				target := filepath.Join(dir, name)
				argv := append([]string(nil), tc.argv...)
				for k := range argv {
					switch argv[k] {
					case "F":
						argv[k] = target
					case "of=F":
						argv[k] = "of=" + target
					}
				}
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: tc.uid, Gid: tc.uid}}
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%v on %s: %v: %s", argv, dir, err, stderr.String())
				}
				fi, err := os.Stat(p) // from the backend: what the file system kept
				if err != nil {
					t.Fatal(err)
				}
				got[j] = fi.Mode()
			}
			if got[0] != got[1] {
				t.Errorf("mode after: native %v, through the mount %v (before: %v)", got[0], got[1], tc.mode)
			}
			t.Logf("%v → %v", tc.mode, got[0])
		})
	}

	// The kernel's security.capability check: once per inode, not once per write.
	rec.Reset()
	out := filepath.Join(c.Mnt, "blocks")
	dd := exec.Command("dd", "if=/dev/zero", "of="+out, "bs=4k", "count=100", "status=none")
	if b, err := dd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, b)
	}
	getxattr, writes := 0, 0
	for _, e := range rec.Events() {
		switch e.Op {
		case trace.OpGetxattr:
			getxattr++
		case trace.OpWrite:
			writes++
		}
	}
	if getxattr > 1 {
		t.Errorf("100 writes of 4 KiB sent %d GETXATTR requests (and %d writes): want at most 1", getxattr, writes)
	}
}
