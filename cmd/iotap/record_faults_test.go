package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
)

// TestRecordStopped stops iotap record while its job runs, in place and with --mount-at:
// killed (SIGKILL), its recorder killed (SIGKILL: the process that serves the layer and
// runs the job, as the OOM killer might), or told to stop (SIGTERM). Each time the whole job
// must end with it, promptly: its command and the background process the command started.
// The trace must be readable: whole, with its footer, when the recorder could close it;
// up to its last chunk when the recorder itself was killed, and then a replay replays
// what it holds.
func TestRecordStopped(t *testing.T) {
	requireRecord(t)
	for _, mode := range []string{"in place", "mount-at"} {
		for _, stop := range []string{"SIGKILL iotap", "SIGKILL recorder", "SIGTERM iotap"} {
			t.Run(mode+"/"+stop, func(t *testing.T) { testRecordStopped(t, mode == "in place", stop) })
		}
	}
}

func testRecordStopped(t *testing.T, inPlace bool, stop string) {
	dir := t.TempDir()
	target, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "view")
	for _, d := range []string{target, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "t.iotap")
	args := []string{"record", "-o", out, "--stats-interval", "50ms"} // the trace is flushed every 25 ms
	cwd := target
	if !inPlace {
		args = append(args, "--target", target, "--mount-at", mnt)
		cwd = mnt
	}
	// The job: five files, a flush's worth of waiting, then a background process it waits
	// for. It prints its shell's pid, its parent's (the recorder) and the background one's.
	script := `for i in 1 2 3 4 5; do echo x > f$i; done; sleep 0.5; sleep 1000 & echo $$ $PPID $!; wait`
	p := startIotap(t, cwd, append(args, "--", "sh", "-c", script)...)
	pids := strings.Fields(p.readLine(t))
	if len(pids) != 3 {
		t.Fatalf("job printed %q; stderr: %s", pids, p.stderr)
	}
	sh, recorder, bg := atoi(t, pids[0]), atoi(t, pids[1]), atoi(t, pids[2])
	job := map[string]int{"the job's shell": sh, "its background sleep": bg}
	fds := map[string]int{}
	for name, pid := range job {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd of %s: %v", name, err)
		}
		t.Cleanup(func() {
			if alive(fd) {
				_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			}
			_ = unix.Close(fd)
		})
		fds[name] = fd
	}

	t0 := time.Now()
	var err error
	switch stop {
	case "SIGKILL iotap":
		err = p.cmd.Process.Signal(syscall.SIGKILL)
	case "SIGKILL recorder":
		err = syscall.Kill(recorder, syscall.SIGKILL)
	case "SIGTERM iotap":
		err = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, fd := range fds {
		if !exits(fd, 10*time.Second) {
			t.Errorf("%s (pid %d) still runs 10 s after %s", name, job[name], stop)
		}
	}
	t.Logf("%s: the job's processes ended %v after the signal", stop, time.Since(t0).Round(time.Millisecond))
	_ = p.stdin.Close()
	code, _ := p.wait(t)
	stderr := p.stderr.String()
	want := map[string]int{"SIGKILL iotap": 137, "SIGKILL recorder": 137, "SIGTERM iotap": 143}[stop]
	if code != want {
		t.Errorf("iotap record exit %d, want %d; stderr:\n%s", code, want, stderr)
	}
	for _, w := range map[string][]string{
		"SIGKILL iotap":    {"iotap record died: ending the job", "job killed by SIGKILL, ended when iotap record died"},
		"SIGKILL recorder": {"recorder killed by SIGKILL; ended what was left of the job ("},
		"SIGTERM iotap":    {"ended what the job left running (1 processes)", "job killed by SIGTERM"},
	}[stop] {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if !inPlace {
		if m, ok, err := sysinfo.IsMountPoint(mnt); err != nil || ok {
			t.Errorf("%s is still a mount point (%+v, %v)", mnt, m, err)
		}
	}

	tc := readTrace(t, out)
	if tc.footer != (stop != "SIGKILL recorder") {
		t.Errorf("footer %v, damage %v", tc.footer, tc.damage)
	}
	if n := tc.count(trace.OpCreate); n != 5 {
		t.Errorf("trace has %d creates, want 5 (flushed before the signal); events:\n%s", n, tc.dump())
	}
	if stop != "SIGKILL recorder" {
		return
	}
	// Killed mid-job, the recording replays up to its last chunk: cut short is not corrupt.
	tgt := filepath.Join(dir, "replayed")
	if err := os.Mkdir(tgt, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, rstderr := runIotap(t, nil, "replay", "--target", tgt, "-o", filepath.Join(dir, "res"), out)
	if code != exitDamaged || !strings.Contains(rstderr, "was cut short") || !strings.Contains(stdout, "run 1/1") {
		t.Errorf("replay of the killed recording: exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, rstderr)
	}
	for i := 1; i <= 5; i++ {
		if _, err := os.Stat(filepath.Join(tgt, fmt.Sprintf("f%d", i))); err != nil {
			t.Errorf("replay of the killed recording: %v", err)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// exits waits up to d for the process of pidfd fd to exit.
func exits(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return !alive(fd)
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// alive reports whether the process of pidfd fd still runs.
func alive(fd int) bool {
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
	return err == nil && n == 0
}

// TestRecordBackendGone records a job on a FUSE file system whose daemon is then killed (a
// storage client that dies: s3fs, mfsmount; here an `iotap mount` view). The job's calls
// through the layer must fail as they fail natively (ENOTCONN, or ECONNABORTED for one in
// flight), not hang, and the recording must end as usual: the job's exit code, the trace
// closed with its footer and holding the failed calls.
func TestRecordBackendGone(t *testing.T) {
	requireRecord(t)
	data, backend, _ := mountDirs(t)
	srv := startMount(t, data, backend, filepath.Join(t.TempDir(), "backend.iotap"))
	t.Cleanup(func() { _ = unix.Unmount(backend, unix.MNT_DETACH) }) // its server killed below
	out := filepath.Join(t.TempDir(), "t.iotap")
	script := `cat in; echo ready; read x; cat in 2>&1; echo "cat exit $?"; echo new > f 2>&1; echo done; exit 3`
	p := startIotap(t, backend, "record", "-o", out, "--", "sh", "-c", script)
	if l := p.readLine(t); l != "input" {
		t.Fatalf("job read %q through the layer; stderr: %s", l, p.stderr)
	}
	if l := p.readLine(t); l != "ready" {
		t.Fatalf("got %q; stderr: %s", l, p.stderr)
	}
	if err := srv.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = srv.Wait()
	_, _ = io.WriteString(p.stdin, "go\n")
	_ = p.stdin.Close()
	code, rest := p.wait(t)
	if code != 3 || !strings.Contains(rest, "cat exit 1") || !strings.Contains(rest, "done") {
		t.Errorf("exit %d, job output after the backend died %q; want exit 3, a failed cat, then done; stderr:\n%s", code, rest, p.stderr)
	}
	if !strings.Contains(rest, "not connected") && !strings.Contains(rest, "connection abort") {
		t.Errorf("job output %q lacks ENOTCONN or ECONNABORTED", rest)
	}
	tc := readTrace(t, out)
	if !tc.footer || len(tc.damage) > 0 {
		t.Errorf("footer %v, damage %v", tc.footer, tc.damage)
	}
	failed := 0
	for _, e := range tc.events {
		if e.Errno == uint16(syscall.ENOTCONN) || e.Errno == uint16(syscall.ECONNABORTED) {
			failed++
		}
	}
	if failed == 0 {
		t.Errorf("no call failed with ENOTCONN or ECONNABORTED in the trace:\n%s", tc.dump())
	}
}

// TestRecordNativeFirstStopped stops iotap record while it runs the job without the layer
// first (--native-first): the job's command ends with iotap whether iotap is killed or told
// to stop, and on SIGTERM so does the background process the command started.
func TestRecordNativeFirstStopped(t *testing.T) {
	requireRecord(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := startIotap(t, dir, "record", "--native-first", "-o", filepath.Join(t.TempDir(), "t.iotap"), "--",
				"sh", "-c", `sleep 1000 & echo $$ $!; wait`)
			pids := strings.Fields(p.readLine(t))
			if len(pids) != 2 {
				t.Fatalf("job printed %q; stderr: %s", pids, p.stderr)
			}
			procs := map[string]int{"the job's shell": atoi(t, pids[0])}
			if sig == syscall.SIGTERM {
				procs["its background sleep"] = atoi(t, pids[1])
			} else {
				// Nothing of iotap is left to end it: killed at once by the test.
				t.Cleanup(func() { _ = syscall.Kill(atoi(t, pids[1]), syscall.SIGKILL) })
			}
			fds := map[string]int{}
			for name, pid := range procs {
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					t.Fatalf("pidfd of %s: %v", name, err)
				}
				t.Cleanup(func() { _ = unix.Close(fd) })
				fds[name] = fd
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			for name, fd := range fds {
				if !exits(fd, 10*time.Second) {
					t.Errorf("%s still runs 10 s after %v", name, sig)
				}
			}
			_ = p.stdin.Close()
			if sig == syscall.SIGKILL {
				_ = syscall.Kill(atoi(t, pids[1]), syscall.SIGKILL) // lets stdout close
			}
			if code, _ := p.wait(t); code != 128+int(sig) {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, 128+int(sig), p.stderr)
			}
		})
	}
}
