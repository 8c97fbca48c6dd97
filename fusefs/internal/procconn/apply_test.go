package procconn

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestApply: the table follows fork, exec, rename and exit events, and a change of a thread
// empties its cache slot (no socket: the events are applied as the socket would deliver them).
func TestApply(t *testing.T) {
	var got []Thread
	r := &Resolver{m: map[uint32]*entry{}, closed: true, self: 1,
		cfg: Config{Report: func(th Thread, _ int64) { got = append(got, th) }}}
	r.m[100] = &entry{pid: 100, ppid: 1, comm: "sh", exe: "/bin/sh", known: true}

	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: 101, Tgid: 101})
	if pid, _ := r.Use(101, 5); pid != 101 || len(got) != 1 || got[0] != (Thread{Tid: 101, Pid: 101, PPid: 100, Comm: "sh", Exe: "/bin/sh"}) {
		t.Fatalf("forked child: pid %d, reports %+v", pid, got)
	}
	if w := r.cache[101%cacheSize].Load(); uint32(w>>32) != 101 {
		t.Errorf("forked child not cached: %x", w)
	}

	// A new thread of a program the child started: the kernel's event names the real
	// parent of the thread, which is the parent of its process (sh), not the program. The
	// thread is the program's.
	r.m[101].comm, r.m[101].exe = "python3", "/usr/bin/python3"
	r.forgetLocked(101)
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: 102, Tgid: 101})
	if e := r.m[102]; e == nil || e.pid != 101 || e.ppid != 100 || e.comm != "python3" || e.exe != "/usr/bin/python3" {
		t.Errorf("thread: %+v", e)
	}
	// A new thread of a process the resolver does not know is read in its first request.
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: 302, Tgid: 301})
	if e := r.m[302]; e == nil || e.pid != 301 || e.known || r.m[301] != nil {
		t.Errorf("thread of an unknown process: %+v (process %+v)", e, r.m[301])
	}
	delete(r.m, 302)

	// The used child execs: its slot empties, the new program is queued for a read and
	// counts as used.
	r.applyLocked(&Event{Kind: KindExec, Pid: 101, Tgid: 101})
	if w := r.cache[101%cacheSize].Load(); w != 0 {
		t.Errorf("slot after exec: %x", w)
	}
	e := r.m[101]
	if e == nil || e.known || !e.used || !e.queued || e.ppid != 100 || len(r.jobs) != 1 || r.jobs[0].all {
		t.Errorf("after exec: %+v, jobs %+v", e, r.jobs)
	}

	// A rename of a known, used thread is reported at once.
	r.m[103] = &entry{pid: 103, ppid: 100, comm: "python3", exe: "/usr/bin/python3", known: true, used: true, reported: true}
	r.applyLocked(&Event{Kind: KindComm, Pid: 103, Tgid: 103, Comm: "renamed"})
	if last := got[len(got)-1]; last.Tid != 103 || last.Comm != "renamed" || last.Exe != "/usr/bin/python3" {
		t.Errorf("rename: reports %+v", got)
	}

	// Exits leave the table and the cache.
	for _, tid := range []uint32{101, 102, 103} {
		r.applyLocked(&Event{Kind: KindExit, Pid: tid, Tgid: tid})
		if _, ok := r.m[tid]; ok {
			t.Errorf("thread %d in the table after its exit", tid)
		}
	}
	if len(r.m) != 1 {
		t.Errorf("%d threads left, want 1", len(r.m))
	}

	// A fork by a thread the resolver does not know queues that thread's read.
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 200, ParentTgid: 200, Pid: 201, Tgid: 201})
	if p := r.m[200]; p == nil || !p.queued || !p.all || r.m[201] == nil || r.m[201].known {
		t.Errorf("fork by an unknown thread: parent %+v child %+v", p, r.m[201])
	}

	// Lost events: everything is unknown again.
	r.cache[5].Store(5<<32 | 5<<1)
	r.overflowLocked()
	if len(r.m) != 0 || r.cache[5].Load() != 0 || r.stats.Overflows != 1 {
		t.Errorf("after an overflow: %d threads, slot %x, stats %+v", len(r.m), r.cache[5].Load(), r.stats)
	}
}

// TestApplyAfterExit: a request that reaches the resolver after its thread's exit event (the
// kernel sends a file's RELEASE on behalf of a thread that closed it in its exit, after the
// thread is gone) is attributed as the thread was, and no second identity is reported.
func TestApplyAfterExit(t *testing.T) {
	var got []Thread
	r := &Resolver{m: map[uint32]*entry{}, closed: true, self: 1,
		cfg: Config{Report: func(th Thread, _ int64) { got = append(got, th) }, Keep: func(comm string) bool { return comm == "cat" }}}
	const tid = 1 << 30 // above any pid_max: never a live thread
	r.m[100] = &entry{pid: 100, ppid: 1, comm: "sh", exe: "/bin/sh", known: true, watch: true}
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: tid, Tgid: tid})
	r.m[tid].comm, r.m[tid].exe, r.m[tid].forked = "cat", "/bin/cat", false // as exec and its read make it
	if pid, keep := r.Use(tid, 5); pid != tid || !keep || len(got) != 1 {
		t.Fatalf("live cat: pid %d keep %v, reports %+v", pid, keep, got)
	}
	r.applyLocked(&Event{Kind: KindExit, Pid: tid, Tgid: tid})
	if pid, keep := r.Use(tid, 9); pid != tid || !keep {
		t.Errorf("request after exit: pid %d keep %v, want %d true", pid, keep, tid)
	}
	if len(got) != 1 || len(r.jobs) != 0 {
		t.Errorf("request after exit: reports %+v, jobs %+v; want the one report, no read", got, r.jobs)
	}

	// A known thread of the job that never used the mount (it inherited a handle) is
	// reported at its first request, after its exit too.
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: tid + 1, Tgid: tid + 1})
	r.applyLocked(&Event{Kind: KindExit, Pid: tid + 1, Tgid: tid + 1})
	if pid, keep := r.Use(tid+1, 12); pid != tid+1 || keep || len(got) != 2 || got[1] != (Thread{Tid: tid + 1, Pid: tid + 1, PPid: 100, Comm: "sh", Exe: "/bin/sh"}) {
		t.Errorf("exited child's first request: pid %d keep %v, reports %+v", pid, keep, got)
	}

	// The id of an exited thread taken by a new thread is the new thread's.
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 100, ParentTgid: 100, Pid: tid, Tgid: tid})
	r.applyLocked(&Event{Kind: KindExit, Pid: tid, Tgid: tid})
	if e := r.gone.find(tid); e == nil || e.comm != "sh" {
		t.Errorf("reused id after exit: %+v", e)
	}
}

