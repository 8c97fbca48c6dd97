// Package procconn tells which process a thread id belongs to, from the kernel's proc
// connector, without reading /proc on the caller's path.
//
// A [Resolver] subscribes to the proc connector (netlink NETLINK_CONNECTOR, multicast group
// CN_IDX_PROC; needs CAP_NET_ADMIN in the initial namespaces) and keeps a table of the
// host's threads: fork events give a new thread its process, parent, name and executable
// (a new process's from the forking thread; a new thread's from its process's main thread,
// since the event names the process's parent, not the creating thread), comm events a new name, exit events remove the
// thread (memory follows the live threads). An exited thread of the job or one that used the
// mount is kept apart for a few seconds more: the kernel sends requests on a thread's behalf
// after its exit event (a file's last close, in the thread's exit, sends RELEASE
// asynchronously with the thread's id), and they are attributed as the thread was, not as
// an unknown thread. An exec event leaves the name and executable unknown, as the kernel
// does not send them: when the thread descends from the resolver's own process (a job iotap
// started) or from a thread that used the mount, the resolver's goroutine reads them from
// /proc at once, while the program starts. Threads that existed
// before the subscription are unknown too (but the resolver's own, entered when it
// subscribes); the goroutine reads them (status and exe) when they first fork, exec or make
// a request.
//
// [Resolver.Use] is the call on a request's path. A hit in its direct-mapped cache is one
// atomic load. A miss takes the lock and reads the table; for a thread it does not know, it
// first applies the events the socket holds (the kernel queues a fork's event before the
// child runs and an exec's before the new program runs, so a thread's request never
// overtakes them). It reads /proc in two cases only: a program whose first request comes
// before the goroutine read it has its comm and exe link read there (two small reads; the
// program is alive, blocked in the request, where it could be gone by the time the goroutine
// reads; exec'd programs that are not watched and never use the mount are never read), and
// an unknown thread's whole identity is read when a name filter ([Config.Keep]) must decide
// at once (it is then reported before Use returns: a kept request never precedes its
// thread's identity).
//
// Each identity of a thread that made a request (its process and name, which an exec or
// a rename change) is handed to [Config.Report] once: at its first request when it is
// known, later ("late") when the goroutine learns it, or with what is known ("missing")
// when the thread was gone before /proc could be read.
package procconn

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thread is what the resolver knows of a thread.
type Thread struct {
	Tid, Pid, PPid uint32 // PPid is the parent of the process Pid
	Comm, Exe      string
	// Cmdline is the process's command line as /proc/<pid>/cmdline holds it (arguments
	// each ended by a NUL byte), at most MaxCmdline bytes of it (SplitCmdline splits it).
	Cmdline string
}

// Config configures a Resolver.
type Config struct {
	// Report receives each identity of a used thread once, with the time (the at of Use)
	// of its first request. It is called with the resolver's lock held, from Use or from the
	// resolver's goroutine: it must not call the Resolver.
	Report func(th Thread, firstSeen int64)
	// Keep, when set, decides from a thread's name whether its requests are recorded (Use's
	// keep); without it every thread is kept.
	Keep func(comm string) bool
	// RcvBuf is the socket's receive buffer (bytes); default 4 MiB. Events beyond it are
	// lost (Stats.Overflows) and the table is rebuilt from /proc as threads are used.
	RcvBuf int
}

// Stats count what the resolver did.
type Stats struct {
	Threads   uint64 // identities of used threads reported
	Late      uint64 // of which reported after their first request (learnt from /proc afterwards)
	Missing   uint64 // of which without a name or executable: the thread was gone before /proc was read
	Events    uint64 // connector events applied
	Overflows uint64 // times the socket's buffer overflowed (events were lost)
	ProcReads uint64 // threads read from /proc by the resolver's goroutine
	// Threads read from /proc in a request's path: a program's first request that came
	// before the goroutine had read it (its name and executable), and an unknown thread
	// for Config.Keep (its whole identity); and the time of those reads.
	InPathReads uint64
	InPath      time.Duration
}

