package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// requireRecord skips (or, with IOTAP_REQUIRE_FUSE=1, fails) a test that runs the iotap
// binary to mount: it needs the binary, FUSE, and root for the private mount namespace.
func requireRecord(t *testing.T) {
	t.Helper()
	if iotapBin == "" {
		t.Fatal("the iotap binary could not be built (see TestMain output)")
	}
	fusetest.Require(t)
	testenv.Root(t, testenv.FUSE, "in-place record makes a private mount namespace (CAP_SYS_ADMIN)")
}

// iotapProc is a running iotap binary.
type iotapProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

// startIotap starts the iotap binary in dir. Its stdout is a pipe the test reads; its
// stderr is collected.
func startIotap(t *testing.T, dir string, args ...string) *iotapProc {
	t.Helper()
	cmd := exec.Command(iotapBin, args...)
	cmd.Dir = dir
	p := &iotapProc{cmd: cmd, stderr: &bytes.Buffer{}}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = bufio.NewReader(out)
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// readLine reads one line of the job's output, failing the test after a timeout.
func (p *iotapProc) readLine(t *testing.T) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		ch <- l
	}()
	select {
	case l := <-ch:
		return strings.TrimSuffix(l, "\n")
	case <-time.After(30 * time.Second):
		t.Fatalf("no output line from the job in 30s; stderr: %s", p.stderr)
		return ""
	}
}

// wait waits for iotap and returns its exit code and the rest of stdout.
func (p *iotapProc) wait(t *testing.T) (int, string) {
	t.Helper()
	rest, _ := io.ReadAll(p.stdout)
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v; stderr: %s", err, p.stderr)
	}
	return exitStatus(p.cmd.ProcessState), string(rest)
}

func exitStatus(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// recorded is one event in a form tests can compare.
type recorded struct {
	Op    trace.Op
	Path  string
	Comm  string
	Ret   int64
	Errno uint16
	Start int64 // ns since origin
	Tid   uint32
	Pid   uint32 // the caller's process, as the event names it
	Exe   string // from the caller's process record
	// FirstSeen is that of the caller's process record read before the event, -1 without one.
	FirstSeen int64
}

type traceContents struct {
	hdr       *trace.Header
	events    []recorded
	footer    bool
	foot      *trace.Footer   // nil without one
	cost      trace.LayerCost // from the footer
	encodeCPU time.Duration
	damage    []error
}

func readTrace(t *testing.T, path string) traceContents {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatalf("open trace: %v", err)
	}
	defer func() { _ = r.Close() }()
	tc := traceContents{hdr: r.Header()}
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read trace: %v", err)
		}
		rec := recorded{Op: ev.Op, Path: r.PathName(ev.Path), Ret: ev.Ret, Errno: ev.Errno, Start: ev.Start,
			Tid: ev.Tid, Pid: ev.Pid, FirstSeen: -1}
		if p, ok := r.Process(ev.Tid); ok {
			rec.Comm, rec.Exe, rec.FirstSeen = p.Comm, p.Exe, p.FirstSeen
		}
		tc.events = append(tc.events, rec)
	}
	if tc.foot, tc.footer = r.Footer(); tc.foot != nil {
		tc.cost, tc.encodeCPU = tc.foot.Layer, tc.foot.EncodeCPU
	}
	tc.damage = r.Damage()
	return tc
}

// has reports whether an event matches op, path (if not empty) and comm (if not empty).
func (tc traceContents) has(op trace.Op, path, comm string) bool {
	for _, e := range tc.events {
		if e.Op == op && (path == "" || e.Path == path) && (comm == "" || e.Comm == comm) && e.Errno == 0 {
			return true
		}
	}
	return false
}

// count returns the number of events of op.
func (tc traceContents) count(op trace.Op) int {
	n := 0
	for _, e := range tc.events {
		if e.Op == op {
			n++
		}
	}
	return n
}

func (tc traceContents) dump() string {
	var b strings.Builder
	for _, e := range tc.events {
		b.WriteString(e.Op.String() + " " + e.Path + " " + e.Comm + "\n")
	}
	return b.String()
}

