package moosefs_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/e2e/e2etest"
	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/testenv"
)

// requireMooseFS skips (or fails) unless this machine can run the MooseFS lab and the job.
func requireMooseFS(t *testing.T) {
	t.Helper()
	e2etest.Require(t, testenv.MooseFS, "the MooseFS lab", "a network namespace, daemons that switch to user mfs, in-place record")
	missing := e2etest.Missing("mfsmaster", "mfschunkserver", "mfsmount", "mfssetgoal", "mfssettrashtime")
	if _, err := os.Stat("/var/lib/mfs/metadata.mfs.empty"); err != nil {
		missing = append(missing, "/var/lib/mfs/metadata.mfs.empty")
	}
	if len(missing) > 0 {
		testenv.Skip(t, testenv.MooseFS, "MooseFS is not installed (missing %s; scripts/install-deps.sh or apt-get install -y --no-install-recommends moosefs-master moosefs-chunkserver moosefs-client)", strings.Join(missing, ", "))
	}
	if missing := e2etest.Missing("unshare", "nsenter", "setsid", "ip", "runuser", "umount", "samtools", "sqlite3", "tar", "awk"); len(missing) > 0 {
		testenv.Skip(t, testenv.MooseFS, "programs missing: %s (scripts/install-deps.sh installs them)", strings.Join(missing, ", "))
	}
	if err := fusefs.Available(); err != nil {
		testenv.Skip(t, testenv.MooseFS, "FUSE not usable: %v", err)
	}
}

// workPrefix names the work directories, so that one left by a killed run can be found.
const workPrefix = "iotap-e2e-moosefs-" // e2etest's name for them: iotap-e2e-<Name>-

// TestMain removes the work directory after a passing run and keeps it (naming it) after a
// failing one, for its traces and job outputs. Labs are stopped by the tests themselves.
func TestMain(m *testing.M) { e2etest.Main(m) }

// workDir makes the work directory and builds iotap into it, once per test binary. It first
// stops the labs of work directories whose test process is gone (a run killed by a
// timeout), so that their daemons and mounts do not outlive it for long, and names this
// process as the new directory's owner.
func workDir(t *testing.T) *e2etest.Work {
	t.Helper()
	return e2etest.WorkDir(t, e2etest.Config{
		Name:    "moosefs",
		Prepare: reapOrphans,
		Made: func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "owner"), []byte(selfIdentity()), 0o644)
		},
	})
}

// selfIdentity is this process's PID and start time: a PID alone may be reused.
func selfIdentity() string { return procIdentity(os.Getpid()) }

func procIdentity(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return fmt.Sprintf("%d %s", pid, f[19]) // field 22: start time in clock ticks
}

// reapOrphans stops the labs in work directories of test processes that no longer run.
func reapOrphans(t testing.TB, repo, base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, workPrefix+"*"))
	for _, d := range dirs {
		owner, err := os.ReadFile(filepath.Join(d, "owner"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(owner))
		if len(f) != 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || procIdentity(pid) == string(owner) {
			continue // still running (or unreadable): not ours to touch
		}
		labs, _ := filepath.Glob(filepath.Join(d, "*", ".mfslab"))
		for _, marker := range labs {
			cmd := exec.Command(filepath.Join(repo, "scripts", "labs", "moosefs", "stop.sh"))
			cmd.Env = append(labEnv(), "MFSLAB_DIR="+filepath.Dir(marker))
			out, err := cmd.CombinedOutput()
			t.Logf("stopped the lab %s of an earlier run that was killed (%v):\n%s", filepath.Dir(marker), err, out)
		}
	}
}

// labEnv is the environment for the lab scripts: this one without the settings each lab
// makes its own.
func labEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "MFSLAB_DIR", "MFSLAB_MNT", "MFSLAB_KEEP", "MFSLAB_MOUNT_OPTS", "MFSLAB_INSTALL":
		default:
			env = append(env, kv)
		}
	}
	return env
}

// lab is a MooseFS cluster started by scripts/labs/moosefs/start.sh.
type lab struct {
	dir     string // MFSLAB_DIR
	mnt     string // the mount point
	scripts string // scripts/labs/moosefs
	env     []string
	stopped bool // the test stops the lab itself: its cleanup only checks stop.sh is idempotent
}

// newLab prepares a lab in <work>/<name> with extra MFSLAB_* settings; it starts nothing.
func newLab(w *e2etest.Work, name string, settings ...string) *lab {
	scripts := filepath.Join(w.Repo, "scripts", "labs", "moosefs")
	l := &lab{dir: filepath.Join(w.Dir, name), scripts: scripts}
	l.env = append(append(labEnv(), "MFSLAB_DIR="+l.dir), settings...)
	return l
}

// script runs one of the lab scripts with extra settings and returns its combined output.
func (l *lab) script(name string, settings ...string) (string, error) {
	env := append(append([]string(nil), l.env...), settings...)
	return e2etest.Script(filepath.Join(l.scripts, name), env, 3*time.Minute)
}

