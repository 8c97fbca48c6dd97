// Package testenv is how a test says what it needs from the machine: FUSE, root, a program,
// a Slurm or MooseFS cluster, a cgroup with a memory limit, DuckDB. When that is missing the
// test skips, naming it; when the matching IOTAP_REQUIRE_* variable is 1 it fails instead, so
// that a run which must exercise those parts cannot pass by skipping them. CI (.ci/run) sets
// all five: IOTAP_REQUIRE_FUSE, IOTAP_REQUIRE_SLURM, IOTAP_REQUIRE_MOOSEFS,
// IOTAP_REQUIRE_CGROUPS and IOTAP_REQUIRE_DUCKDB (the Requirement constants).
//
// Every skip for a missing part of the machine goes through Skip (TestSkipsGoThroughTestenv
// checks the repository for others).
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Requirement names the environment variable that turns a kind of skip into a failure.
type Requirement string

const (
	// FUSE covers what the mount tests need: a usable /dev/fuse, root for private mount
	// namespaces and allow_other mounts, s3fs, and the programs they run as workloads.
	FUSE Requirement = "IOTAP_REQUIRE_FUSE"
	// Slurm covers the end-to-end tests on a local Slurm cluster (e2e/slurm).
	Slurm Requirement = "IOTAP_REQUIRE_SLURM"
	// MooseFS covers the end-to-end tests on a local MooseFS cluster (e2e/moosefs).
	MooseFS Requirement = "IOTAP_REQUIRE_MOOSEFS"
	// Cgroups covers the tests that create a cgroup with a memory limit (root, and a cgroup
	// hierarchy with the memory controller).
	Cgroups Requirement = "IOTAP_REQUIRE_CGROUPS"
	// DuckDB covers the tests that read iotap's exports with DuckDB (Node.js and the npm
	// package @duckdb/node-api, which scripts/install-deps.sh installs for them).
	DuckDB Requirement = "IOTAP_REQUIRE_DUCKDB"
)

// Required reports whether r's variable is set to 1.
func (r Requirement) Required() bool { return os.Getenv(string(r)) == "1" }

// Skip skips t with the reason, or fails it when r is required.
func Skip(t testing.TB, r Requirement, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if r.Required() {
		t.Fatalf("%s=1, but this test cannot run: %s", r, why)
	}
	t.Skipf("%s (set %s=1 to fail instead)", why, r)
}

// Root skips (or fails) t unless it runs as root; why says what needs root.
func Root(t testing.TB, r Requirement, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, r, "needs root: %s", why)
	}
}

// Programs skips (or fails) t unless every named program is in PATH.
func Programs(t testing.TB, r Requirement, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Skip(t, r, "%s not installed (scripts/install-deps.sh installs the test programs)", n)
		}
	}
}
