package slurm_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/e2e/e2etest"
	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/testenv"
)

// Settings of the test cluster. From the environment, SLURMLAB_DIR moves its state (not
// under /tmp: every node replaces /tmp by its own), and SLURMLAB_CTLD_PORT and
// SLURMLAB_PORT_BASE choose its ports (slurmctld's, and node i's slurmd on BASE+i; defaults
// in scripts/labs/slurm/lib.sh) when those are taken on this machine.
const (
	defaultLabDir = "/run/iotap-slurmtest"
	nodeCount     = 2
)

var nodes = []string{"n1", "n2"}

// requireSlurm skips (or fails) unless this machine can run the test cluster.
func requireSlurm(t *testing.T) {
	t.Helper()
	e2etest.Require(t, testenv.Slurm, "the Slurm test cluster", "munged, slurmctld, slurmd in their own namespaces")
	if missing := e2etest.Missing("slurmctld", "slurmd", "munged", "mungekey", "munge", "srun", "sbatch", "scontrol", "sinfo", "squeue", "unshare", "runuser"); len(missing) > 0 {
		testenv.Skip(t, testenv.Slurm, "slurm-wlm/munge are not installed (missing %s; apt-get install -y --no-install-recommends slurm-wlm munge)", strings.Join(missing, ", "))
	}
	if err := fusefs.Available(); err != nil {
		testenv.Skip(t, testenv.Slurm, "FUSE not usable: %v", err)
	}
}

// TestMain removes the shared work directory after a passing run and keeps it (naming it)
// after a failing one, for its traces and job outputs.
func TestMain(m *testing.M) { e2etest.Main(m) }

// workDir builds iotap once per test binary into a fresh directory outside /tmp, which
// all nodes share.
func workDir(t *testing.T) *e2etest.Work {
	t.Helper()
	return e2etest.WorkDir(t, e2etest.Config{Name: "slurm", NotUnderTmp: true})
}

// cluster is a running test cluster.
type cluster struct {
	dir       string // SLURMLAB_DIR
	scripts   string // scripts/labs/slurm
	proctrack string
	env       []string
	baseMnt   map[string]map[string]bool // node -> mounts seen right after start
}

// startCluster starts the cluster with the given proctrack plugin and stops it when t
// ends, passed or failed. A cluster left behind by an interrupted earlier run is stopped
// first (stop.sh stops by PID files only).
func startCluster(t *testing.T, w *e2etest.Work, proctrack string) *cluster {
	t.Helper()
	dir := os.Getenv("SLURMLAB_DIR")
	if dir == "" {
		dir = defaultLabDir
	}
	scripts := filepath.Join(w.Repo, "scripts", "labs", "slurm")
	c := &cluster{dir: dir, scripts: scripts, proctrack: proctrack}
	// A test run inside a Slurm job must not hand that job's ids to our srun.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLURM_") && !strings.HasPrefix(kv, "SLURMLAB_") {
			c.env = append(c.env, kv)
		}
	}
	c.env = append(c.env,
		"SLURMLAB_DIR="+dir,
		fmt.Sprintf("SLURMLAB_NODES=%d", nodeCount),
		"SLURMLAB_PROCTRACK="+proctrack,
		"SLURM_CONF="+filepath.Join(dir, "slurm.conf"),
		"PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin",
	)
	for _, k := range []string{"SLURMLAB_CTLD_PORT", "SLURMLAB_PORT_BASE"} {
		if v := os.Getenv(k); v != "" {
			c.env = append(c.env, k+"="+v)
		}
	}
	if out, err := c.script("stop.sh"); err != nil {
		t.Fatalf("stop a leftover cluster: %v\n%s", err, out)
	}
	t0 := time.Now()
	out, err := c.script("start.sh")
	if err != nil {
		e2etest.LogTails(t, c.dir)
		_, _ = c.script("stop.sh")
		t.Fatalf("start the cluster (%s): %v\n%s", proctrack, err, out)
	}
	t.Logf("cluster up (proctrack/%s) in %v", proctrack, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			e2etest.LogTails(t, c.dir)
		}
		if out, err := c.script("stop.sh"); err != nil {
			t.Errorf("stop the cluster: %v\n%s", err, out)
		}
	})
	c.baseMnt = map[string]map[string]bool{}
	for _, n := range nodes {
		c.baseMnt[n] = c.nodeMounts(t, n)
	}
	return c
}

// script runs one of the scripts/labs/slurm scripts and returns its output (e2etest.Script).
func (c *cluster) script(name string) (string, error) {
	return e2etest.Script(filepath.Join(c.scripts, name), c.env, 3*time.Minute)
}

// run runs a command with the cluster's environment in dir and returns its exit status and
// output; it fails the test only if the command cannot be run at all.
func (c *cluster) run(t *testing.T, dir string, timeout time.Duration, argv ...string) e2etest.Result {
	t.Helper()
	return e2etest.Run(t, dir, timeout, c.env, argv...)
}

// mustRun is run that fails the test on a non-zero exit.
func (c *cluster) mustRun(t *testing.T, dir string, timeout time.Duration, argv ...string) e2etest.Result {
	t.Helper()
	return e2etest.MustRun(t, dir, timeout, c.env, argv...)
}

func (c *cluster) slurmdPID(t *testing.T, node string) string {
	data, err := os.ReadFile(filepath.Join(c.dir, "run", "slurmd."+node+".pid"))
	if err != nil {
		t.Fatalf("slurmd pid of %s: %v", node, err)
	}
	return strings.TrimSpace(string(data))
}

// nodeMounts returns the mounts of the node's mount namespace, read through its slurmd,
// as "mountpoint fstype source" strings.
func (c *cluster) nodeMounts(t *testing.T, node string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join("/proc", c.slurmdPID(t, node), "mountinfo"))
	if err != nil {
		t.Fatalf("mounts of node %s: %v", node, err)
	}
	defer func() { _ = f.Close() }()
	m := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) && i >= 5 {
				m[fields[4]+" "+fields[i+1]+" "+fields[i+2]] = true
				break
			}
		}
	}
	return m
}

// checkNoNewMounts fails if a node's namespace has a mount it did not have after start.
func (c *cluster) checkNoNewMounts(t *testing.T) {
	t.Helper()
	for _, n := range nodes {
		for m := range c.nodeMounts(t, n) {
			if !c.baseMnt[n][m] {
				t.Errorf("node %s: mount left behind: %s", n, m)
			}
		}
	}
}

// procsRunning returns the PIDs of live processes running the executable exe.
func procsRunning(exe string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc", name, "exe"))
		if err != nil || strings.TrimSuffix(target, " (deleted)") != exe {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", name, "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue // a zombie: PID 1 here reaps late
		}
		out = append(out, name)
	}
	return out
}
