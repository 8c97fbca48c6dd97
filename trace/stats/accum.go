package stats

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/iotap/iotap/trace"
)

// Resolver names the ids events carry. *trace.Reader satisfies it.
type Resolver interface {
	PathName(id uint32) string
	Process(tid uint32) (trace.Process, bool)
}

// Names is a Resolver backed by maps, for events that did not come from a trace file.
type Names struct {
	Paths map[uint32]string
	Procs map[uint32]trace.Process // by tid
}

// PathName implements Resolver.
func (n *Names) PathName(id uint32) string {
	if s, ok := n.Paths[id]; ok {
		return s
	}
	if id == trace.RootPath {
		return ""
	}
	return "?" + itoa(uint64(id))
}

// Process implements Resolver.
func (n *Names) Process(tid uint32) (trace.Process, bool) {
	p, ok := n.Procs[tid]
	return p, ok
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}

// fileAgg is the per-path state of an Accumulator, indexed by path id. Fields are ordered
// so that an event touches as few cache lines as possible: with many files, the file's
// state is usually the one cache miss an event costs, so the state of the file's
// (first) open handle and its current read range live here too.
type fileAgg struct {
	// Line 0: every event on the path.
	Ops     uint64
	TotalNs int64
	ClassNs [NumClasses]int64
	Errors  uint64
	sampler int32 // index+1 into Accumulator.samplers, 0 = none
	touched bool
	isDir   bool // a directory: dir ops on it, or a lookup/mkdir reply said so
	hasNext bool // nextOff is valid (data ops without a handle)
	kind    kind // what a successful op showed the path to be in this life

	// Line 1: every read or write.
	ReadOps, ReadBytes uint64
	ReadNs             int64
	MaxEnd             int64
	h                  uint64      // the handle whose state is hs (0 = none); other handles go to the map
	hs                 handleState // state of handle h

	// Lines 2 and 3: reads.
	SeqReads, RandReads, SeqReadBytes, RandReadBytes uint64
	ranges                                           rangeSet
	ReadSizes                                        [NumSizeBuckets]uint32

	// Lines 3 to 5: writes and the rest.
	WriteOps, WriteBytes                                 uint64
	WriteNs                                              int64
	nextOff                                              int64
	SeqWrites, RandWrites, SeqWriteBytes, RandWriteBytes uint64
	WriteSizes                                           [NumSizeBuckets]uint32
	Opens, UnusedOpen                                    uint64
	FirstByteNs                                          int64
	SizeAttr                                             int64 // largest size a reply or a truncate gave

	// Line 6: first access against re-access (every read).
	RereadBytes                uint64
	FirstReads, FirstReadBytes uint64
	FirstReadNs                int64
	Rereads, RereadOnlyBytes   uint64
	RereadNs                   int64
	firstByte                  bool

	// Line 7.
	heat heatRow // time and bytes over time
	_    [8]byte // to 512 bytes: in the table of files, each line above is one cache line
}

// kind is what a path names in one life: a directory, or something else (a file, a
// symlink, a device), or not known yet.
type kind uint8

const (
	kindUnknown kind = iota
	kindFile
	kindDir
)

// kindByMode marks, in opKinds, the ops whose reply's mode says what the path is.
const kindByMode kind = 3

// opKinds says what a successful op shows its path to be.
var opKinds = func() (t [trace.NumOps]kind) {
	for _, op := range []trace.Op{trace.OpOpendir, trace.OpReaddir, trace.OpReaddirplus, trace.OpReleasedir,
		trace.OpFsyncdir, trace.OpRmdir, trace.OpMkdir} {
		t[op] = kindDir
	}
	for _, op := range []trace.Op{trace.OpCreate, trace.OpMknod, trace.OpSymlink, trace.OpLink, trace.OpRead,
		trace.OpWrite, trace.OpOpen, trace.OpUnlink, trace.OpReadlink, trace.OpCopyFileRange, trace.OpFallocate} {
		t[op] = kindFile
	}
	for _, op := range []trace.Op{trace.OpLookup, trace.OpGetattr, trace.OpStatx} {
		t[op] = kindByMode
	}
	return t
}()

