package stats

import (
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// The per-system-call view.
//
// A recording's events are FUSE requests; package trace/fold turns them back into the
// system calls the application made, as replay does, and the view counts those calls by
// kind (fold.Syscall). A call's time is its time in the storage: the recorded durations
// of its requests summed, path-walk lookups and privilege probes included (a close counts
// its flush: the application's close does not wait for the release). A replay's trace
// records calls already: each event is one call, with no FUSE requests behind it.

// CallStats are the figures of one kind of system call.
type CallStats struct {
	// OpStats hold the count, errors, bytes and the calls' time in the storage (TotalNs,
	// MaxNs, Hist).
	OpStats
	Requests    uint64 // FUSE requests the calls stand for (0 for a replay's calls)
	MaxRequests uint64 // the most requests one call stood for
	// BusyNs is the time at least one call of the kind was in flight, each call taken
	// from its first request's start for its time in the storage (busy.go).
	BusyNs int64
	// MetaNs and DataNs split TotalNs between the calls' metadata requests (lookups,
	// getattr, open, create, flush, release, ...) and their data requests (read, write,
	// fsync, ...; fold.IsDataOp). A replay's call is one or the other by its op.
	MetaNs, DataNs int64
	// Waited is what the application waited for the calls whose entry and return the
	// kernel measured (recordings with --legs kernel: fold.Call's CallStart..CallEnd),
	// and WaitedStorageNs those same calls' time in the storage: the difference is what
	// FUSE added. Count 0 when nothing was measured.
	Waited          OpStats
	WaitedStorageNs int64
}

func (c *CallStats) merge(o *CallStats) {
	c.OpStats.merge(&o.OpStats)
	c.Requests += o.Requests
	c.MaxRequests = max(c.MaxRequests, o.MaxRequests)
	c.BusyNs += o.BusyNs
	c.MetaNs += o.MetaNs
	c.DataNs += o.DataNs
	c.Waited.merge(&o.Waited)
	c.WaitedStorageNs += o.WaitedStorageNs
}

// How a source's events became calls (Source.Calls).
const (
	CallsFolded = "folded" // FUSE requests folded into calls
	CallsReplay = "replay" // a replay's trace: each event is a call
)

// callView is an Accumulator's per-system-call state.
type callView struct {
	folder  *fold.Folder // nil for a replay's trace
	calls   [fold.NumSyscalls]CallStats
	busy    [fold.NumSyscalls]busySet
	flushed uint64 // closes timed by a flush
	// paths are the view's state per path id: an event costs an index rather than two
	// map look-ups.
	paths     pathTable[pathCalls]
	moreKinds map[uint64]int64 // the time of the kinds past a path's pathKinds: kind<<32 | path id
	first, re AccessStats
	sizes     [2][NumAccessSizes]AccessSize // successful reads [0] and writes [1] by size
	// The calls', first reads' and re-reads' latencies, for their histograms (flushed
	// by finish).
	callBuf         [fold.NumSyscalls]histBuf
	firstBuf, reBuf histBuf
}

// pathCalls is the per-system-call view's state of one path, one cache line: the calls'
// time per kind for the first pathKinds kinds the path saw (the others go to the view's
// moreKinds), and the bytes its read calls read.
type pathCalls struct {
	ns     [pathKinds]int64        // the calls' time in the storage, per kind in kinds
	kinds  [pathKinds]fold.Syscall // kinds[:n] are the kinds
	n      uint8
	ranges *rangeSet // the bytes read calls read, for the first-access split (nil: none yet)
}

// pathKinds is the number of kinds of calls a path holds itself: a file opened, read,
// written, closed and stat'ed has five.
const pathKinds = 6

// path returns the state of path id, creating it. The pointer is valid until the next
// call that creates a path.
func (v *callView) path(id uint32) *pathCalls { return v.paths.at(id) }

// addNs adds ns to the time of the calls of kind s on path id, whose state is p.
func (v *callView) addNs(p *pathCalls, id uint32, s fold.Syscall, ns int64) {
	for i := range p.n {
		if p.kinds[i] == s {
			p.ns[i] += ns
			return
		}
	}
	if p.n < pathKinds {
		p.kinds[p.n], p.ns[p.n] = s, ns
		p.n++
		return
	}
	if v.moreKinds == nil {
		v.moreKinds = make(map[uint64]int64)
	}
	v.moreKinds[uint64(s)<<32|uint64(id)] += ns
}

func newCallView(names fold.Names, h *trace.Header) *callView {
	if h != nil && h.Kind == "replay" {
		return &callView{}
	}
	// The Accumulator hands events over in start order already: the folder needs no
	// window of its own.
	return &callView{folder: fold.New(names, h, fold.Options{Window: 1})}
}

// add takes one event.
func (v *callView) add(ev *trace.Event) {
	if v.folder == nil {
		if s, ok := fold.SyscallOf(ev.Op, ev.Flags); ok {
			var data int64
			if fold.IsDataOp(ev.Op) {
				data = ev.Dur
			}
			v.call(s, ev.Op, ev.Path, ev.Start, ev.Dur, data, ev.Errno, ev.Ret, 0)
			if s == fold.SysRead {
				v.read(ev.Path, ev.Offset, ev.Dur, ev.Errno, ev.Ret)
			}
		}
		return
	}
	v.folder.Add(ev)
	v.drain()
}

// drain counts the calls the folder has ready.
func (v *callView) drain() {
	for c, ok := v.folder.Next(); ok; c, ok = v.folder.Next() {
		if s, ok := c.Syscall(); ok {
			v.call(s, c.Rec, c.PathID, c.Start, c.Time(), c.DataTime(), c.Errno, c.Ret, uint64(c.Requests()))
			if c.CallStart != 0 && c.CallEnd > c.CallStart {
				v.waited(s, c.CallEnd-c.CallStart, c.Time())
			}
			if s == fold.SysRead {
				v.read(c.PathID, c.Offset, c.Time(), c.Errno, c.Ret)
			}
		}
		if c.Kind == fold.Close && c.Rec == trace.OpFlush {
			v.flushed++
		}
	}
}

// call counts one call of kind s on path: its time in the storage ns, of which data in
// data requests.
func (v *callView) call(s fold.Syscall, rec trace.Op, path uint32, start, ns, data int64, errno uint16, ret int64, reqs uint64) {
	v.busy[s].add(start, start+ns)
	v.addNs(v.path(path), path, s, ns)
	if errno == 0 && (s == fold.SysRead || s == fold.SysWrite) {
		d := 0
		if s == fold.SysWrite {
			d = 1
		}
		v.sizes[d][AccessSizeOf(max(ret, 0))].add(uint64(max(ret, 0)), ns)
	}
	c := &v.calls[s]
	c.Count++
	c.TotalNs += ns
	c.DataNs += data
	c.MetaNs += ns - data
	c.MaxNs = max(c.MaxNs, ns)
	if c.Hist == nil {
		c.Hist = NewHist()
	}
	v.callBuf[s].add(c.Hist, ns)
	if errno != 0 {
		c.Errors++
		if c.Errnos == nil {
			c.Errnos = make(map[uint16]uint64)
		}
		c.Errnos[errno]++
		c.fail(ns)
	} else if ret > 0 && HasBytes(rec) {
		c.Bytes += uint64(ret)
	}
	c.Requests += reqs
	c.MaxRequests = max(c.MaxRequests, reqs)
}

// waited counts what the application waited for one call of kind s (ns) whose time in the
// storage was storage.
func (v *callView) waited(s fold.Syscall, ns, storage int64) {
	c := &v.calls[s]
	w := &c.Waited
	w.Count++
	w.TotalNs += ns
	w.MaxNs = max(w.MaxNs, ns)
	if w.Hist == nil {
		w.Hist = NewHist()
	}
	record(w.Hist, ns)
	c.WaitedStorageNs += storage
}

// read splits a read call into first access and re-access (see Stats.FirstReads).
func (v *callView) read(path uint32, off, ns int64, errno uint16, ret int64) {
	if errno != 0 || ret <= 0 {
		return
	}
	p := v.path(path)
	rs := p.ranges
	if rs == nil {
		rs = &rangeSet{}
		p.ranges = rs
	}
	if rs.add(off, off+ret) == uint64(ret) {
		v.re.add(uint64(ret), ns, &v.reBuf)
	} else {
		v.first.add(uint64(ret), ns, &v.firstBuf)
	}
}

// finish counts the calls still held and fills in the source's fields.
func (v *callView) finish(src *Source) [fold.NumSyscalls]CallStats {
	src.Calls = CallsReplay
	if v.folder != nil {
		v.folder.End()
		v.drain()
		src.Calls = CallsFolded
		st := v.folder.Stats
		src.Fold = &st
		src.ExtraFlushes = st.ByOp[trace.OpFlush] - min(st.ByOp[trace.OpFlush], v.flushed)
	}
	for i := range v.calls {
		v.calls[i].BusyNs = v.busy[i].total()
		v.callBuf[i].flush()
	}
	v.firstBuf.flush()
	v.reBuf.flush()
	return v.calls
}

// CallTotalNs returns the summed time of all calls.
func (s *Stats) CallTotalNs() int64 {
	var t int64
	for i := range s.Calls {
		t += s.Calls[i].TotalNs
	}
	return t
}

// HasCalls reports whether every source has the per-system-call view.
func (s *Stats) HasCalls() bool {
	for i := range s.Sources {
		if s.Sources[i].Calls == "" {
			return false
		}
	}
	return len(s.Sources) > 0
}

// callPaths returns the calls' time per kind and path, paths named by r.
func (v *callView) callPaths(r Resolver) map[CallPath]int64 {
	out := make(map[CallPath]int64)
	add := func(id uint32, p *pathCalls) {
		if p.n == 0 {
			return
		}
		name := pathName(r, id)
		for i := range p.n {
			out[CallPath{Call: p.kinds[i], Path: name}] += p.ns[i]
		}
	}
	v.paths.each(add)
	for k, ns := range v.moreKinds {
		out[CallPath{Call: fold.Syscall(k >> 32), Path: pathName(r, uint32(k))}] += ns
	}
	return out
}

// CallPath is a kind of call on one path (Stats.CallPaths).
type CallPath struct {
	Call fold.Syscall
	Path string // relative to the traced root; "" is the root
}

// Access sizes: the buckets Darshan counts its POSIX reads and writes in
// (DARSHAN_BUCKET_INC in darshan-common.h), by the bytes a call read or wrote: at most
// 100 B, 1 KiB, 10 KiB, 100 KiB, 1 MiB, 4 MiB, 10 MiB, 100 MiB, 1 GiB, and more.
const NumAccessSizes = 10

// accessSizeMax are the buckets' upper bounds, inclusive.
var accessSizeMax = [NumAccessSizes - 1]int64{100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30}

// AccessSizeOf returns the access-size bucket of a call that moved n bytes.
func AccessSizeOf(n int64) int {
	for i, m := range accessSizeMax {
		if n <= m {
			return i
		}
	}
	return NumAccessSizes - 1
}

// AccessSizeLabel names bucket b as Darshan does ("0-100", "100-1K", ..., "1G+"), and
// gives its upper bound in bytes (0 for the last, open-ended).
func AccessSizeLabel(b int) (string, int64) {
	labels := [NumAccessSizes]string{"0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G", "1G+"}
	if b < NumAccessSizes-1 {
		return labels[b], accessSizeMax[b]
	}
	return labels[b], 0
}

// AccessSize counts the calls of one access-size bucket: how many, the bytes they moved
// and their time in the storage.
type AccessSize struct {
	Count   uint64
	Bytes   uint64
	TotalNs int64
}

func (a *AccessSize) add(n uint64, ns int64) {
	a.Count++
	a.Bytes += n
	a.TotalNs += ns
}