// startLab starts a lab and stops it when t ends, checking that the stop left nothing
// behind. On failure the daemons' log tails are logged first.
func startLab(t *testing.T, w *e2etest.Work, name string, settings ...string) *lab {
	t.Helper()
	l := newLab(w, name, settings...)
	t0 := time.Now()
	out, err := l.script("start.sh")
	if err != nil {
		t.Fatalf("start the MooseFS lab: %v\n%s", err, out)
	}
	ready, err := os.ReadFile(filepath.Join(l.dir, "ready"))
	if err != nil {
		t.Fatalf("start.sh returned without its ready file: %v\n%s", err, out)
	}
	l.mnt = strings.TrimSpace(string(ready))
	t.Logf("MooseFS lab up in %v: %s", time.Since(t0).Round(time.Millisecond), strings.TrimSpace(lastLine(out)))
	t.Cleanup(func() {
		if t.Failed() {
			e2etest.LogTails(t, l.dir)
		}
		l.stopAndCheck(t)
	})
	return l
}

// labState is what a lab's run directory says it started.
type labState struct {
	pids  map[string]int // pid file name -> pid
	netns string         // "net:[inode]"
	mnt   string
}

func (l *lab) state(t *testing.T) labState {
	t.Helper()
	s := labState{pids: map[string]int{}}
	files, _ := filepath.Glob(filepath.Join(l.dir, "run", "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("pid file: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("pid file %s: %q", f, data)
		}
		s.pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	if data, err := os.ReadFile(filepath.Join(l.dir, "run", "netns")); err == nil {
		s.netns = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile(filepath.Join(l.dir, "run", "mnt")); err == nil {
		s.mnt = strings.TrimSpace(string(data))
	}
	return s
}

// checkGone fails t if anything s names still exists: a process, a process in the
// namespace, the mount.
func (s labState) checkGone(t *testing.T) {
	t.Helper()
	for name, pid := range s.pids {
		if e2etest.Alive(pid) {
			t.Errorf("%s (pid %d) still runs", name, pid)
		}
	}
	if s.netns != "" {
		if pids := procsInNetns(s.netns); len(pids) > 0 {
			t.Errorf("processes still in the lab's network namespace %s: %v", s.netns, pids)
		}
	}
	if s.mnt != "" && isMounted(t, s.mnt) {
		t.Errorf("%s is still mounted", s.mnt)
	}
}

// stopAndCheck runs stop.sh, checks that nothing the lab started is left, and that a second
// stop.sh has nothing to do.
func (l *lab) stopAndCheck(t *testing.T) {
	t.Helper()
	if l.stopped {
		if out, err := l.script("stop.sh"); err != nil || !strings.Contains(out, "nothing to stop") {
			t.Errorf("stop.sh on a stopped lab: %v\n%s", err, out)
		}
		return
	}
	s := l.state(t)
	if len(s.pids) < 4 || s.netns == "" || s.mnt == "" {
		t.Errorf("the lab's run directory names %d processes (want holder, master, chunk server, client), netns %q, mount %q", len(s.pids), s.netns, s.mnt)
	}
	out, err := l.script("stop.sh")
	if err != nil {
		t.Errorf("stop the MooseFS lab: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(lastLine(out)))
	s.checkGone(t)
	if _, err := os.Stat(l.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stop.sh left %s behind (%v)", l.dir, err)
	}
	out, err = l.script("stop.sh")
	if err != nil || !strings.Contains(out, "nothing to stop") {
		t.Errorf("a second stop.sh: %v\n%s", err, out)
	}
}

// isMounted reports whether path is a mount point in this mount namespace.
func isMounted(t *testing.T, path string) bool {
	t.Helper()
	return mountAt(t, path) != nil
}

// mountSource returns the source column of path's mount ("" if not mounted).
func mountSource(t *testing.T, path string) string {
	t.Helper()
	if m := mountAt(t, path); m != nil {
		return m.Source
	}
	return ""
}

// mountAt returns the first mount on path in the mount table, nil if none.
func mountAt(t *testing.T, path string) *sysinfo.Mount {
	t.Helper()
	mounts, err := sysinfo.Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for i := range mounts {
		if mounts[i].MountPoint == path {
			return &mounts[i]
		}
	}
	return nil
}

// procsInNetns lists the live processes in the network namespace ns.
func procsInNetns(ns string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == ns && e2etest.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// run runs argv in dir with this process's environment and env (e2etest.Run).
func run(t *testing.T, dir string, timeout time.Duration, env []string, argv ...string) e2etest.Result {
	t.Helper()
	return e2etest.Run(t, dir, timeout, append(os.Environ(), env...), argv...)
}

// mustRun is run that fails the test on a non-zero exit.
func mustRun(t *testing.T, dir string, timeout time.Duration, env []string, argv ...string) e2etest.Result {
	t.Helper()
	return e2etest.MustRun(t, dir, timeout, append(os.Environ(), env...), argv...)
}

// kill ends a process the test started, by PID.
func kill(p *os.Process) {
	_ = p.Signal(syscall.SIGKILL)
	_, _ = p.Wait()
}