// eventKind returns what a successful ev (op checked: < trace.NumOps) shows its path to
// be (kindUnknown: nothing).
func eventKind(ev *trace.Event, op trace.Op) kind {
	if ev.Errno != 0 {
		return kindUnknown
	}
	k := opKinds[op]
	if k == kindByMode {
		switch ev.Mode & 0o170000 {
		case 0:
			return kindUnknown
		case 0o040000:
			return kindDir
		}
		return kindFile
	}
	return k
}

// retiredFile is a path's earlier life: the state it had before a successful op showed
// the name to stand for another kind of object (a file removed and made again as a
// directory of the same name, as bonnie++ does with its Bonnie.<pid>).
type retiredFile struct {
	id  uint32
	agg fileAgg
}

// stats converts the aggregate to the exported form, for a trace that started at origin.
func (f *fileAgg) stats(path string, origin time.Time) FileStats {
	fs := FileStats{
		Path: path, IsDir: f.isDir, Ops: f.Ops, Errors: f.Errors, TotalNs: f.TotalNs, ClassNs: f.ClassNs,
		ReadOps: f.ReadOps, WriteOps: f.WriteOps, ReadBytes: f.ReadBytes, WriteBytes: f.WriteBytes,
		ReadNs: f.ReadNs, WriteNs: f.WriteNs, Opens: f.Opens, UnusedOpen: f.UnusedOpen, MaxEnd: f.MaxEnd,
		SizeAttr: f.SizeAttr,
		Patterns: Patterns{
			SeqReads: f.SeqReads, RandReads: f.RandReads, SeqWrites: f.SeqWrites, RandWrites: f.RandWrites,
			SeqReadBytes: f.SeqReadBytes, RandReadBytes: f.RandReadBytes,
			SeqWriteBytes: f.SeqWriteBytes, RandWriteBytes: f.RandWriteBytes,
			RereadBytes: f.RereadBytes, RereadApprox: f.ranges.overflowed,
		},
		FirstReads: f.FirstReads, FirstReadBytes: f.FirstReadBytes, FirstReadNs: f.FirstReadNs,
		Rereads: f.Rereads, RereadOnlyBytes: f.RereadOnlyBytes, RereadNs: f.RereadNs,
		FirstByteNs: f.FirstByteNs, FirstByte: f.firstByte,
		Heat: f.heat.export(origin),
	}
	for i := range f.ReadSizes {
		fs.ReadSizes[i] = uint64(f.ReadSizes[i])
		fs.WriteSizes[i] = uint64(f.WriteSizes[i])
	}
	return fs
}

// handleState follows one open file handle.
type handleState struct {
	nextOff int64
	path    uint32
	opened  bool // the open/create was seen
	hasNext bool
	used    bool // a read or write was seen
}

type procAgg struct {
	ProcStats
	tid  uint32 // first thread seen, for name resolution
	heat heatRow
}

// Accumulator aggregates the events of one trace. It is not safe for concurrent use.
type Accumulator struct {
	opts Options
	src  Source

	ops        [trace.NumOps]OpStats
	classes    [NumClasses]ClassStats
	readSizes  [NumSizeBuckets]SizeStats
	writeSizes [NumSizeBuckets]SizeStats
	ttfb       *hdrhistogram.Histogram
	first, re  AccessStats // reads of bytes never read before, and re-reads
	busy       busySet     // I/O-active time

	// The latencies of ops, sizes, first reads and re-reads, for their histograms
	// (flushed by Finish).
	opBuf           [trace.NumOps]histBuf
	sizeBuf         [2][NumSizeBuckets]histBuf // reads [0] and writes [1]
	firstBuf, reBuf histBuf

	files   pathTable[fileAgg]
	retired []retiredFile // earlier lives of paths, in the order they ended

	handles     map[uint64]int32 // handle -> index into hstates
	hstates     []handleState
	freeHStates []int32

	procIdx  map[uint32]int32
	procs    []procAgg
	lastPid  uint32
	lastProc int32

	series Series
	fine   Series // automatic interval: FineInterval slots while the trace is short
	auto   bool   // fine is in use

	samplers   []*OffsetTrack
	samplerMin uint64 // lower bound of the smallest sampled file's bytes

	depth depthAcc  // in-flight depth (depth.go)
	calls *callView // the per-system-call view (nil: none, or run by pipe)
	pipe  *callPipe // the per-system-call view in its own goroutine (nil: none, or inline)

	order trace.Sorter // events not yet aggregated, to be taken in start order

	events uint64

	// With Options.Group: an Accumulator per group, and the group of the last process and
	// user seen.
	groups             map[string]*Accumulator
	lastGroup          *Accumulator
	lastGPid, lastGUid uint32
}