// TestKeepUnknownThread: when the name filter meets a thread the resolver does not know (a
// process older than the subscription), the thread's whole identity is read in the request's
// path and reported before Use returns, so a kept request never precedes its thread's record.
func TestKeepUnknownThread(t *testing.T) {
	sleepExe := exePath(t, "sleep")
	c := startCmd(t, "sleep", "60")
	pid := uint32(c.Process.Pid)
	execd(t, pid)
	var got []Thread
	r := &Resolver{m: map[uint32]*entry{}, closed: true, self: 1,
		cfg: Config{Report: func(th Thread, _ int64) { got = append(got, th) }, Keep: func(comm string) bool { return comm == "sleep" }}}
	if p, keep := r.Use(pid, 5); p != pid || !keep {
		t.Errorf("Use = %d, %v; want %d, true", p, keep, pid)
	}
	want := Thread{Tid: pid, Pid: pid, PPid: uint32(os.Getpid()), Comm: "sleep", Exe: sleepExe, Cmdline: "sleep\x0060\x00"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("reports %+v, want %+v at once", got, want)
	}
	if st := r.Stats(); st.Late != 0 || st.InPathReads != 1 {
		t.Errorf("stats %+v, want one in-path read, nothing late", st)
	}
}

// TestUnknownProcessThread: the first request of a thread whose process started before
// the resolver subscribed (no fork event named its process) is attributed to its process at
// once, not to none (the kernel's requests), and reported before it returns.
func TestUnknownProcessThread(t *testing.T) {
	c, tid := startThread(t)
	pid := uint32(c.Process.Pid)
	var got []Thread
	r := &Resolver{m: map[uint32]*entry{}, closed: true, self: 1,
		cfg: Config{Report: func(th Thread, _ int64) { got = append(got, th) }}}
	if p, _ := r.Use(uint32(tid), 5); p != pid {
		t.Errorf("Use(thread) = %d, want its process %d", p, pid)
	}
	if len(got) != 1 || got[0].Tid != uint32(tid) || got[0].Pid != pid || got[0].Comm != "python3" {
		t.Errorf("reports %+v, want thread %d of process %d (python3) at once", got, tid, pid)
	}
}

// TestCmdline: a command line is read as far as MaxCmdline and split at its NUL bytes; a
// fork's copy of its parent keeps the parent's.
func TestCmdline(t *testing.T) {
	for _, tc := range []struct {
		name string
		raw  string
		want []string
	}{
		{"empty", "", nil},
		{"args", "sqlite3\x00db\x00\x00", []string{"sqlite3", "db", ""}},
		{"cut short", "sqlite3\x00dat", []string{"sqlite3", "dat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SplitCmdline(tc.raw); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("SplitCmdline(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
	exePath(t, "sh")
	// The long argument is the shell's $1, which it leaves alone: it lives on (a program
	// that refused the argument would exit, and leave no command line to read).
	long := strings.Repeat("a", 3*MaxCmdline)
	script := "sleep 60; :"
	c := startCmd(t, "sh", "-c", script, "sh", long)
	execd(t, uint32(c.Process.Pid))
	raw, err := ReadCmdline(uint32(c.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if want := ("sh\x00-c\x00" + script + "\x00sh\x00" + long)[:MaxCmdline]; raw != want {
		t.Errorf("ReadCmdline of a long command line: %d bytes %.40q..., want the first %d", len(raw), raw, MaxCmdline)
	}

	r := &Resolver{m: map[uint32]*entry{}, closed: true, self: 1}
	r.m[100] = &entry{pid: 100, ppid: 1, comm: "sh", exe: "/bin/sh", cmdline: "sh\x00job.sh\x00", known: true}
	r.applyLocked(&Event{Kind: KindFork, Pid: 101, Tgid: 101, ParentPid: 100, ParentTgid: 100})
	if e := r.m[101]; e == nil || e.cmdline != "sh\x00job.sh\x00" {
		t.Errorf("fork's copy: %+v, want the parent's command line", e)
	}
}

// execd waits until the process pid has its command line, which its exec sets up after
// its name and executable: a request could not come earlier.
func execd(t *testing.T, pid uint32) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if c, err := ReadCmdline(pid); err == nil && c != "" {
			return
		}
	}
	t.Fatalf("process %d has no command line after 10s", pid)
}
