package export

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/iotap/iotap/trace"
)

// identity is what the identity columns say of a trace.
type identity struct {
	traceID, kind, host, job, step, version string
	start                                   int64 // ns since the Unix epoch
	target                                  trace.Target
	labels                                  []trace.Label
}

// TraceID returns the identity of the trace with header h: 16 hex digits of SHA-256 over what
// its header says of the recording (kind, host, the wall clock and monotonic time of its
// origin, kernel, iotap version, traced directory, command, labels). The same trace (or a
// copy of it) has the same identity wherever it is stored; an anonymised copy has its own.
func TraceID(h *trace.Header) string {
	sum := sha256.New()
	var b [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
		sum.Write(b[:])
		sum.Write([]byte(s))
	}
	for _, s := range []string{h.Kind, h.Hostname, h.Kernel, h.IotapVersion, h.Target.Path, h.Target.FSType, h.Target.Source, h.Target.Mount} {
		str(s)
	}
	for _, v := range []int64{h.WallStart.UnixNano(), h.Origin, int64(len(h.Command)), int64(len(h.Labels))} {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		sum.Write(b[:])
	}
	for _, a := range h.Command {
		str(a)
	}
	for _, l := range h.Labels {
		str(l.Key)
		str(l.Value)
	}
	return hex.EncodeToString(sum.Sum(nil)[:8])
}

func identityOf(h *trace.Header) *identity {
	id := &identity{
		traceID: TraceID(h), kind: h.Kind, host: h.Hostname, version: h.IotapVersion,
		start: h.WallStart.UnixNano(), target: h.Target, labels: h.Labels,
	}
	id.job, _ = h.Label("SLURM_JOB_ID")
	id.step, _ = h.Label("SLURM_STEP_ID")
	return id
}

// names resolves a trace's path ids and thread ids, and holds the trace's identity. A
// thread's process is named by its record as read so far (a thread that exec'd another
// program has a new record, which names its next events): procs remembers each thread's
// names with the reader's ProcessRecords when they were read, and reads them again once a
// record has been read since.
type names struct {
	r       *trace.Reader
	id      *identity
	version uint16 // the trace's format version
	procs   map[uint32]proc
}

// proc is what the views say of a thread's process.
type proc struct {
	comm, exe string
	gen       uint64 // the reader's ProcessRecords when read
}

func newNames(r *trace.Reader) *names {
	return &names{r: r, id: identityOf(r.Header()), version: r.Header().Version, procs: map[uint32]proc{}}
}

func (n *names) proc(tid uint32) proc {
	gen := n.r.ProcessRecords()
	if p, ok := n.procs[tid]; ok && p.gen == gen {
		return p
	}
	p := proc{gen: gen}
	if t, ok := n.r.Process(tid); ok {
		p.comm, p.exe = t.Comm, t.Exe
		if t.Exe == "" && t.Pid != 0 && t.Pid != tid {
			if m, ok := n.r.Process(t.Pid); ok {
				p.exe = m.Exe
			}
		}
	}
	n.procs[tid] = p
	return p
}

// path returns the name of path id, "" for none (0).
func (n *names) path(id uint32) string {
	if id == 0 {
		return ""
	}
	return n.r.PathName(id)
}