// NewAccumulator returns an Accumulator for one trace. name is shown in reports (usually
// the file name); h is the trace's header.
func NewAccumulator(name string, h *trace.Header, o Options) *Accumulator {
	o = o.withDefaults()
	if o.Interval <= 0 {
		o.Interval = time.Second
		o.auto = true
	}
	a := &Accumulator{
		opts:     o,
		handles:  make(map[uint64]int32),
		procIdx:  make(map[uint32]int32),
		lastProc: -1,
		series:   Series{Width: o.Interval, max: o.MaxIntervals},
		auto:     o.auto,
	}
	a.src.Name = name
	if h != nil {
		a.src.Header = *h
		a.series.Start = h.WallStart
		a.fine.Start = h.WallStart
	}
	if a.auto {
		a.fine.Width = FineInterval
	}
	a.depth.series = DepthSeries{Start: a.series.Start, Width: o.Interval, max: o.MaxIntervals}
	if a.auto {
		a.depth.series.Width = FineInterval // coarsened to the series' width by Finish
	}
	a.src.FirstNs = -1
	if o.CallsAside {
		a.pipe = newCallPipe(o.Names, h)
	}
	if a.pipe == nil && (o.Names != nil || (h != nil && h.Kind == "replay")) {
		a.calls = newCallView(o.Names, h)
	}
	return a
}

// file returns the state of path id, creating it. The pointer is valid until the next
// call that creates a path.
func (a *Accumulator) file(id uint32) *fileAgg { return a.files.at(id) }

// eachFile calls fn for every path that has state.
func (a *Accumulator) eachFile(fn func(id uint32, f *fileAgg)) { a.files.each(fn) }

func (a *Accumulator) proc(pid, tid uint32) *procAgg {
	if pid == a.lastPid && a.lastProc >= 0 {
		return &a.procs[a.lastProc]
	}
	i, ok := a.procIdx[pid]
	if !ok {
		i = int32(len(a.procs))
		a.procs = append(a.procs, procAgg{ProcStats: ProcStats{ProcKey: ProcKey{Pid: pid}}, tid: tid})
		a.procIdx[pid] = i
	}
	a.lastPid, a.lastProc = pid, i
	return &a.procs[i]
}

// handle returns the state of handle h on file f (path id path), creating it if needed:
// in f itself when f holds no other handle, else in the handle map.
func (a *Accumulator) handle(f *fileAgg, h uint64, path uint32) *handleState {
	if f.h == h {
		return &f.hs
	}
	if len(a.handles) > 0 {
		if i, ok := a.handles[h]; ok {
			return &a.hstates[i]
		}
	}
	if f.h == 0 {
		f.h = h
		f.hs = handleState{path: path}
		return &f.hs
	}
	var i int32
	if n := len(a.freeHStates); n > 0 {
		i = a.freeHStates[n-1]
		a.freeHStates = a.freeHStates[:n-1]
	} else {
		i = int32(len(a.hstates))
		a.hstates = append(a.hstates, handleState{})
	}
	a.hstates[i] = handleState{path: path}
	a.handles[h] = i
	return &a.hstates[i]
}