// cacheSize is the number of slots of the direct-mapped cache in front of the table.
const cacheSize = 1024

// maxThreads bounds the table: beyond it (exit events lost in an overflow leave dead
// threads behind) the table is emptied and rebuilt as threads are used.
const maxThreads = 1 << 20

// entry is one thread.
type entry struct {
	pid, ppid uint32
	comm, exe string
	cmdline   string
	first     int64
	known     bool // comm and exe are known (else a /proc read is queued)
	all       bool // the queued read is of a thread that existed before the subscription
	watch     bool // a descendant of the resolver's process or of a used thread: its execs are read at once
	forked    bool // comm and exe are the forking thread's (an exec may be pending in the socket)
	queued    bool // a /proc read is queued
	used      bool // a request came from this identity (or from the thread before an exec or rename)
	late      bool // used before known
	missing   bool // the /proc read that made it known failed or found no executable
	reported  bool
	keepSet   bool
	keep      bool
}

// goneKeep is how long (at least) an exited thread stays in gone; goneMax bounds a
// generation under a high exit rate.
const (
	goneKeep = 2 * time.Second
	goneMax  = 1 << 16
)

// graveyard holds recently exited threads in two generations: an exited thread goes into
// cur; when cur is goneKeep old (or goneMax large) old is dropped and cur becomes old.
type graveyard struct {
	cur, old map[uint32]*entry
	since    time.Time // when cur was started
}

// bury keeps the exited thread tid.
func (g *graveyard) bury(tid uint32, e *entry) {
	now := time.Now()
	if g.cur == nil {
		g.cur, g.since = map[uint32]*entry{}, now
	} else if len(g.cur) >= goneMax || now.Sub(g.since) >= goneKeep {
		g.old, g.cur, g.since = g.cur, make(map[uint32]*entry, len(g.cur)), now
	}
	g.cur[tid] = e
}

// find returns the exited thread tid, or nil.
func (g *graveyard) find(tid uint32) *entry {
	if e := g.cur[tid]; e != nil {
		return e
	}
	return g.old[tid]
}

// forget drops tid: a new thread has its id.
func (g *graveyard) forget(tid uint32) {
	if len(g.cur) > 0 {
		delete(g.cur, tid)
	}
	if len(g.old) > 0 {
		delete(g.old, tid)
	}
}

// job is a /proc read for the goroutine.
type job struct {
	tid uint32
	e   *entry
	all bool // read status too (process and parent), not only name and executable
}

// Resolver attributes thread ids to processes; see the package doc.
type Resolver struct {
	cache [cacheSize]atomic.Uint64 // tid<<32 | pid<<1 | keep; 0 is empty; written under mu

	cfg  Config
	f    *os.File
	fd   int
	done chan struct{}
	wake chan struct{} // jobs queued by Use

	mu      sync.Mutex // guards everything below; taken by Use and the goroutine
	m       map[uint32]*entry
	gone    graveyard // exited threads whose requests may still come (see the package doc)
	jobs    []job
	evs     []Event
	buf     []byte
	closed  bool
	self    uint32 // this process's pid
	stats   Stats
	readErr error
}

// Start subscribes to the proc connector and starts the resolver's goroutine. It fails
// where the connector is not available (no CAP_NET_ADMIN, a non-initial namespace, a
// kernel without CONFIG_PROC_EVENTS).
func Start(cfg Config) (*Resolver, error) {
	if cfg.RcvBuf <= 0 {
		cfg.RcvBuf = 4 << 20
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("procconn: netlink socket: %w", err)
	}
	fail := func(what string, err error) (*Resolver, error) {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("procconn: %s: %w", what, err)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.RcvBuf) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.RcvBuf)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		return fail("bind to the proc connector", err)
	}
	if err := unix.Sendto(fd, mcastMsg(mcastListen), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fail("subscribe to the proc connector", err)
	}
	if err := probe(fd); err != nil {
		return fail("proc connector", err)
	}
	r := &Resolver{
		cfg: cfg, fd: fd, m: map[uint32]*entry{}, buf: make([]byte, 64<<10), self: uint32(os.Getpid()),
		done: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	r.f = os.NewFile(uintptr(fd), "procconn")
	r.seedSelf()
	go r.run()
	return r, nil
}