func TestRecordInPlace(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "job.iotap")
	p := startIotap(t, target, "record", "-o", out, "--label", "run=1", "--", "sh", "-c", "echo hi > f; cat f; exit 3")
	_ = p.stdin.Close()
	code, stdout := p.wait(t)
	if code != 3 {
		t.Fatalf("exit code %d, want 3; stderr:\n%s", code, p.stderr)
	}
	if stdout != "hi\n" {
		t.Errorf("job stdout %q, want %q", stdout, "hi\n")
	}
	if data, err := os.ReadFile(filepath.Join(target, "f")); err != nil || string(data) != "hi\n" {
		t.Errorf("file in the real directory: %q, %v", data, err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("trace mode %v, want 0600", st.Mode().Perm())
	}
	for _, want := range []string{"job exit 3", "ops ", "trace " + out, "recording cost: "} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, p.stderr)
		}
	}
	tc := readTrace(t, out)
	if !tc.footer || len(tc.damage) > 0 {
		t.Errorf("footer %v damage %v", tc.footer, tc.damage)
	}
	// The footer holds the layer's measurement of its own cost: it served at least the
	// recorded requests, and its own work is part of its time.
	if c := tc.cost; c.Requests < uint64(len(tc.events)) || c.Self <= 0 || c.Self > c.InLayer || tc.encodeCPU <= 0 {
		t.Errorf("recording cost %+v, encoder %v, for %d events", c, tc.encodeCPU, len(tc.events))
	}
	// As root, threads are attributed from the proc connector, and the summary says so.
	if os.Geteuid() == 0 {
		if c := tc.cost; !c.Connector || c.Missing != 0 || !strings.Contains(p.stderr.String(), "attributed from the kernel's proc connector") {
			t.Errorf("attribution %+v; summary:\n%s", c, p.stderr)
		}
	}
	h := tc.hdr
	if h.Kind != "record" || h.Target.Path != target || h.Target.FSType == "" || h.Target.Mount == "" ||
		h.FUSE.Cache != "none" || strings.Join(h.Command, " ") != "sh -c echo hi > f; cat f; exit 3" ||
		h.Kernel == "" || h.Hostname == "" || h.IotapVersion == "" {
		t.Errorf("header: %+v", h)
	}
	if v, ok := h.Label("run"); !ok || v != "1" {
		t.Errorf("labels %+v", h.Labels)
	}
	for _, w := range []struct {
		op         trace.Op
		path, comm string
	}{
		{trace.OpCreate, "f", "sh"},
		{trace.OpWrite, "f", "sh"},
		{trace.OpOpen, "f", "cat"},
		{trace.OpRead, "f", "cat"},
	} {
		if !tc.has(w.op, w.path, w.comm) {
			t.Errorf("trace lacks %v %s by %s; events:\n%s", w.op, w.path, w.comm, tc.dump())
		}
	}
	// The recorder enters the job's directory through the mount before it starts the job:
	// those requests are served but not the job's, and not in the trace.
	m := regexp.MustCompile(`iotap recorder \(pid (\d+)\)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("summary names no recorder pid:\n%s", p.stderr)
	}
	self, _ := strconv.Atoi(m[1])
	for _, ev := range tc.events {
		if int(ev.Pid) == self {
			t.Errorf("the recorder's own request is in the trace: %+v", ev)
		}
	}
}

// TestRecordMountIsPrivate checks that while the job runs, the mount over the target is
// in the job's mount table but in neither this process's nor init's.
func TestRecordMountIsPrivate(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startIotap(t, target, "record", "-o", filepath.Join(dir, "t.iotap"), "--",
		"sh", "-c", `grep -c " $PWD .* - fuse.iotap " /proc/self/mountinfo; echo ready; read x; exit 0`)
	if n := p.readLine(t); n != "1" {
		t.Fatalf("job sees %s iotap mounts over its cwd, want 1; stderr: %s", n, p.stderr)
	}
	if l := p.readLine(t); l != "ready" {
		t.Fatalf("got %q", l)
	}
	for _, pid := range []string{"self", "1", "1"} {
		ms, err := sysinfo.MountsOf(pid)
		if err != nil {
			if pid == "1" {
				continue // no permission to read init's table: nothing to check there
			}
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.MountPoint == target {
				t.Errorf("process %s sees the job's mount: %+v", pid, m)
			}
		}
	}
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr: %s", code, p.stderr)
	}
}

// TestRecordRuntimeSettings checks that the process serving the mount runs with the Go
// runtime's lazy freeing (internal/lazyfree), in place and with --mount-at, and that the
// job sees the environment as the user set it.
func TestRecordRuntimeSettings(t *testing.T) {
	requireRecord(t)
	user, ok := os.LookupEnv("GODEBUG")
	if !ok {
		user = "unset"
	}
	// The job's parent serves the mount (in place, iotap's __record-child in the private
	// mount namespace). /proc/PID/environ is the environment a process started with.
	job := `echo "job GODEBUG=${GODEBUG-unset} saved=${IOTAP_SAVED_GODEBUG-unset}"; ` +
		`tr '\0' '\n' </proc/$PPID/environ | grep '^GODEBUG=' || echo "no GODEBUG in the server's environ"`
	for _, mode := range []string{"in place", "mount-at"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"record", "-o", filepath.Join(t.TempDir(), "t.iotap")}
			if mode == "mount-at" {
				args = append(args, "--target", dir, "--mount-at", t.TempDir())
			}
			p := startIotap(t, dir, append(args, "--", "sh", "-c", job)...)
			_ = p.stdin.Close()
			code, stdout := p.wait(t)
			if code != 0 {
				t.Fatalf("exit %d; stderr: %s", code, p.stderr)
			}
			if want := "job GODEBUG=" + user + " saved=unset\n"; !strings.HasPrefix(stdout, want) {
				t.Errorf("job's environment: %q, want it to start with %q", stdout, want)
			}
			if !strings.Contains(stdout, "madvdontneed=0") {
				t.Errorf("the server did not start with GODEBUG=madvdontneed=0: %q", stdout)
			}
		})
	}
}

func TestRecordJobEnds(t *testing.T) {
	requireRecord(t)
	tests := []struct {
		name       string
		argv       []string
		wantCode   int
		wantStderr string
	}{
		{name: "killed by signal", argv: []string{"sh", "-c", "kill -TERM $$"}, wantCode: 128 + int(syscall.SIGTERM), wantStderr: "killed by SIGTERM"},
		{name: "command not found", argv: []string{"iotap-no-such-command", "x"}, wantCode: 127, wantStderr: "iotap-no-such-command: command not found"},
		{name: "relative command not found", argv: []string{"./nope.sh"}, wantCode: 127, wantStderr: "command not found"},
		{name: "success", argv: []string{"true"}, wantCode: 0, wantStderr: "job exit 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := startIotap(t, dir, append([]string{"record", "-o", filepath.Join(t.TempDir(), "t.iotap"), "--"}, tt.argv...)...)
			_ = p.stdin.Close()
			code, _ := p.wait(t)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.wantCode, p.stderr)
			}
			if !strings.Contains(p.stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, p.stderr)
			}
		})
	}
}

func TestRecordForwardsSIGTERM(t *testing.T) {
	requireRecord(t)
	for _, sig := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "TERM", 42}, {syscall.SIGINT, "INT", 43}} {
		t.Run(sig.name, func(t *testing.T) {
			dir := t.TempDir()
			trap := fmt.Sprintf(`trap 'echo got %s; exit %d' %s; echo ready; while :; do sleep 0.05; done`, sig.name, sig.code, sig.name)
			p := startIotap(t, dir, "record", "-o", filepath.Join(t.TempDir(), "t.iotap"), "--", "sh", "-c", trap)
			if l := p.readLine(t); l != "ready" {
				t.Fatalf("got %q; stderr %s", l, p.stderr)
			}
			// SIGUSR1 is iotap's (a stats line), not the job's: sh would die of it.
			if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			if err := p.cmd.Process.Signal(sig.sig); err != nil {
				t.Fatal(err)
			}
			code, rest := p.wait(t)
			if code != sig.code || rest != "got "+sig.name+"\n" {
				t.Fatalf("exit %d output %q, want %d and the trap's line; stderr: %s", code, rest, sig.code, p.stderr)
			}
			if !liveLineRE.MatchString(p.stderr.String()) {
				t.Errorf("SIGUSR1 printed no stats line:\n%s", p.stderr)
			}
		})
	}
}

// liveLineRE matches a live line in text form: its time (RFC 3339, UTC, milliseconds), then
// the rates and the 99th percentile.
var liveLineRE = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z iotap: +\d+ ops/s  read +[0-9.]+ MB/s  write +[0-9.]+ MB/s  p99 \S+`)

