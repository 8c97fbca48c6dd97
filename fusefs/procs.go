package fusefs

import (
	"bytes"
	"os"
	"path"
	"strconv"

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

// proc returns the attribution of tid, resolving it from /proc the first time (and re-reading
// comm every commRecheck). Hits do not allocate.
func (t *tracer) proc(tid uint32, at int64) procInfo {
	p, ok := t.procs.get(tid)
	if ok && at-p.checked < commRecheck {
		return p
	}
	if ok {
		comm, err := readComm(tid)
		if err != nil || comm == p.comm {
			p.checked = at
			t.procs.set(tid, p)
			return p
		}
	}
	p = t.resolve(tid, at)
	t.procs.set(tid, p)
	return p
}

// resolve reads /proc for tid and records the process side-table entry.
func (t *tracer) resolve(tid uint32, at int64) procInfo {
	pr := trace.Process{Tid: tid, FirstSeen: at - t.origin}
	status, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/status")
	if err != nil {
		t.rec.CountError() // the thread is gone already; attribute what we can
	} else {
		pr.Pid = statusField(status, "Tgid:")
		pr.PPid = statusField(status, "PPid:")
	}
	pr.Comm, _ = readComm(tid)
	if pr.Pid != 0 {
		pr.Exe, _ = os.Readlink("/proc/" + strconv.FormatUint(uint64(pr.Pid), 10) + "/exe")
	}
	t.rec.AddProcess(pr)
	return procInfo{pid: pr.Pid, record: t.commOK(pr.Comm), checked: at, comm: pr.Comm}
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

func readComm(tid uint32) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(tid), 10) + "/comm")
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(b, []byte("\n"))), nil
}

// statusField parses the decimal value of a "Key:\tvalue" line of /proc/<tid>/status.
func statusField(status []byte, key string) uint32 {
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
