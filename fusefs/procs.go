package fusefs

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/iotap/iotap/fusefs/internal/procconn"
	"github.com/iotap/iotap/trace"
)

// commRecheck is how often (ns) a thread's comm is re-read, so that a fork+exec is attributed
// to the new program soon after the exec.
const commRecheck = 50e6

// procInfo is the cached attribution of one thread id.
type procInfo struct {
	pid     uint32
	record  bool  // passes the Comms filter
	checked int64 // now() of the last comm check
	comm    string
}

// procCacheSize is the number of slots of the direct-mapped cache in front of the procs map.
const procCacheSize = 1024

// procSlot caches one thread's attribution: word is tid<<32 | pid<<1 | record, checked the
// time of its last comm check. A hit reads one cache line and takes no lock (the map's
// shard lock and buckets would be two to three more cold lines per request). Two threads
// sharing a slot can pair one's word with the other's checked: that moves a comm recheck,
// a heuristic, never an attribution, which word carries whole.
type procSlot struct {
	word    atomic.Uint64
	checked atomic.Int64
}

// proc returns the attribution of tid for request c. With the proc connector (conn) it
// never reads /proc (but for a name filter meeting a thread it does not know yet); without
// it, it resolves tid from /proc the first time (and re-reads comm every commRecheck).
// Hits do not allocate. The returned comm is empty on a cache hit. Time spent in /proc is
// added to c.slow and to the layer's Resolve.
func (t *tracer) proc(tid uint32, c *span) procInfo {
	at := c.s0 // a thread's FirstSeen is the start of its first event, not later
	if t.conn != nil {
		pid, keep := t.conn.Use(tid, at)
		return procInfo{pid: pid, record: keep}
	}
	sl := &t.pcache[tid%procCacheSize]
	if w := sl.word.Load(); uint32(w>>32) == tid && at-sl.checked.Load() < commRecheck {
		return procInfo{pid: uint32(w) >> 1, record: w&1 != 0}
	}
	t0 := now()
	p := t.procSlow(tid, at)
	d := now() - t0
	c.slow += d
	t.counters.resolve.Add(uint64(d))
	w := uint64(tid)<<32 | uint64(p.pid)<<1
	if p.record {
		w |= 1
	}
	sl.word.Store(w)
	sl.checked.Store(p.checked)
	return p
}

// startConn subscribes to the proc connector for the tracer's attributions; without it
// (not root, a container) the tracer reads /proc for each new thread.
func (t *tracer) startConn() error {
	cfg := procconn.Config{Report: t.reportThread}
	if t.comms {
		cfg.Keep = t.commOK
	}
	r, err := procconn.Start(cfg)
	if err != nil {
		return err
	}
	t.conn = r
	return nil
}

// reportThread records a thread the proc connector attributed (procconn.Config.Report).
func (t *tracer) reportThread(th procconn.Thread, first int64) {
	t.counters.threads.Add(1)
	t.rec.AddProcess(trace.Process{Tid: th.Tid, Pid: th.Pid, PPid: th.PPid, FirstSeen: first - t.origin, Comm: th.Comm, Exe: th.Exe,
		Cmdline: procconn.SplitCmdline(th.Cmdline)})
}

// procSlow is proc through the procs map.
func (t *tracer) procSlow(tid uint32, at int64) procInfo {
	p, ok := t.procs.get(tid)
	if ok && at-p.checked < commRecheck {
		return p
	}
	if ok {
		comm, err := procconn.ReadComm(tid)
		if err != nil || comm == p.comm {
			p.checked = at
			t.procs.set(tid, p)
			return p
		}
	}
	p = t.resolve(tid, at)
	t.counters.threads.Add(1)
	t.procs.set(tid, p)
	return p
}

// resolve reads /proc for tid and records the process side-table entry. It runs on the
// first request of every new thread, in that request's path, so it reads as little as it
// can: /proc/<tid>/status (process id, parent, comm as Name), the exe link and the first
// 4 KiB of the command line.
func (t *tracer) resolve(tid uint32, at int64) procInfo {
	pr := trace.Process{Tid: tid, FirstSeen: at - t.origin}
	var buf [4096]byte
	status, err := procconn.ReadProc(tid, "status", buf[:])
	if err != nil {
		t.rec.CountError() // the thread is gone already; attribute what we can
		pr.Comm, _ = procconn.ReadComm(tid)
	} else {
		pr.Pid = procconn.StatusField(status, "Tgid:")
		pr.PPid = procconn.StatusField(status, "PPid:")
		pr.Comm = statusName(status)
		if strings.IndexByte(pr.Comm, '\\') >= 0 { // escaped by the kernel: read it raw
			pr.Comm, _ = procconn.ReadComm(tid)
		}
	}
	if pr.Pid != 0 {
		pr.Exe, _ = os.Readlink("/proc/" + strconv.FormatUint(uint64(pr.Pid), 10) + "/exe")
		raw, _ := procconn.ReadCmdline(pr.Pid)
		pr.Cmdline = procconn.SplitCmdline(raw)
	}
	t.rec.AddProcess(pr)
	return procInfo{pid: pr.Pid, record: t.commOK(pr.Comm), checked: at, comm: pr.Comm}
}

// statusName returns the Name line of /proc/<tid>/status (comm, with \ and control
// characters escaped by the kernel).
func statusName(status []byte) string {
	rest, ok := bytes.CutPrefix(status, []byte("Name:"))
	if !ok {
		return ""
	}
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	return string(bytes.TrimLeft(rest, " \t"))
}

func (t *tracer) commOK(comm string) bool {
	if len(t.opts.Comms) == 0 {
		return true
	}
	for _, c := range t.opts.Comms {
		if ok, _ := path.Match(c, comm); ok || c == comm {
			return true
		}
	}
	return false
}
