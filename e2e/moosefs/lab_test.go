package moosefs_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/testenv"
)

// skipOrFail skips t naming why, or fails it under IOTAP_REQUIRE_MOOSEFS=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Skip(t, testenv.MooseFS, format, args...)
}

// requireMooseFS skips (or fails) unless this machine can run the MooseFS lab and the job.
func requireMooseFS(t *testing.T) {
	t.Helper()
	if testing.Short() && !testenv.MooseFS.Required() {
		t.Skip("MooseFS end-to-end tests start a MooseFS cluster: skipped with -short")
	}
	if runtime.GOOS != "linux" {
		skipOrFail(t, "the MooseFS lab needs Linux")
	}
	if os.Geteuid() != 0 {
		skipOrFail(t, "the MooseFS lab needs root (a network namespace, daemons that switch to user mfs, in-place record)")
	}
	var missing []string
	for _, b := range []string{"mfsmaster", "mfschunkserver", "mfsmount", "mfssetgoal", "mfssettrashtime"} {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if _, err := os.Stat("/var/lib/mfs/metadata.mfs.empty"); err != nil {
		missing = append(missing, "/var/lib/mfs/metadata.mfs.empty")
	}
	if len(missing) > 0 {
		skipOrFail(t, "MooseFS is not installed (missing %s; scripts/install-deps.sh or apt-get install -y --no-install-recommends moosefs-master moosefs-chunkserver moosefs-client)", strings.Join(missing, ", "))
	}
	missing = nil
	for _, b := range []string{"unshare", "nsenter", "setsid", "ip", "runuser", "umount", "samtools", "sqlite3", "tar", "awk"} {
		if _, err := lookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		skipOrFail(t, "programs missing: %s (scripts/install-deps.sh installs them)", strings.Join(missing, ", "))
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

// work is this test binary's work directory (searchable by user mfs) with the iotap binary.
type work struct {
	dir   string // work directory: labs, local job directories, traces
	iotap string // the iotap binary
	repo  string // repository root
}

// workPrefix names the work directories, so that one left by a killed run can be found.
const workPrefix = "iotap-e2e-moosefs-"

var (
	buildOnce sync.Once
	theWork   *work
	buildErr  error
)

// TestMain removes the work directory after a passing run and keeps it (naming it) after a
// failing one, for its traces and job outputs. Labs are stopped by the tests themselves.
func TestMain(m *testing.M) {
	code := m.Run()
	if theWork != nil {
		if code == 0 && os.Getenv("IOTAP_E2E_KEEP") != "1" {
			if err := os.RemoveAll(theWork.dir); err != nil {
				fmt.Fprintf(os.Stderr, "e2e/moosefs: remove the work directory: %v\n", err)
			}
		} else {
			fmt.Fprintf(os.Stderr, "e2e/moosefs: kept the work directory %s (traces, job outputs)\n", theWork.dir)
		}
	}
	os.Exit(code)
}

// workDir makes the work directory and builds iotap into it, once per test binary. It first
// stops the labs of work directories whose test process is gone (a run killed by a
// timeout), so that their daemons and mounts do not outlive it for long.
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
		reapOrphans(t, repo, base)
		dir, err := os.MkdirTemp(base, workPrefix)
		if err != nil {
			buildErr = err
			return
		}
		// The daemons run as user mfs: the lab directory's parents must be searchable.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "owner"), []byte(selfIdentity()), 0o644); err != nil {
			buildErr = err
			return
		}
		w := &work{dir: dir, iotap: filepath.Join(dir, "bin", "iotap"), repo: repo}
		cmd := exec.Command("go", "build", "-o", w.iotap, "./cmd/iotap")
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
func reapOrphans(t *testing.T, repo, base string) {
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
			cmd := exec.Command(filepath.Join(repo, "ci", "moosefs", "stop.sh"))
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

// lab is a MooseFS cluster started by ci/moosefs/start.sh.
type lab struct {
	dir     string // MFSLAB_DIR
	mnt     string // the mount point
	scripts string // ci/moosefs
	env     []string
	stopped bool // the test stops the lab itself: its cleanup only checks stop.sh is idempotent
}

// newLab prepares a lab in <work>/<name> with extra MFSLAB_* settings; it starts nothing.
func newLab(w *work, name string, settings ...string) *lab {
	l := &lab{dir: filepath.Join(w.dir, name), scripts: filepath.Join(w.repo, "ci", "moosefs")}
	l.env = append(append(labEnv(), "MFSLAB_DIR="+l.dir), settings...)
	return l
}

// script runs one of the lab scripts and returns its combined output.
func (l *lab) script(name string, settings ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(l.scripts, name))
	cmd.Env = append(append([]string(nil), l.env...), settings...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s: timed out: %w", name, ctx.Err())
	}
	return string(out), err
}

// startLab starts a lab and stops it when t ends, checking that the stop left nothing
// behind. On failure the daemons' log tails are logged first.
func startLab(t *testing.T, w *work, name string, settings ...string) *lab {
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
			l.dumpLogs(t)
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
		if alive(pid) {
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

// dumpLogs logs the tails of the lab's logs (before stop.sh removes them).
func (l *lab) dumpLogs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(l.dir, "log", "*.log"))
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

// isMounted reports whether path is a mount point in this mount namespace.
func isMounted(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && unescapeMount(fields[4]) == path {
			return true
		}
	}
	return false
}

// unescapeMount undoes the octal escapes of /proc/self/mountinfo fields (\040 for a blank,
// \043 for '#' in "mfs#host:port").
func unescapeMount(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountSource returns the source column of path's mount ("" if not mounted).
func mountSource(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 || unescapeMount(fields[4]) != path {
			continue
		}
		for i, x := range fields {
			if x == "-" && i+2 < len(fields) {
				return unescapeMount(fields[i+2])
			}
		}
	}
	return ""
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
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && l == ns && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid runs and is not a zombie (PID 1 here may reap late).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// result is a finished command.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// run runs argv in dir with extra environment and returns its status and output; it fails
// the test only if the command cannot be run or times out.
func run(t *testing.T, dir string, timeout time.Duration, env []string, argv ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	t0 := time.Now()
	err := cmd.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s: timed out after %v\n%s", strings.Join(argv, " "), timeout, r)
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		r.code = ee.ExitCode()
	}
	t.Logf("$ %s  (in %s: exit %d, %v)", strings.Join(argv, " "), dir, r.code, time.Since(t0).Round(time.Millisecond))
	return r
}

// mustRun is run that fails the test on a non-zero exit.
func mustRun(t *testing.T, dir string, timeout time.Duration, env []string, argv ...string) result {
	t.Helper()
	r := run(t, dir, timeout, env, argv...)
	if r.code != 0 {
		t.Fatalf("%s failed: %s", strings.Join(argv, " "), r)
	}
	return r
}

// kill ends a process the test started, by PID.
func kill(p *os.Process) {
	_ = p.Signal(syscall.SIGKILL)
	_, _ = p.Wait()
}
