package fusefs_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
)

func init() {
	workloads["available"] = func(string) error {
		err := fusefs.Available()
		fmt.Println(err)
		return nil
	}
}

// TestAvailableWrongDevice checks that a /dev/fuse which is not the FUSE device (a
// container's bind mount of another file) is named as such, instead of a mount failing
// later with EINVAL. The child runs in a mount namespace of its own with /dev/null bound
// over /dev/fuse.
func TestAvailableWrongDevice(t *testing.T) {
	fusetest.Require(t)
	testenv.Root(t, testenv.FUSE, "binds a file over /dev/fuse in a private mount namespace")
	testenv.Programs(t, testenv.FUSE, "unshare")
	for _, tc := range []struct{ bind, want string }{
		{"", "<nil>"}, // the real device: no error
		{"/dev/null", "/dev/fuse is not the FUSE device"},
	} {
		script := `exec "$0"`
		if tc.bind != "" {
			script = `mount --bind ` + tc.bind + ` /dev/fuse && exec "$0"`
		}
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, os.Args[0])
		cmd.Env = append(os.Environ(), workloadEnv+"=available")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with %q at /dev/fuse: %v\n%s", tc.bind, err, out)
		}
		if got := strings.TrimSpace(string(out)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("with %q at /dev/fuse: Available() = %q, want %q", tc.bind, got, tc.want)
		}
	}
}
