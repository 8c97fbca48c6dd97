package fusefs_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// latestProcs returns the last process record of each thread (what a trace reader keeps).
func latestProcs(rec *fusetest.MemRecorder) map[uint32]trace.Process {
	m := map[uint32]trace.Process{}
	for _, p := range rec.Processes() {
		m[p.Tid] = p
	}
	return m
}

func lookExe(t *testing.T, name string) string {
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

// TestAttributionShortProcesses records a shell loop that starts 200 short processes: every
// event names a cat (or the shell) by its own pid, with its name, executable and parent.
func TestAttributionShortProcesses(t *testing.T) {
	catExe := lookExe(t, "cat")
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{})
	if err := os.WriteFile(filepath.Join(c.Orig, "f"), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 200
	// The shell enters the mount itself: a child's chdir between fork and exec would
	// block the serving process in vfork.
	cmd := exec.Command("sh", "-c", `cd "$1" && for i in $(seq 200); do cat f >/dev/null; done`, "sh", c.Mnt)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sh := uint32(cmd.Process.Pid)
	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	c.Server.Wait()

	procs := latestProcs(rec)
	cats := map[uint32]bool{}
	for _, e := range rec.Events() {
		if e.Tid == 0 || e.Pid == uint32(os.Getpid()) {
			continue // FORGET; the test's own stat of the mount point
		}
		p, ok := procs[e.Tid]
		switch {
		case !ok:
			t.Errorf("%v of thread %d: no process record", e.Op, e.Tid)
		case p.Pid != e.Pid || e.Pid != e.Tid:
			t.Errorf("%v of thread %d: pid %d, record %+v", e.Op, e.Tid, e.Pid, p)
		case p.Comm == "cat" && p.Exe == catExe && p.PPid == sh && slices.Equal(p.Cmdline, []string{"cat", "f"}):
			cats[e.Pid] = true
		case p.Comm == "sh" && e.Pid == sh && len(p.Cmdline) == 5 && p.Cmdline[0] == "sh" && p.Cmdline[4] == c.Mnt:
		default:
			t.Errorf("%v of thread %d: record %+v, want cat f (%s, parent %d) or sh (pid %d)", e.Op, e.Tid, p, catExe, sh, sh)
		}
	}
	if len(cats) != n {
		t.Errorf("events from %d cat processes, want %d", len(cats), n)
	}
	cost := c.Server.Cost()
	if !cost.Connector {
		testenv.Skip(t, testenv.FUSE, "the proc connector is not available here: attribution read /proc in requests' paths")
	}
	if cost.Missing != 0 || cost.Threads < n {
		t.Errorf("attribution: %d threads, %d missing; want ≥ %d, 0", cost.Threads, cost.Missing, n)
	}
}

// TestAttributionRename: a process that renames itself with prctl(PR_SET_NAME) after its
// first request has its new name in the trace.
func TestAttributionRename(t *testing.T) {
	lookExe(t, "python3")
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{})
	if err := os.WriteFile(filepath.Join(c.Orig, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", `import ctypes, os, sys
os.chdir(sys.argv[1])
open("f").read()
ctypes.CDLL(None).prctl(15, b"renamed", 0, 0, 0)
open("f").read()
os.stat("f")`, c.Mnt)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	c.Server.Wait()
	pid := uint32(cmd.Process.Pid)
	var names []string
	for _, p := range rec.Processes() {
		if p.Tid == pid {
			names = append(names, p.Comm)
		}
	}
	// Before python3: the forked child (the test's name) and any wrapper scripts.
	if n := len(names); n < 2 || names[n-2] != "python3" || names[n-1] != "renamed" {
		t.Errorf("process records of pid %d: names %q, want python3 then renamed last", pid, names)
	}
	if !c.Server.Cost().Connector {
		testenv.Skip(t, testenv.FUSE, "the proc connector is not available here")
	}
}