// closeHandle forgets handle h, looked for in f and in the handle map, counting an open
// that was never read or written.
func (a *Accumulator) closeHandle(f *fileAgg, h uint64) {
	if f != nil && f.h == h {
		if f.hs.opened && !f.hs.used {
			f.UnusedOpen++
		}
		f.h = 0
		return
	}
	if len(a.handles) == 0 {
		return
	}
	i, ok := a.handles[h]
	if !ok {
		return
	}
	st := &a.hstates[i]
	if st.opened && !st.used && st.path != 0 {
		a.file(st.path).UnusedOpen++
	}
	delete(a.handles, h)
	a.freeHStates = append(a.freeHStates, i)
}

// isDirEvent reports whether ev shows that its path is a directory.
func isDirEvent(ev *trace.Event) bool {
	switch ev.Op {
	case trace.OpOpendir, trace.OpReaddir, trace.OpReaddirplus, trace.OpReleasedir, trace.OpFsyncdir, trace.OpRmdir:
		return true
	case trace.OpLookup, trace.OpMkdir, trace.OpGetattr, trace.OpStatx:
		return ev.Errno == 0 && ev.Mode&0o170000 == 0o040000
	}
	return false
}

// HasBytes reports whether Ret counts bytes transferred for op, as the figures count them:
// file data (read, write, copy_file_range), directory entries (readdir), attribute values
// and names (getxattr, listxattr), a link's text (readlink).
func HasBytes(op trace.Op) bool {
	switch op {
	case trace.OpRead, trace.OpWrite, trace.OpCopyFileRange, trace.OpReaddir, trace.OpReaddirplus,
		trace.OpGetxattr, trace.OpListxattr, trace.OpReadlink:
		return true
	}
	return false
}

// Add takes the next event in file order; the Accumulator copies it. Events are aggregated
// in start order: Add holds the most recent ones in a window of trace.DefaultSortWindow
// events and aggregates the earliest once the window is full (Finish aggregates the rest).
func (a *Accumulator) Add(ev *trace.Event) {
	a.order.Push(ev)
	for a.order.Full() {
		a.add(a.order.Pop())
	}
}

