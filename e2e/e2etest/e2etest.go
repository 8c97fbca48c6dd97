// Package e2etest is what the end-to-end tests on a lab of real daemons (e2e/moosefs,
// e2e/slurm) share: the machine they need, a work directory with the iotap binary built
// once per test binary and kept after a failing run, the lab scripts under scripts/labs/ run
// with a bound on their time, commands run with their output, and what those leave behind
// (processes, logs, traces).
package e2etest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// Require skips t, or fails it when r is required, unless this machine can run the lab
// (named for the messages: "the MooseFS lab"): Linux, and root, which the lab needs for
// what rootFor says. With -short the test skips unless r is required: a lab takes seconds to
// start.
func Require(t *testing.T, r testenv.Requirement, lab, rootFor string) {
	t.Helper()
	if testing.Short() && !r.Required() {
		t.Skipf("-short: the end-to-end tests on %s start it", lab)
	}
	if runtime.GOOS != "linux" {
		testenv.Skip(t, r, "%s needs Linux", lab)
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, r, "%s needs root (%s)", lab, rootFor)
	}
}

// LookPath finds b in PATH or in /usr/sbin, /sbin (root's daemons).
func LookPath(b string) (string, error) {
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

// Missing returns the programs among names that LookPath does not find.
func Missing(names ...string) []string {
	var missing []string
	for _, b := range names {
		if _, err := LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// Work is a test binary's work directory, with the iotap binary built into it.
type Work struct {
	Dir   string // the work directory: labs, jobs, traces
	Bin   string // Dir/bin, which holds the iotap binary
	Iotap string // the iotap binary
	Repo  string // the repository root
}

// Config says how a package makes its work directory.
type Config struct {
	// Name is the package's: messages name it e2e/<Name>, and its work directories are
	// iotap-e2e-<Name>-* in the base directory (IOTAP_E2E_DIR, default /var/tmp).
	Name string
	// NotUnderTmp refuses a base directory under /tmp (the work directory is shared with
	// lab nodes that each replace /tmp by their own).
	NotUnderTmp bool
	// Prepare, if set, runs before the work directory is made, with the repository root and
	// the base directory.
	Prepare func(t testing.TB, repo, base string)
	// Made, if set, runs on the new work directory before iotap is built into it.
	Made func(dir string) error
}

var (
	workOnce sync.Once
	theWork  *Work
	workName string
	workErr  error
)

// WorkDir returns the test binary's work directory, made and with iotap built into it on
// the first call. It is searchable by everyone (0755): lab daemons switch to their own users.
func WorkDir(t testing.TB, c Config) *Work {
	t.Helper()
	workOnce.Do(func() {
		workName = c.Name
		theWork, workErr = newWork(t, c)
	})
	if workErr != nil {
		t.Fatal(workErr)
	}
	return theWork
}

func newWork(t testing.TB, c Config) (*Work, error) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	base := os.Getenv("IOTAP_E2E_DIR")
	if base == "" {
		base = "/var/tmp"
	}
	if c.NotUnderTmp && strings.HasPrefix(filepath.Clean(base)+"/", "/tmp/") {
		return nil, fmt.Errorf("IOTAP_E2E_DIR=%s is under /tmp, which every lab node replaces by its own", base)
	}
	if c.Prepare != nil {
		c.Prepare(t, repo, base)
	}
	dir, err := os.MkdirTemp(base, "iotap-e2e-"+c.Name+"-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if c.Made != nil {
		if err := c.Made(dir); err != nil {
			return nil, err
		}
	}
	w := &Work{Dir: dir, Bin: filepath.Join(dir, "bin"), Repo: repo}
	w.Iotap = filepath.Join(w.Bin, "iotap")
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed to build iotap: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-o", w.Iotap, "./cmd/iotap")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/iotap: %v\n%s", err, out)
	}
	return w, nil
}

// Main runs the tests (m.Run), then removes the work directory after a passing run (unless
// IOTAP_E2E_KEEP=1) and keeps it, naming it, after a failing one, for its traces and job
// outputs; it exits with the tests' code. A package's TestMain calls it.
func Main(m *testing.M) {
	code := m.Run()
	if theWork != nil {
		if code == 0 && os.Getenv("IOTAP_E2E_KEEP") != "1" {
			if err := os.RemoveAll(theWork.Dir); err != nil {
				fmt.Fprintf(os.Stderr, "e2e/%s: remove the work directory: %v\n", workName, err)
			}
		} else {
			fmt.Fprintf(os.Stderr, "e2e/%s: kept the work directory %s (traces, job outputs)\n", workName, theWork.Dir)
		}
	}
	os.Exit(code)
}

// Script runs a lab script with the environment env and returns its combined output. One
// that runs longer than timeout gets SIGTERM (a start script then prints the daemons' logs
// and stops what it started), and its output is returned even if a daemon it started still
// holds the pipe.
func Script(path string, env []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = env
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s: no result after %v: %w", filepath.Base(path), timeout, err)
	}
	return out.String(), err
}

// LogTails logs the last 30 lines of each of the lab's logs (dir/log/*.log): on failure,
// before its stop script removes them.
func LogTails(t testing.TB, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "log", "*.log"))
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

// Result is a finished command.
type Result struct {
	Code           int
	Stdout, Stderr string
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.Code, r.Stdout, r.Stderr)
}

// Run runs argv in dir with the environment env and returns its exit status and output; it
// fails the test only if the command cannot be run or times out.
func Run(t testing.TB, dir string, timeout time.Duration, env []string, argv ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	t0 := time.Now()
	err := cmd.Run()
	r := Result{Stdout: so.String(), Stderr: se.String()}
	if ctx.Err() != nil {
		t.Fatalf("%s: timed out after %v\n%s", strings.Join(argv, " "), timeout, r)
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		}
		r.Code = ee.ExitCode()
	}
	t.Logf("$ %s  (in %s: exit %d, %v)", strings.Join(argv, " "), dir, r.Code, time.Since(t0).Round(time.Millisecond))
	return r
}

// MustRun is Run that fails the test on a non-zero exit.
func MustRun(t testing.TB, dir string, timeout time.Duration, env []string, argv ...string) Result {
	t.Helper()
	r := Run(t, dir, timeout, env, argv...)
	if r.Code != 0 {
		t.Fatalf("%s failed: %s", strings.Join(argv, " "), r)
	}
	return r
}

// Alive reports whether pid runs and is not a zombie (PID 1 on some sandboxes reaps orphans
// late).
func Alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// ReadTrace returns a trace's header, its events counted by op, its footer and whether it
// has one (a complete trace).
func ReadTrace(t testing.TB, path string) (*trace.Header, map[string]int, *trace.Footer, bool) {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer func() { _ = r.Close() }()
	counts := map[string]int{}
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		counts[ev.Op.String()]++
	}
	ft, ok := r.Footer()
	return r.Header(), counts, ft, ok
}