// TestRecordErrors: record's flags reach the recorder, and its errors map to exit codes:
// usage errors to 2, a command not found to 127, other failures to 1 (internal/recorder
// tests each check).
func TestRecordErrors(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	mnt := filepath.Join(dir, "mnt")
	for _, d := range []string{target, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "t.iotap")
	tests := []struct {
		name     string
		args     []string
		mounts   bool // the check comes after FUSE's and root's
		wantCode int
		want     string
	}{
		{name: "no command", args: []string{"--target", target, "-o", out}, wantCode: exitUsage, want: "missing the command"},
		{name: "target missing", args: []string{"--target", filepath.Join(dir, "nope"), "-o", out, "--", "true"}, wantCode: exitUsage, want: "does not exist"},
		{name: "bad cache mode", args: []string{"--target", target, "--cache", "some", "-o", out, "--", "true"}, wantCode: exitUsage, want: "--cache"},
		{name: "bad label", args: []string{"--target", target, "--label", "x", "-o", out, "--", "true"}, wantCode: exitUsage, want: "key=value"},
		{name: "bad uid flag", args: []string{"--target", target, "--uid", "-1", "-o", out, "--", "true"}, wantCode: exitUsage, want: "--uid"},
		{name: "s3 flag for a local trace", args: []string{"--target", target, "--s3-region", "x", "-o", out, "--", "true"}, wantCode: exitUsage, want: "--s3-region applies to s3:// traces"},
		{name: "command not found", args: []string{"--target", target, "-o", out, "--", "iotap-no-such-command"}, mounts: true, wantCode: exitNotFound, want: "iotap-no-such-command: command not found"},
		{name: "mount point inside target", args: []string{"--target", dir, "--mount-at", mnt, "-o", filepath.Join(t.TempDir(), "t.iotap"), "--", "true"}, mounts: true, wantCode: exitError, want: "must not contain each other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mounts {
				requireRecord(t)
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"record"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.wantCode, tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed check left %s behind", out)
				_ = os.Remove(out)
			}
		})
	}
}