// add aggregates one event, in start order.
//
// add runs once per event of every trace a report reads (BenchmarkStatsAdd), so it stays
// one function that orders its memory accesses: the file's state, the likely cache miss,
// is touched first and the work that does not depend on it overlaps the miss.
func (a *Accumulator) add(ev *trace.Event) {
	if a.opts.Group != nil {
		a.group(ev).add(ev)
	}
	op := ev.Op
	if op >= trace.NumOps {
		op = trace.OpInvalid
	}
	a.events++
	if a.src.FirstNs < 0 || ev.Start < a.src.FirstNs {
		a.src.FirstNs = ev.Start
	}
	end := ev.Start + ev.Dur
	if end > a.src.LastNs {
		a.src.LastNs = end
	}
	dur := ev.Dur
	failed := ev.Errno != 0
	class := op.Class()

	// Per file first: with many files its state is the likely cache miss, and the work
	// below does not depend on it, so the CPU overlaps the two.
	f := a.file(ev.Path)
	if k := eventKind(ev, op); k != f.kind && k != kindUnknown {
		if f.kind != kindUnknown {
			f = a.retire(ev.Path, f)
		}
		f.kind = k
	}
	f.Ops++
	f.TotalNs += dur
	f.ClassNs[class] += dur
	if failed {
		f.Errors++
	}

	// Per operation.
	o := &a.ops[op]
	o.Count++
	o.TotalNs += dur
	if dur > o.MaxNs {
		o.MaxNs = dur
	}
	if o.Hist == nil {
		o.Hist = NewHist()
	}
	a.opBuf[op].add(o.Hist, dur)
	var nbytes uint64
	if failed {
		o.Errors++
		if o.Errnos == nil {
			o.Errnos = make(map[uint16]uint64)
		}
		o.Errnos[ev.Errno]++
		o.fail(dur)
	} else if ev.Ret > 0 && HasBytes(op) {
		nbytes = uint64(ev.Ret)
		o.Bytes += nbytes
	}
	a.classes[class].Count++
	a.classes[class].TotalNs += dur

	// Per interval.
	sl := a.series.slot(ev.Start)
	sl.add(dur, failed)
	var fsl *Slot
	if a.auto {
		if ev.Start < int64(ShortTrace) {
			fsl = a.fine.slot(ev.Start)
			fsl.add(dur, failed)
		} else {
			a.auto, a.fine = false, Series{} // a long trace: per second it is
		}
	}

	a.depth.add(op, ev.Start, end)
	a.busy.add(ev.Start, end)

	// Per process.
	p := a.proc(ev.Pid, ev.Tid)
	p.Ops++
	p.TotalNs += dur
	p.ClassNs[class] += dur
	if failed {
		p.Errors++
	}
	// Over time: the bytes f gave or took (a copy's output file gets its own, copied),
	// and those the process read and wrote (a copy's count twice, as in its row).
	var moved uint64
	switch op {
	case trace.OpRead, trace.OpWrite, trace.OpCopyFileRange:
		moved = nbytes
	}
	f.heat.add(ev.Start, dur, moved)
	if op == trace.OpCopyFileRange {
		moved *= 2
	}
	p.heat.add(ev.Start, dur, moved)

	f.touched = true
	if !f.isDir && isDirEvent(ev) {
		f.isDir = true
	}

	switch op {
	case trace.OpRead, trace.OpWrite:
		write := op == trace.OpWrite
		sl.transfer(write, nbytes)
		if fsl != nil {
			fsl.transfer(write, nbytes)
		}
		if write {
			p.WriteBytes += nbytes
		} else {
			p.ReadBytes += nbytes
		}
		a.data(ev, f, write, nbytes, failed)
	case trace.OpCopyFileRange:
		sl.ReadBytes += nbytes
		sl.WriteBytes += nbytes
		if fsl != nil {
			fsl.ReadBytes += nbytes
			fsl.WriteBytes += nbytes
		}
		p.ReadBytes += nbytes
		p.WriteBytes += nbytes
		if !failed {
			a.copied(ev, f, nbytes) // last: it may move f
		}
	case trace.OpOpen, trace.OpCreate:
		if !failed {
			f.Opens++
			if op == trace.OpCreate && ev.Ret > f.SizeAttr {
				f.SizeAttr = ev.Ret
			}
			if ev.Handle != 0 {
				a.closeHandle(f, ev.Handle) // a reused handle number: the old one is gone
				st := a.handle(f, ev.Handle, ev.Path)
				st.opened = true
			}
		}
	case trace.OpRelease:
		if ev.Handle != 0 {
			a.closeHandle(f, ev.Handle)
		}
	case trace.OpLookup, trace.OpGetattr, trace.OpStatx, trace.OpMknod, trace.OpLink:
		if !failed && ev.Ret > f.SizeAttr {
			f.SizeAttr = ev.Ret
		}
	case trace.OpSetattr:
		if !failed && ev.Flags&trace.SetattrSize != 0 && ev.Offset > f.SizeAttr {
			f.SizeAttr = ev.Offset
		}
	}
	if a.pipe != nil {
		a.pipe.add(ev)
	} else if a.calls != nil {
		a.calls.add(ev)
	}
}

// group returns the Accumulator of ev's group (Options.Group).
func (a *Accumulator) group(ev *trace.Event) *Accumulator {
	if a.lastGroup != nil && ev.Pid == a.lastGPid && ev.Uid == a.lastGUid {
		return a.lastGroup
	}
	k := a.opts.Group(ev)
	g := a.groups[k]
	if g == nil {
		o := a.opts
		o.Group = nil
		o.CallsAside = false
		if o.auto {
			o.Interval = 0
		}
		g = NewAccumulator(a.src.Name, &a.src.Header, o)
		if a.groups == nil {
			a.groups = map[string]*Accumulator{}
		}
		a.groups[k] = g
	}
	a.lastGroup, a.lastGPid, a.lastGUid = g, ev.Pid, ev.Uid
	return g
}

