package slurm_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/testenv"
)

// Settings of the test cluster. From the environment, SLURMLAB_DIR moves its state (not
// under /tmp: every node replaces /tmp by its own), and SLURMLAB_CTLD_PORT and
// SLURMLAB_PORT_BASE choose its ports (slurmctld's, and node i's slurmd on BASE+i; defaults
// in ci/slurm/lib.sh) when those are taken on this machine.
const (
	defaultLabDir = "/run/iotap-slurmtest"
	nodeCount     = 2
)

var nodes = []string{"n1", "n2"}

// skipOrFail skips t naming why, or fails it under IOTAP_REQUIRE_SLURM=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Skip(t, testenv.Slurm, format, args...)
}

// requireSlurm skips (or fails) unless this machine can run the test cluster.
func requireSlurm(t *testing.T) {
	t.Helper()
	if testing.Short() && !testenv.Slurm.Required() {
		t.Skip("-short: the Slurm end-to-end tests start a cluster")
	}
	if runtime.GOOS != "linux" {
		skipOrFail(t, "the Slurm test cluster needs Linux")
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "the Slurm test cluster needs root (munged, slurmctld, slurmd in their own namespaces)")
	}
	var missing []string
	for _, b := range []string{"slurmctld", "slurmd", "munged", "mungekey", "munge", "srun", "sbatch", "scontrol", "sinfo", "squeue", "unshare", "runuser"} {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		skipOrFail(t, "slurm-wlm/munge are not installed (missing %s; apt-get install -y --no-install-recommends slurm-wlm munge)", strings.Join(missing, ", "))
	}
	if err := fusefs.Available(); err != nil {
		skipOrFail(t, "FUSE not usable: %v", err)
	}
}

// lookPath finds b in PATH or in /usr/sbin, /sbin (root's daemons).
func lookPath(b string) (string, error) {
	if p, err := exec.LookPath(b); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, b)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// work is the directory all nodes share (outside /tmp) with the built binaries.
type work struct {
	dir  string // shared work dir
	bin  string // dir holding the iotap binary
	repo string // repository root
}

// TestMain removes the shared work directory after a passing run and keeps it (naming it)
// after a failing one, for its traces and job outputs.
func TestMain(m *testing.M) {
	code := m.Run()
	if theWork != nil {
		if code == 0 && os.Getenv("IOTAP_E2E_KEEP") != "1" {
			if err := os.RemoveAll(theWork.dir); err != nil {
				fmt.Fprintf(os.Stderr, "e2e/slurm: remove the work directory: %v\n", err)
			}
		} else {
			fmt.Fprintf(os.Stderr, "e2e/slurm: kept the work directory %s (traces, job outputs)\n", theWork.dir)
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	theWork   *work
	buildErr  error
)

// workDir builds iotap once per test binary into a fresh directory outside /tmp.
func workDir(t *testing.T) *work {
	t.Helper()
	buildOnce.Do(func() {
		repo, err := filepath.Abs("../..")
		if err != nil {
			buildErr = err
			return
		}
		base := os.Getenv("IOTAP_E2E_DIR")
		if base == "" {
			base = "/var/tmp"
		}
		if strings.HasPrefix(filepath.Clean(base)+"/", "/tmp/") {
			buildErr = fmt.Errorf("IOTAP_E2E_DIR=%s is under /tmp, which every test node replaces by its own", base)
			return
		}
		dir, err := os.MkdirTemp(base, "iotap-e2e-slurm-")
		if err != nil {
			buildErr = err
			return
		}
		w := &work{dir: dir, bin: filepath.Join(dir, "bin"), repo: repo}
		goBin, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command is needed to build iotap for the nodes: %w", err)
			return
		}
		cmd := exec.Command(goBin, "build", "-o", w.bin+"/", "./cmd/iotap")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/iotap: %v\n%s", err, out)
			return
		}
		theWork = w
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return theWork
}

// cluster is a running test cluster.
type cluster struct {
	dir       string // SLURMLAB_DIR
	scripts   string // ci/slurm
	proctrack string
	env       []string
	baseMnt   map[string]map[string]bool // node -> mounts seen right after start
}

// startCluster starts the cluster with the given proctrack plugin and stops it when t
// ends, passed or failed. A cluster left behind by an interrupted earlier run is stopped
// first (stop.sh stops by PID files only).
func startCluster(t *testing.T, w *work, proctrack string) *cluster {
	t.Helper()
	dir := os.Getenv("SLURMLAB_DIR")
	if dir == "" {
		dir = defaultLabDir
	}
	c := &cluster{dir: dir, scripts: filepath.Join(w.repo, "ci", "slurm"), proctrack: proctrack}
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
		c.dumpLogs(t)
		_, _ = c.script("stop.sh")
		t.Fatalf("start the cluster (%s): %v\n%s", proctrack, err, out)
	}
	t.Logf("cluster up (proctrack/%s) in %v", proctrack, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
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

// script runs one of the ci/slurm scripts and returns its output. One that runs too long
// gets SIGTERM (start.sh then prints the daemons' logs), and its output is returned even if
// a daemon it started still holds the pipe.
func (c *cluster) script(name string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.scripts, name))
	cmd.Env = c.env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s: no result after 3 minutes: %w", name, err)
	}
	return out.String(), err
}

// dumpLogs logs the tails of the cluster's logs (on failure, before stop.sh removes them).
func (c *cluster) dumpLogs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(c.dir, "log", "*.log"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("----- %s (last %d lines)\n%s", f, len(lines), strings.Join(lines, "\n"))
	}
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs a command with the cluster's environment in dir and returns its exit status and
// output; it fails the test only if the command cannot be run at all.
func (c *cluster) run(t *testing.T, dir string, timeout time.Duration, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = c.env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	t0 := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s: timed out after %v\n%s", strings.Join(argv, " "), timeout, r)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		r.code = ee.ExitCode()
	}
	t.Logf("$ %s  (exit %d, %v)", strings.Join(argv, " "), r.code, time.Since(t0).Round(time.Millisecond))
	return r
}

// mustRun is run that fails the test on a non-zero exit.
func (c *cluster) mustRun(t *testing.T, dir string, timeout time.Duration, argv ...string) result {
	t.Helper()
	r := c.run(t, dir, timeout, argv...)
	if r.code != 0 {
		t.Fatalf("%s failed: %s", strings.Join(argv, " "), r)
	}
	return r
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