// TestRecordOptions checks that the layer options reach the layer and the header.
func TestRecordOptions(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	// The directory of -o is created (placeholders can name a new one per job).
	out := filepath.Join(t.TempDir(), "per-job", "%j", "t.iotap")
	p := startIotap(t, dir, "record", "-o", out, "--comm", "cat", "--stats-interval", "50ms", "--cache", "kernel", "--drop-when-full", "--",
		"sh", "-c", `echo hi > f; i=0; while [ $i -lt 20 ]; do cat f >/dev/null; sleep 0.01; i=$((i+1)); done`)
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("exit %d; stderr %s", code, p.stderr)
	}
	if !liveLineRE.MatchString(p.stderr.String()) {
		t.Errorf("no live stats line:\n%s", p.stderr)
	}
	tc := readTrace(t, strings.Replace(out, "%j", "nojob", 1))
	if tc.hdr.FUSE.Cache != "kernel" || tc.hdr.FUSE.DirectIO {
		t.Errorf("FUSE options %+v", tc.hdr.FUSE)
	}
	if len(tc.events) == 0 {
		t.Fatal("no events")
	}
	// Each kept op follows its thread's record, which dates from the thread's first op. The
	// kernel sends a cat's RELEASE as cat exits: it is kept and attributed to cat too.
	for _, e := range tc.events {
		if e.Comm != "cat" {
			t.Fatalf("--comm cat recorded an op by %q: %+v", e.Comm, e)
		}
		if e.FirstSeen > e.Start {
			t.Errorf("op %+v: its thread's record is first seen after it", e)
		}
	}
	if n := tc.count(trace.OpOpen); n != 20 || tc.count(trace.OpRelease) != n {
		t.Errorf("%d opens and %d releases recorded, want 20 of each:\n%s", n, tc.count(trace.OpRelease), tc.dump())
	}
}