// copied counts a copy_file_range's bytes as read from its input file f and written to
// its output file, and marks both handles used. It may create the output file's state,
// which moves the other files' (f included).
func (a *Accumulator) copied(ev *trace.Event, f *fileAgg, nbytes uint64) {
	f.ReadBytes += nbytes
	if ev.Handle != 0 {
		a.handle(f, ev.Handle, ev.Path).used = true
	}
	if ev.Path2 == 0 {
		return
	}
	out := a.file(ev.Path2)
	out.touched = true
	out.WriteBytes += nbytes
	out.heat.add(ev.Start, 0, nbytes)
	if ev.Handle2 != 0 {
		a.handle(out, ev.Handle2, ev.Path2).used = true
	}
}

// retire ends the current life of path id, whose state is f, and returns the fresh state
// of its next life. A track of sampled offsets stays with the life it sampled.
func (a *Accumulator) retire(id uint32, f *fileAgg) *fileAgg {
	old := *f
	if old.sampler != 0 {
		t := a.samplers[old.sampler-1]
		t.retired, t.Bytes = true, old.ReadBytes+old.WriteBytes
		old.sampler = 0
	}
	a.retired = append(a.retired, retiredFile{id: id, agg: old})
	*f = fileAgg{}
	return f
}

// data handles a read or write.
func (a *Accumulator) data(ev *trace.Event, f *fileAgg, write bool, nbytes uint64, failed bool) {
	dur := ev.Dur
	b := SizeBucket(ev.Size)
	ss, sb := &a.readSizes[b], &a.sizeBuf[0][b]
	if write {
		ss, sb = &a.writeSizes[b], &a.sizeBuf[1][b]
	}
	ss.Count++
	ss.Bytes += nbytes
	ss.TotalNs += dur
	if ss.Hist == nil {
		ss.Hist = NewHist()
	}
	sb.add(ss.Hist, dur)

	if write {
		f.WriteOps++
		f.WriteBytes += nbytes
		f.WriteNs += dur
		if f.WriteSizes[b] != math.MaxUint32 {
			f.WriteSizes[b]++
		}
	} else {
		f.ReadOps++
		f.ReadBytes += nbytes
		f.ReadNs += dur
		if f.ReadSizes[b] != math.MaxUint32 {
			f.ReadSizes[b]++
		}
	}
	if failed {
		return
	}

	// Sequential or random, per handle (per file when there is none).
	var seq bool
	off := ev.Offset
	if ev.Handle != 0 {
		st := a.handle(f, ev.Handle, ev.Path)
		seq = (st.hasNext && off == st.nextOff) || (!st.hasNext && off == 0)
		st.nextOff, st.hasNext, st.used = off+int64(nbytes), true, true
	} else {
		seq = (f.hasNext && off == f.nextOff) || (!f.hasNext && off == 0)
		f.nextOff, f.hasNext = off+int64(nbytes), true
	}
	switch {
	case write && seq:
		f.SeqWrites++
		f.SeqWriteBytes += nbytes
	case write:
		f.RandWrites++
		f.RandWriteBytes += nbytes
	case seq:
		f.SeqReads++
		f.SeqReadBytes += nbytes
	default:
		f.RandReads++
		f.RandReadBytes += nbytes
	}
	if e := off + int64(nbytes); e > f.MaxEnd {
		f.MaxEnd = e
	}
	if !write && nbytes > 0 {
		n := f.ranges.add(off, off+int64(nbytes))
		f.RereadBytes += n
		if n == nbytes {
			f.Rereads++
			f.RereadOnlyBytes += nbytes
			f.RereadNs += dur
			a.re.add(nbytes, dur, &a.reBuf)
		} else {
			f.FirstReads++
			f.FirstReadBytes += nbytes
			f.FirstReadNs += dur
			a.first.add(nbytes, dur, &a.firstBuf)
		}
		if !f.firstByte {
			f.firstByte, f.FirstByteNs = true, dur
			if a.ttfb == nil {
				a.ttfb = NewHist()
			}
			record(a.ttfb, dur)
		}
	}
	a.sample(ev, f, write, nbytes)
}

