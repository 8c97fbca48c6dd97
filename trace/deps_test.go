package trace

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the trace format free of the FUSE layer, the replay engine and
// cloud SDKs: everything reads traces, so the package must stay cheap to import.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{
			"github.com/hanwen/go-fuse",       // the FUSE layer imports trace, not the reverse
			"github.com/aws/",                 // replay backends only
			"github.com/iotap/iotap/fusefs",   // dependencies point one way
			"github.com/iotap/iotap/replay",   // idem
			"github.com/iotap/iotap/cmd",      // idem
			"github.com/iotap/iotap/internal", // helpers for tests and the CLI
		} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("trace depends on %s", dep)
			}
		}
	}
}
