package procconn

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/testenv"
)

// startResolver starts a resolver whose reports go to the returned channel; it skips the
// test where the proc connector cannot be subscribed to (not root).
func startResolver(t *testing.T, keep func(string) bool) (*Resolver, <-chan Thread) {
	t.Helper()
	ch := make(chan Thread, 64)
	r, err := Start(Config{Report: func(th Thread, _ int64) { ch <- th }, Keep: keep})
	if err != nil {
		testenv.Root(t, testenv.FUSE, "subscribing to the proc connector")
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, ch
}

// report waits for the report of tid (at most 10 s).
func report(t *testing.T, ch <-chan Thread, tid int) Thread {
	t.Helper()
	return reportAs(t, ch, tid, "")
}

// reportAs waits for the report of tid naming comm (any name when comm is ""), at most 10 s.
func reportAs(t *testing.T, ch <-chan Thread, tid int, comm string) Thread {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case th := <-ch:
			if th.Tid == uint32(tid) && (comm == "" || th.Comm == comm) {
				return th
			}
		case <-deadline:
			t.Fatalf("no report of thread %d", tid)
		}
	}
}

func startCmd(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(name, args...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

func exePath(t *testing.T, name string) string {
	t.Helper()
	testenv.Programs(t, testenv.FUSE, name)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = filepath.EvalSymlinks(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// startThread starts python3 with a second thread, waiting on its stdin until the test
// ends, and returns the process and that thread's id.
func startThread(t *testing.T) (*exec.Cmd, int) {
	t.Helper()
	exePath(t, "python3")
	c := exec.Command("python3", "-c", `import sys, threading
def run():
    sys.stdout.write("%d\n" % threading.get_native_id()); sys.stdout.flush()
    sys.stdin.readline()
th = threading.Thread(target=run); th.start(); th.join()`)
	in, _ := c.StdinPipe()
	outp, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = c.Wait() })
	var tid int
	if _, err := fmt.Fscan(bufio.NewReader(outp), &tid); err != nil {
		t.Fatal(err)
	}
	return c, tid
}

func TestResolverPrograms(t *testing.T) {
	sleepExe := exePath(t, "sleep")
	old := startCmd(t, "sleep", "60") // before the subscription
	r, ch := startResolver(t, nil)

	c := startCmd(t, "sleep", "60")
	pid := c.Process.Pid
	if got, keep := r.Use(uint32(pid), 1); got != uint32(pid) || !keep {
		t.Errorf("Use(new sleep) = %d, %v; want %d, true", got, keep, pid)
	}
	// The first Use may find only the fork's copy of the test process when exec's event is
	// still on its way to the table (the resolver's goroutine holds it); the thread is
	// reported again as sleep once it arrives.
	if th := reportAs(t, ch, pid, "sleep"); th.Pid != uint32(pid) || th.PPid != uint32(os.Getpid()) || th.Exe != sleepExe || th.Cmdline != "sleep\x0060\x00" {
		t.Errorf("new sleep: %+v, want pid %d, parent %d, comm sleep, exe %s, command line sleep 60", th, pid, os.Getpid(), sleepExe)
	}
	if got, _ := r.Use(uint32(pid), 2); got != uint32(pid) {
		t.Errorf("second Use = %d", got)
	}

	// A process that existed before: its main thread's pid at once, its record late.
	opid := old.Process.Pid
	if got, _ := r.Use(uint32(opid), 3); got != uint32(opid) {
		t.Errorf("Use(old sleep) = %d, want %d", got, opid)
	}
	if th := report(t, ch, opid); th.Pid != uint32(opid) || th.Comm != "sleep" || th.Exe != sleepExe || th.PPid != uint32(os.Getpid()) || th.Cmdline != "sleep\x0060\x00" {
		t.Errorf("old sleep: %+v", th)
	}
	// A Use that comes before the kernel's events of the new sleep reach the table (a
	// loaded machine) reports it once more, as the fork's copy or read in the request's path.
	// The old sleep is late unless the resolver entered it with its own process's children
	// when it subscribed.
	if st := r.Stats(); st.Late > 1 || st.Missing != 0 || st.Threads < 2 || st.Threads > 3 {
		t.Errorf("stats %+v, want 2 threads (3 when the first Use came before exec's event), at most 1 late, 0 missing", st)
	}

	// Exit: the thread leaves the table.
	_ = c.Process.Kill()
	_ = c.Wait()
	r.mu.Lock()
	r.drainLocked()
	_, ok := r.m[uint32(pid)]
	r.mu.Unlock()
	if ok {
		t.Errorf("thread %d still in the table after its exit", pid)
	}
	if w := r.cache[uint32(pid)%cacheSize].Load(); uint32(w>>32) == uint32(pid) {
		t.Errorf("thread %d still in the cache after its exit", pid)
	}
}

// TestResolverRename: a thread that renames itself with prctl(PR_SET_NAME) after its first
// use is reported again with its new name.
func TestResolverRename(t *testing.T) {
	exePath(t, "python3")
	r, ch := startResolver(t, nil)
	c := exec.Command("python3", "-c", `import ctypes, sys
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
ctypes.CDLL(None).prctl(15, b"renamed", 0, 0, 0)
sys.stdout.write("renamed\n"); sys.stdout.flush()
sys.stdin.readline()`)
	in, _ := c.StdinPipe()
	outp, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(); _ = c.Wait() })
	out := bufio.NewReader(outp)
	line := func() {
		if _, err := out.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	line()
	pid := c.Process.Pid
	r.Use(uint32(pid), 1)
	if th := report(t, ch, pid); th.Comm != "python3" {
		t.Errorf("before the rename: %+v", th)
	}
	_, _ = io.WriteString(in, "go\n")
	line()
	if th := report(t, ch, pid); th.Comm != "renamed" || th.Pid != uint32(pid) || th.Exe == "" {
		t.Errorf("after the rename: %+v", th)
	}
}

// TestResolverKeep: the name filter decides on a thread's current name.
func TestResolverKeep(t *testing.T) {
	r, ch := startResolver(t, func(comm string) bool { return comm == "sleep" })
	a := startCmd(t, "sleep", "60")
	b := startCmd(t, "tail", "-f", "/dev/null")
	if _, keep := r.Use(uint32(a.Process.Pid), 1); !keep {
		t.Errorf("sleep not kept")
	}
	if _, keep := r.Use(uint32(b.Process.Pid), 1); keep {
		t.Errorf("tail kept")
	}
	report(t, ch, a.Process.Pid)
}

// TestResolverThreads: a thread a program starts is the program's (its name, executable,
// process and parent), though the kernel's fork event names the process's parent.
func TestResolverThreads(t *testing.T) {
	exePath(t, "python3")
	r, ch := startResolver(t, nil)
	c, tid := startThread(t)
	pid := c.Process.Pid
	if tid == pid {
		t.Fatalf("thread id %d is the process's", tid)
	}
	pyExe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)) // python3 may be a launcher that execs another
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Use(uint32(tid), 1); got != uint32(pid) {
		t.Errorf("Use(thread) = %d, want %d", got, pid)
	}
	if th := report(t, ch, tid); th.Pid != uint32(pid) || th.PPid != uint32(os.Getpid()) || th.Comm != "python3" || th.Exe != pyExe {
		t.Errorf("thread: %+v, want pid %d, parent %d, comm python3, exe %s", th, pid, os.Getpid(), pyExe)
	}
}