// seedSelf enters this process's threads, which existed before the subscription: the
// threads it starts later, and the jobs it runs, then inherit from them.
func (r *Resolver) seedSelf() {
	var buf [4096]byte
	st, err := ReadProc(r.self, "status", buf[:])
	if err != nil {
		return
	}
	ppid := StatusField(st, "PPid:")
	exe, _ := os.Readlink("/proc/self/exe")
	cmdline, _ := ReadCmdline(r.self)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, d := range tasks {
		tid, err := strconv.ParseUint(d.Name(), 10, 32)
		if err != nil {
			continue
		}
		comm, err := ReadComm(uint32(tid))
		if err != nil {
			continue
		}
		r.m[uint32(tid)] = &entry{pid: r.self, ppid: ppid, comm: comm, exe: exe, cmdline: cmdline, known: true, watch: true}
	}
}

// probe checks that the subscription delivers events: the kernel accepts a subscription
// it ignores (outside the initial namespaces, without CAP_NET_ADMIN), so the calling thread
// renames itself to its own name (a comm event) and the event is awaited (at most a second).
func probe(fd int) error {
	if err := renameSelf(); err != nil {
		return err
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(time.Second)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return errors.New("no events within a second of subscribing (needs CAP_NET_ADMIN in the initial user and pid namespaces)")
		}
		n, err := unix.Poll(pfd, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			return nil // the event stays in the socket for the resolver to apply
		}
	}
}

// renameSelf sets the calling thread's name to what it is: the kernel sends a comm event.
func renameSelf() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var name [16]byte
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_GET_NAME: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl PR_SET_NAME: %w", err)
	}
	return nil
}