// sample records an offset point for the offset-vs-time view when f is (or becomes) one of
// the sampled files. A file becomes sampled at its first data op while there is room, or
// when it has moved more than twice the bytes of the least busy sampled file, which it then
// replaces (its earlier points are lost; OffsetTrack.From says when sampling began).
func (a *Accumulator) sample(ev *trace.Event, f *fileAgg, write bool, nbytes uint64) {
	if f.sampler == 0 {
		fb := f.ReadBytes + f.WriteBytes
		if len(a.samplers) < a.opts.MaxSampledFiles {
			a.samplers = append(a.samplers, &OffsetTrack{pathID: ev.Path, From: ev.Start})
			f.sampler = int32(len(a.samplers))
			a.samplerMin = 0
		} else {
			if fb <= 2*a.samplerMin {
				return
			}
			// Find the least busy sampled file.
			mi, mb := -1, uint64(0)
			for i, t := range a.samplers {
				tf := a.file(t.pathID)
				tb := tf.ReadBytes + tf.WriteBytes
				if mi < 0 || tb < mb {
					mi, mb = i, tb
				}
			}
			a.samplerMin = mb
			if fb <= 2*mb {
				return
			}
			old := a.samplers[mi]
			a.file(old.pathID).sampler = 0
			old.pathID = ev.Path
			old.From = ev.Start
			old.Points = old.Points[:0]
			old.Stride, old.seen = 0, 0
			f.sampler = int32(mi + 1)
			a.samplerMin = 0
		}
	}
	t := a.samplers[f.sampler-1]
	t.add(OffsetPoint{T: ev.Start, Off: ev.Offset, Len: uint32(min(nbytes, 1<<32-1)), Write: write}, a.opts.MaxPoints)
}

// Finish resolves names and returns the trace's Stats. footer is the trace's footer (nil
// when the trace was cut short); damage lists what the reader had to skip. The
// Accumulator must not be used afterwards.
func (a *Accumulator) Finish(r Resolver, footer *trace.Footer, damage []error) *Stats {
	for a.order.Len() > 0 {
		a.add(a.order.Pop())
	}
	for i := range a.opBuf {
		a.opBuf[i].flush()
	}
	for i := range a.sizeBuf {
		for j := range a.sizeBuf[i] {
			a.sizeBuf[i][j].flush()
		}
	}
	a.firstBuf.flush()
	a.reBuf.flush()
	s := New()
	for k, g := range a.groups {
		if s.Groups == nil {
			s.Groups = map[string]*Stats{}
		}
		s.Groups[k] = g.Finish(r, footer, damage)
	}
	src := a.src
	src.Unordered = a.order.Late
	src.Footer = footer
	for _, d := range damage {
		src.Damage = append(src.Damage, d.Error())
	}
	src.Events = a.events
	if a.pipe != nil {
		a.calls = a.pipe.view()
	}
	if a.calls != nil {
		s.Calls = a.calls.finish(&src)
		s.CallFirstReads, s.CallRereads = a.calls.first, a.calls.re
		s.CallPaths, s.AccessSizes = a.calls.callPaths(r), a.calls.sizes
	}
	if src.FirstNs < 0 {
		src.FirstNs = 0
	}
	src.Samples, src.Moved = samplesOf(r), moved(&a.ops)
	src.BusyNs, src.BusyLate = a.busy.total(), a.busy.late
	s.Sources = []Source{src}
	s.Events = a.events
	s.Ops = a.ops
	s.Classes = a.classes
	s.ReadSizes = a.readSizes
	s.WriteSizes = a.writeSizes
	s.TTFB = a.ttfb
	s.FirstReads, s.Rereads = a.first, a.re
	// Handles still open at the end count as unused if nothing was read or written.
	for h := range a.handles {
		a.closeHandle(nil, h)
	}
	a.eachFile(func(_ uint32, f *fileAgg) {
		if f.h != 0 {
			a.closeHandle(f, f.h)
		}
	})
	add := func(id uint32, f *fileAgg) {
		if !f.touched {
			return
		}
		fs := f.stats(pathName(r, id), a.src.Header.WallStart)
		k := FileKey(fs.Path, fs.IsDir)
		if d := s.Files[k]; d != nil {
			d.merge(&fs)
		} else {
			s.Files[k] = &fs
		}
		s.Patterns.merge(&fs.Patterns)
	}
	for i := range a.retired {
		rf := &a.retired[i].agg
		if rf.h != 0 && rf.hs.opened && !rf.hs.used {
			rf.UnusedOpen++
		}
		add(a.retired[i].id, rf)
	}
	a.eachFile(add)
	host := a.src.Header.Hostname
	var names map[uint32]trace.Process
	if r != nil {
		names = processNames(r)
	}
	for i := range a.procs {
		p := &a.procs[i]
		k := ProcKey{Host: host, Pid: p.Pid}
		pr, ok := names[p.Pid]
		if !ok && r != nil {
			pr, ok = r.Process(p.tid)
		}
		if ok {
			k.Comm = pr.Comm
			p.Exe, p.Cmdline = pr.Exe, pr.Cmdline
		}
		ps := p.ProcStats
		ps.ProcKey = k
		ps.Heat = p.heat.export(a.src.Header.WallStart)
		if d := s.Procs[k]; d != nil {
			d.merge(&ps)
		} else {
			s.Procs[k] = &ps
		}
	}
	s.Series = a.series
	if a.auto && a.src.LastNs < int64(ShortTrace) && len(a.fine.Slots) > 0 {
		s.Series = a.fine
		for len(s.Series.Slots) > maxAutoSlots && s.Series.Width < time.Second {
			s.Series.coarsen()
		}
	}
	s.Series.max = a.opts.MaxIntervals
	s.Inflight = a.depth.finish()
	for s.Inflight.Series.Width < s.Series.Width {
		s.Inflight.Series.coarsen()
	}
	for _, t := range a.samplers {
		if !t.retired {
			f := a.file(t.pathID)
			t.Bytes = f.ReadBytes + f.WriteBytes
		}
		t.Host = host
		t.Path = pathName(r, t.pathID)
		t.Start = a.src.Header.WallStart
		s.Offsets = append(s.Offsets, t)
	}
	*a = Accumulator{}
	return s
}

