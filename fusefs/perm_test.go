package fusefs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
)

// TestAllowOtherPermissions: a mount other users can enter (allow_other) has the kernel
// check each caller's permissions (default_permissions), so that nobody reads, writes or
// lists through the root-run layer what they could not natively. Real programs run as an
// unprivileged user on the mount and on a native copy of the same tree; each must succeed or
// fail alike, with the same error, and the private files must stay out of reach.
func TestAllowOtherPermissions(t *testing.T) { asOtherUser(t, allowOtherPermissions) }

func allowOtherPermissions(t *testing.T, cache fusefs.CacheMode) {
	native, c := otherUserCase(t, cache, fusetest.NewMemRecorder(0))
	for _, root := range []string{native, c.Orig} { // root's files, made in the backend
		for _, f := range []struct {
			name string
			mode os.FileMode
		}{{"secret", 0o600}, {"public", 0o644}, {"private/inner", 0o644}} {
			p := filepath.Join(root, f.name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("data of "+f.name+"\n"), f.mode); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(filepath.Join(root, "private"), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	const nobody = 65534
	cases := []struct {
		name     string
		script   string // run by sh -c in the directory, as nobody
		mustFail bool
	}{
		{"read private file", `cat secret`, true},
		{"read public file", `cat public`, false},
		{"write public file", `echo x >> public`, true},
		{"list private dir", `ls private`, true},
		{"read in private dir", `cat private/inner`, true},
		{"stat in private dir", `stat -c %s private/inner`, true},
		{"create in root's dir", `echo x > new`, true},
		{"remove root's file", `rm -f public`, true},
		{"chmod root's file", `chmod 666 secret`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out [2]string
			var failed [2]bool
			for j, dir := range []string{native, c.Mnt} {
				// sh changes into dir itself: a chdir between fork and exec (cmd.Dir)
				// would wait on this process's own mount while the forking thread holds its
				// P, which a garbage collection starting then cannot stop.
				cmd := exec.Command("sh", "-c", `cd "$1" || exit 1; `+tc.script, "sh", dir)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
				var b bytes.Buffer
				cmd.Stdout, cmd.Stderr = &b, &b
				failed[j] = cmd.Run() != nil
				out[j] = strings.ReplaceAll(b.String(), dir, "DIR")
			}
			if failed[0] != failed[1] || out[0] != out[1] {
				t.Errorf("%q: natively failed=%v %q; through the mount failed=%v %q", tc.script, failed[0], out[0], failed[1], out[1])
			}
			if failed[1] != tc.mustFail {
				t.Errorf("%q through the mount: failed=%v, want %v: %s", tc.script, failed[1], tc.mustFail, out[1])
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(c.Orig, "secret")); err != nil || string(b) != "data of secret\n" {
		t.Errorf("secret after the attempts: %q, %v", b, err)
	}
}