// TestRecordThreads: the requests of a thread a program starts are the program's (its name,
// process and executable), and a --comm filter naming the program keeps them.
func TestRecordThreads(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "python3")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The main thread writes main.txt, a thread it starts reads data.txt five times.
	script := `import threading
with open("main.txt", "w") as f: f.write("main\n")
def reader():
    for _ in range(5):
        with open("data.txt") as f: f.read()
th = threading.Thread(target=reader); th.start(); th.join()`
	for _, filter := range []bool{false, true} {
		t.Run(fmt.Sprintf("comm filter %v", filter), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "t.iotap")
			args := []string{"record", "-o", out}
			if filter {
				args = append(args, "--comm", "python3")
			}
			p := startIotap(t, dir, append(args, "--", "python3", "-c", script)...)
			_ = p.stdin.Close()
			if code, _ := p.wait(t); code != 0 {
				t.Fatalf("exit %d; stderr %s", code, p.stderr)
			}
			tc := readTrace(t, out)
			var main, thread *recorded
			reads := 0
			for i, e := range tc.events {
				switch {
				case (e.Op == trace.OpCreate || e.Op == trace.OpOpen) && e.Path == "main.txt":
					main = &tc.events[i]
				case e.Op == trace.OpRead && e.Path == "data.txt":
					thread = &tc.events[i]
					reads++
				}
			}
			if main == nil || thread == nil {
				t.Fatalf("no open of main.txt or no read of data.txt; events:\n%s", tc.dump())
			}
			if reads < 5 {
				t.Errorf("%d reads of data.txt recorded, want at least 5", reads)
			}
			if thread.Tid == main.Tid || thread.Pid != main.Pid || thread.Comm != "python3" || thread.Comm != main.Comm || thread.Exe != main.Exe {
				t.Errorf("thread's read %+v, want the main thread's process, name and executable: %+v", *thread, *main)
			}
		})
	}
}

// TestRecordAsUnprivilegedUser runs iotap as nobody: in place needs root (the error says
// so); --mount-at works through fusermount3 when /dev/fuse is open to all users, and
// otherwise says that /dev/fuse is what is missing.
func TestRecordAsUnprivilegedUser(t *testing.T) {
	requireRecord(t)
	st, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	fuseForAll := st.Mode().Perm()&0o006 == 0o006
	// A world-readable copy of the binary and directories nobody can use.
	base, err := os.MkdirTemp("", "iotap-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	bin := filepath.Join(base, "iotap")
	data, err := os.ReadFile(iotapBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"data", "mnt", "out"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(base, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(base, "out", "t.iotap")
	mountAt := struct {
		code int
		want string
	}{1, "FUSE is not available: cannot open /dev/fuse"}
	if fuseForAll {
		mountAt.code, mountAt.want = 0, "job exit 0"
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "in place", args: []string{"record", "-o", out, "--target", filepath.Join(base, "data"), "--", "true"}, code: 1, want: "needs root"},
		{name: "mount-at", args: []string{"record", "-o", out, "--target", filepath.Join(base, "data"), "--mount-at", filepath.Join(base, "mnt"), "--",
			"sh", "-c", "echo x > " + filepath.Join(base, "mnt", "f")}, code: mountAt.code, want: mountAt.want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, tt.args...)
			cmd.Dir = base
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			got, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				t.Fatal(err)
			}
			if cmd.ProcessState.ExitCode() != tt.code || !strings.Contains(string(got), tt.want) {
				t.Errorf("exit %d, output %q; want exit %d and %q", cmd.ProcessState.ExitCode(), got, tt.code, tt.want)
			}
		})
	}
	if fuseForAll {
		if data, err := os.ReadFile(filepath.Join(base, "data", "f")); err != nil || string(data) != "x\n" {
			t.Errorf("file written by nobody through --mount-at: %q %v", data, err)
		}
		if tc := readTrace(t, out); !tc.has(trace.OpCreate, "f", "sh") {
			t.Errorf("trace lacks the create:\n%s", tc.dump())
		}
	}
}