func pathName(r Resolver, id uint32) string {
	if id == 0 {
		return "?"
	}
	if r == nil {
		if id == trace.RootPath {
			return ""
		}
		return "?" + itoa(uint64(id))
	}
	return r.PathName(id)
}

// ErrNoEvents is returned by helpers when a trace held no events at all.
var ErrNoEvents = errors.New("stats: trace has no events")

// WallNs returns the wall-clock time the sources' events cover: the union of each
// source's span, from its first event's start to its last event's end. Traces made one
// after another (the runs of replay --repeat) add their own spans, without the time
// between them; traces made at once (the nodes of a job) count the time they overlap once.
func (s *Stats) WallNs() int64 {
	type span struct{ from, to int64 } // Unix ns
	var spans []span
	for i := range s.Sources {
		src := &s.Sources[i]
		if src.Events == 0 {
			continue
		}
		from := src.Header.WallStart.Add(time.Duration(src.FirstNs)).UnixNano()
		spans = append(spans, span{from, from + max(0, src.LastNs-src.FirstNs)})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var total, end int64
	for i, sp := range spans {
		if i == 0 || sp.from > end {
			total += sp.to - sp.from
			end = sp.to
		} else if sp.to > end {
			total += sp.to - end
			end = sp.to
		}
	}
	return total
}

// Span returns the wall-clock time from the first event's start to the last event's end
// of all sources (WallNs leaves out the time no source covers).
func (s *Stats) Span() (start, end time.Time) {
	for i := range s.Sources {
		src := &s.Sources[i]
		if src.Events == 0 {
			continue
		}
		st := src.Header.WallStart.Add(time.Duration(src.FirstNs))
		en := src.Header.WallStart.Add(time.Duration(src.LastNs))
		if start.IsZero() || st.Before(start) {
			start = st
		}
		if en.After(end) {
			end = en
		}
	}
	return start, end
}