// Close unsubscribes, stops the goroutine, reads from /proc what is still queued (reporting
// the used threads it learns, or what is known of them) and closes the socket.
func (r *Resolver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.drainLocked()
	r.closed = true
	_ = unix.Sendto(r.fd, mcastMsg(mcastIgnore), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	r.mu.Unlock()
	err := r.f.Close() // wakes the goroutine's wait
	<-r.done
	r.work()
	return err
}

// Stats returns the counters so far.
func (r *Resolver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Use attributes a request of thread tid made at time at: it returns the thread's process
// id (0 when unknown: a thread of a process that existed before the subscription, other
// than its main thread, until the goroutine has read it) and whether Config.Keep keeps it.
func (r *Resolver) Use(tid uint32, at int64) (pid uint32, keep bool) {
	sl := &r.cache[tid%cacheSize]
	if w := sl.Load(); w != 0 && uint32(w>>32) == tid {
		return uint32(w) >> 1, w&1 != 0
	}
	return r.useSlow(tid, at)
}

func (r *Resolver) useSlow(tid uint32, at int64) (uint32, bool) {
	r.mu.Lock()
	e := r.m[tid]
	if e == nil || !e.known || e.forked {
		// The events the socket holds may create it, or replace a fork's copy of its
		// parent by the program it exec'd. (An exec of a thread already seen as a program
		// and still pending there is applied later, and marks the new program used.)
		r.drainLocked()
		e = r.m[tid]
	}
	if e == nil {
		// A request of a thread that has exited (a RELEASE sent in its exit) is its own.
		e = r.gone.find(tid)
	}
	if e == nil {
		e = &entry{pid: leaderPid(tid)}
		r.m[tid] = e
		r.queueLocked(tid, e, true)
	}
	if !e.known && (!e.all || r.cfg.Keep != nil || e.pid == 0) {
		// A program the resolver has not read yet (exec'd or forked from a thread it did
		// not know), a thread the name filter must judge now, or a thread of a process
		// that started before the subscription and whose process only its status names
		// (a request attributed to no process would be the kernel's): alive, blocked in
		// this request, and maybe gone when the resolver's goroutine gets to it. Its
		// identity is read here, so that it is reported before its request is recorded.
		t0 := time.Now()
		th, err := readThread(tid, e.all)
		r.stats.InPathReads++
		r.stats.InPath += time.Since(t0)
		r.learnLocked(e, th, err)
	}
	if !e.used || e.first == 0 {
		e.used = true
		if e.first == 0 {
			e.first = at
		}
		if !e.known {
			e.late = true
		}
	}
	if e.known && !e.reported {
		r.reportLocked(tid, e)
	}
	if !e.keepSet {
		e.keep, e.keepSet = true, true
		if r.cfg.Keep != nil {
			e.keep = r.cfg.Keep(e.comm) // known: read above
		}
	}
	pid, keep := e.pid, e.keep
	if pid != 0 {
		// Stored under the lock: every change of tid clears its slot under it too.
		w := uint64(tid)<<32 | uint64(pid)<<1
		if keep {
			w |= 1
		}
		r.cache[tid%cacheSize].Store(w)
	}
	r.mu.Unlock()
	return pid, keep
}

// leaderPid returns tid when it is a process's main thread (its own thread group), else 0.
// A thread of the resolver's own process is attributed to it too.
func leaderPid(tid uint32) uint32 {
	if err := unix.Tgkill(int(tid), int(tid), 0); err == nil || err == unix.EPERM {
		return tid
	}
	if self := os.Getpid(); unix.Tgkill(self, int(tid), 0) == nil {
		return uint32(self)
	}
	return 0
}

// forget drops tid's cached attribution; the caller holds the lock and has changed tid.
func (r *Resolver) forgetLocked(tid uint32) {
	sl := &r.cache[tid%cacheSize]
	if w := sl.Load(); w != 0 && uint32(w>>32) == tid {
		sl.Store(0)
	}
}

// learnLocked sets e's identity from a /proc read (th, err) of it; a failed read (the
// thread is gone) leaves what is known, and the identity counts as missing.
func (r *Resolver) learnLocked(e *entry, th Thread, err error) {
	if err == nil {
		if e.all {
			if e.pid == 0 {
				e.pid = th.Pid
			}
			e.ppid = th.PPid
		}
		e.comm, e.exe, e.cmdline = th.Comm, th.Exe, th.Cmdline
	}
	e.missing = err != nil || e.exe == ""
	e.known = true
}

func (r *Resolver) reportLocked(tid uint32, e *entry) {
	e.reported = true
	if e.cmdline == "" && e.pid != 0 {
		// Read while its exec was loading the program, before the kernel set the new
		// command line up: the program runs now (it made a request).
		e.cmdline, _ = ReadCmdline(e.pid)
	}
	r.stats.Threads++
	if e.late {
		r.stats.Late++
	}
	if e.missing {
		r.stats.Missing++
	}
	if r.cfg.Report != nil {
		r.cfg.Report(Thread{Tid: tid, Pid: e.pid, PPid: e.ppid, Comm: e.comm, Exe: e.exe, Cmdline: e.cmdline}, e.first)
	}
}

func (r *Resolver) queueLocked(tid uint32, e *entry, all bool) {
	if e.queued {
		return
	}
	e.queued, e.all = true, all
	r.jobs = append(r.jobs, job{tid: tid, e: e, all: all})
	if all {
		select { // the goroutine waiting for the socket would not see it
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// drainLocked receives and applies the events the socket holds, without waiting.
func (r *Resolver) drainLocked() {
	if r.closed {
		return
	}
	for {
		n, _, err := unix.Recvfrom(r.fd, r.buf, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOBUFS {
			r.overflowLocked()
			continue
		}
		if err != nil || n <= 0 {
			if err != nil && err != unix.EAGAIN {
				r.readErr = err
			}
			return
		}
		r.evs, err = parseMessages(r.evs[:0], r.buf[:n])
		if err != nil {
			r.readErr = err
		}
		for i := range r.evs {
			r.applyLocked(&r.evs[i])
		}
	}
}

// overflowLocked handles lost events: every thread is unknown again.
func (r *Resolver) overflowLocked() {
	r.stats.Overflows++
	for i := range r.cache {
		r.cache[i].Store(0)
	}
	clear(r.m)
	r.gone = graveyard{}
}

func (r *Resolver) applyLocked(ev *Event) {
	r.stats.Events++
	switch ev.Kind {
	case KindFork:
		if len(r.m) >= maxThreads {
			r.overflowLocked()
		}
		// The event names the new task's real parent: for a new process the forking
		// process, for a new thread (Pid ≠ Tgid) the parent of the thread's process, never
		// the thread that created it. A thread takes its process's identity, from the
		// process's main thread.
		c := &entry{pid: ev.Tgid, ppid: ev.ParentTgid}
		var p *entry
		if ev.Pid != ev.Tgid {
			p = r.m[ev.Tgid]
			if p == nil { // a process the resolver does not know: read in the thread's first request
				r.forgetLocked(ev.Pid)
				r.gone.forget(ev.Pid)
				r.m[ev.Pid] = c
				return
			}
			c.ppid = p.ppid
			c.watch = p.watch || p.used || ev.Tgid == r.self
		} else {
			p = r.m[ev.ParentPid]
			if p == nil {
				p = &entry{pid: ev.ParentTgid}
				r.m[ev.ParentPid] = p
				r.queueLocked(ev.ParentPid, p, true)
			}
			c.watch = p.watch || p.used || ev.ParentTgid == r.self
		}
		if p.known {
			c.comm, c.exe, c.cmdline, c.known, c.forked = p.comm, p.exe, p.cmdline, true, true
		} // else read in its first request (Use), if it makes one
		r.forgetLocked(ev.Pid)
		r.gone.forget(ev.Pid)
		r.m[ev.Pid] = c
	case KindExec:
		old := r.m[ev.Pid]
		e := &entry{pid: ev.Tgid}
		r.forgetLocked(ev.Pid)
		r.m[ev.Pid] = e
		switch {
		case old == nil: // a thread of a process that existed before the subscription
			r.queueLocked(ev.Pid, e, true)
		case old.used || old.watch:
			// A program the job may run: read now, while it starts (off its requests' path,
			// and before a short process is gone). A used thread's new identity counts as
			// used: its first requests may hit the old attribution in the cache before this
			// event is applied.
			e.ppid, e.watch = old.ppid, true
			if old.used {
				e.used, e.first = true, old.first
			}
			r.queueLocked(ev.Pid, e, false)
		default: // read in its first request (Use), if it makes one
			e.ppid = old.ppid
		}
	case KindComm:
		e := r.m[ev.Pid]
		if e == nil {
			return // unknown: read from /proc when used, with the new name
		}
		n := *e
		n.comm, n.queued, n.reported, n.keepSet, n.late = ev.Comm, false, false, false, false
		r.forgetLocked(ev.Pid)
		r.m[ev.Pid] = &n
		switch {
		case n.known && n.used:
			r.reportLocked(ev.Pid, &n)
		case !n.known && (n.used || n.all):
			r.queueLocked(ev.Pid, &n, n.all) // the executable is still to be read
		}
	case KindExit:
		if e, ok := r.m[ev.Pid]; ok {
			delete(r.m, ev.Pid)
			r.forgetLocked(ev.Pid)
			if e.known && (e.used || e.watch) {
				r.gone.bury(ev.Pid, e)
			}
		}
	}
}

// run applies events as they arrive and does the /proc reads they call for; a second
// goroutine does the reads Use queues. It waits for each datagram rather than taking them
// at intervals: a program a job starts is then read from /proc while it loads, and its first
// request finds it known. Taken every 20 ms, most short programs' first request read /proc
// itself, in the application's wait (a loop of 1,000 `cat`s: 30 µs of the layer's own work
// per request instead of 6 µs, bench/jobs.sh -o catloop).
func (r *Resolver) run() {
	defer close(r.done)
	stop, worked := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(worked)
		for {
			select {
			case <-r.wake:
				r.work()
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-worked }()
	rc, err := r.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		err := rc.Read(func(uintptr) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.closed {
				return true
			}
			r.drainLocked()
			return len(r.jobs) > 0 // else wait for the next datagram
		})
		r.mu.Lock()
		closed := r.closed
		r.mu.Unlock()
		if err != nil || closed {
			return
		}
		r.work()
	}
}

// work does the queued /proc reads.
func (r *Resolver) work() {
	for {
		r.mu.Lock()
		jobs := r.jobs
		r.jobs = nil
		r.mu.Unlock()
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			r.mu.Lock()
			known := j.e.known
			r.mu.Unlock()
			var th Thread
			var err error
			if !known {
				th, err = readThread(j.tid, j.all)
			}
			r.mu.Lock()
			e := j.e
			e.queued = false
			if e.known { // read in a request's path meanwhile
				r.mu.Unlock()
				continue
			}
			r.stats.ProcReads++
			r.learnLocked(e, th, err)
			if e.used && !e.reported {
				r.reportLocked(j.tid, e)
			}
			r.mu.Unlock()
		}
	}
}

// readThread reads a thread's name and its process's executable and command line from
// /proc, and with all its process and parent too.
func readThread(tid uint32, all bool) (Thread, error) {
	th := Thread{Tid: tid}
	if all {
		var buf [4096]byte
		st, err := ReadProc(tid, "status", buf[:])
		if err != nil {
			return th, err
		}
		th.Pid = StatusField(st, "Tgid:")
		th.PPid = StatusField(st, "PPid:")
	}
	var err error
	if th.Comm, err = ReadComm(tid); err != nil {
		return th, err
	}
	pid := th.Pid
	if pid == 0 {
		pid = tid // the exe link is per process; a thread's own directory has it too
	}
	th.Exe, _ = os.Readlink("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/exe")
	th.Cmdline, _ = ReadCmdline(pid)
	return th, nil
}

// MaxCmdline is how much of a command line ReadCmdline reads: trace.MaxCmdline, what a
// trace keeps.
const MaxCmdline = 4096

// ReadCmdline reads the first MaxCmdline bytes of a process's command line from
// /proc/<pid>/cmdline: its arguments, each ended by a NUL byte (the last one cut short
// when the command line is longer). A kernel thread's, or a zombie's, is empty.
func ReadCmdline(pid uint32) (string, error) {
	var buf [MaxCmdline]byte
	b, err := ReadProc(pid, "cmdline", buf[:])
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// SplitCmdline returns the arguments of a command line as ReadCmdline returns it; nil
// when it is empty.
func SplitCmdline(raw string) []string {
	if raw == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(raw, "\x00"), "\x00")
}

// ReadProc reads /proc/<tid>/<name> into buf with three system calls (os.ReadFile adds an
// fstat and a growing buffer: it runs in requests' paths).
func ReadProc(tid uint32, name string, buf []byte) ([]byte, error) {
	fd, err := unix.Open("/proc/"+strconv.FormatUint(uint64(tid), 10)+"/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], nil
}

// ReadComm reads a thread's name (comm) from /proc.
func ReadComm(tid uint32) (string, error) {
	var buf [64]byte
	b, err := ReadProc(tid, "comm", buf[:])
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b, []byte("\n"))), nil
}

// StatusField parses the decimal value of a "Key:\tvalue" line of /proc/<tid>/status.
func StatusField(status []byte, key string) uint32 {
	i := bytes.Index(status, []byte("\n"+key))
	if i < 0 {
		return 0
	}
	rest := status[i+1+len(key):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	v, _ := strconv.ParseUint(string(bytes.TrimSpace(rest)), 10, 32)
	return uint32(v)
}
