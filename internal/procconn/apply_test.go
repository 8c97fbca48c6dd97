package procconn

import "testing"

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

	// A new thread of the child: same process, the process's parent.
	r.applyLocked(&Event{Kind: KindFork, ParentPid: 101, ParentTgid: 101, Pid: 102, Tgid: 101})
	if e := r.m[102]; e == nil || e.pid != 101 || e.ppid != 100 || e.comm != "sh" {
		t.Errorf("thread: %+v", e)
	}

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
