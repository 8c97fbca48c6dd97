package fusefs

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/fusefs/internal/procconn"
	"github.com/iotap/iotap/fusefs/internal/servicetime"
	"github.com/iotap/iotap/internal/loghist"
	"github.com/iotap/iotap/trace"
)

// tracer is a fuse.RawFileSystem that times every request served by inner (the fs.NewNodeFS
// bridge) and records it. It implements every RawFileSystem method itself, without
// embedding, so a method added by a go-fuse upgrade cannot go through untimed
// (TestTracerDefinesEveryRawMethod enforces it).
type tracer struct {
	// What every request reads, in the struct's first 128 bytes: spread over the struct,
	// behind the 16 KiB caller cache, these fields would take five to six cache lines, which a
	// mount's kernel and application work evict between two requests.
	inner        fuse.RawFileSystem
	w            *trace.Writer // rec, when it is the trace writer (called directly)
	nodes        *nodeTable
	serviceTimes *servicetime.Table // service times from the node code (nil: handler times)
	origin       int64
	byOp         *[trace.NumOps]opCost // with Options.CostByOp
	costShift    uint8                 // the layer times its own work on one request in 1<<costShift
	comms        bool                  // len(opts.Comms) > 0
	self         uint32                // this process's pid with Options.IgnoreSelf, else 0

	rec     Recorder
	uids    map[uint32]bool               // record only these uids when non-nil
	filter  *pathFilter                   // nil without path filters
	handles *handleTable                  // fh → opener, from open/create/opendir replies
	procs   *shardedMap[uint32, procInfo] // tid → attribution, without conn
	conn    *procconn.Resolver            // tid → attribution from the proc connector (nil: from /proc)

	opts     Options
	pcache   [procCacheSize]procSlot // direct-mapped cache in front of procs
	seen     bitset                  // path ids already described by AddFile (or created)
	counters costCounters

	probe            string // Options.ProbeName
	probeN, probeDur atomic.Uint64
}

var _ fuse.RawFileSystem = (*tracer)(nil)

func newTracer(inner fuse.RawFileSystem, rec Recorder, o Options) *tracer {
	trace.CalibrateClock()
	t := &tracer{
		inner:   inner,
		rec:     rec,
		origin:  rec.Origin(),
		opts:    o,
		filter:  newPathFilter(o.Include, o.Exclude),
		handles: newHandleTable(),
		procs:   newShardedMap[uint32, procInfo](),

		costShift: costSampleShift,
		comms:     len(o.Comms) > 0,
		probe:     o.ProbeName,
	}
	t.w, _ = rec.(*trace.Writer)
	if o.CostByOp {
		t.byOp = new([trace.NumOps]opCost)
		t.costShift = 0
	}
	t.nodes = newNodeTable(t.intern)
	if o.Passthrough {
		t.nodes.past = newPastPaths()
	}
	if k, ok := rec.(pathKeeper); ok {
		// The recorder's path index keeps the paths of the nodes the kernel holds and
		// forgets the rest when it reaches its limit: memory follows the job's live files,
		// not every name it ever used.
		var forgot func([]uint32)
		if f := t.filter; f != nil {
			forgot = func(ids []uint32) { f.forget(ids, t.nodes.byPath.liveSet()) }
		}
		k.KeepPaths(t.nodes.byPath.liveSet, forgot)
	}
	if o.IgnoreSelf {
		t.self = uint32(os.Getpid())
	}
	if len(o.UIDs) > 0 {
		t.uids = make(map[uint32]bool, len(o.UIDs))
		for _, u := range o.UIDs {
			t.uids[u] = true
		}
	}
	return t
}

// eventPool holds the copies handed to a Recorder other than the trace writer (an event
// passed to an interface method escapes to the heap).
var eventPool = sync.Pool{New: func() any { return new(trace.Event) }}

// event starts the event of a request. It lives on the handler's stack: the trace writer
// copies it, and a pooled event would be one more cold cache line per request.
func event(op trace.Op, h *fuse.InHeader) trace.Event {
	ev := trace.Event{Op: op}
	if h != nil {
		ev.Node = h.NodeId
		ev.Unique = h.Unique
		ev.Tid = h.Pid
		ev.Uid = h.Uid
		ev.Gid = h.Gid
	}
	return ev
}

// span is one request's clock readings.
type span struct {
	te, t0, t1 int64           // layer entry, bridge call (te and the layer's own timing: sampled requests)
	s0, s1     int64           // the times recorded: the backend call the node code measured, else t0..t1
	slow       int64           // ns of /proc lookups in the request (excluded from the sampled times)
	sl         servicetime.Ref // service-time slot
	sampled    bool            // the layer times its own work on this request
}

// enter starts a request whose node code does not measure a backend call. key picks the
// requests whose own work is timed (see sampled).
func (t *tracer) enter(key uint64) span {
	c := span{sl: servicetime.None, sampled: sampled(key, t.costShift)}
	c.t0 = now()
	c.te = c.t0
	return c
}

// enterMeasured starts a request whose node code may measure the backend call (package
// servicetime): it claims the slot of cancel.
func (t *tracer) enterMeasured(cancel <-chan struct{}, key uint64) span {
	c := span{sampled: sampled(key, t.costShift)}
	if c.sampled {
		c.te = now()
	}
	c.sl = t.serviceTimes.Begin(cancel)
	c.t0 = now()
	return c
}

// leave ends the bridge call: it releases the service-time slot and sets the times to
// record. When the node code measured the backend call, the bridge's end is read only on a
// sampled request (the layer's own timing needs it; the event does not).
func (t *tracer) leave(c *span) {
	if c.sl != servicetime.None {
		if s0, s1, ok := t.serviceTimes.Take(c.sl, c.t0); ok {
			c.s0, c.s1 = s0, s1
			if c.sampled {
				c.t1 = now()
			}
			return
		}
	}
	c.t1 = now()
	c.s0, c.s1 = c.t0, c.t1
}

// commit finishes ev (times, errno, attribution), applies the filters and records it.
func (t *tracer) commit(ev *trace.Event, c *span, st fuse.Status) {
	t.record(ev, c, st)
	if c.sampled {
		t.cost(ev.Op, ev.Tid, c)
	}
}

// record sets ev's times and errno, counts it, and appends it if it passes the filters.
func (t *tracer) record(ev *trace.Event, c *span, st fuse.Status) {
	ev.Start = c.s0 - t.origin
	ev.Dur = max(c.s1-c.s0, 0) // the cycle clock of another CPU may be a few ns behind
	if st != fuse.OK {
		ev.Errno = uint16(st)
	}
	t.counters.count(ev.Tid)
	if t.byOp != nil && ev.Op < trace.NumOps {
		t.byOp[ev.Op].n.Add(1)
	}
	if !t.keep(ev, c) {
		return
	}
	if t.w != nil {
		t.w.Append(ev) // a concrete call: ev does not escape
		return
	}
	p := eventPool.Get().(*trace.Event)
	*p = *ev
	t.rec.Append(p)
	eventPool.Put(p)
}

// cost accounts a sampled request's time in the layer, from its entry te to now, and the
// layer's own part of it: everything but the bridge's t0..t1, less the /proc lookups
// (counted apart, on every request). The atomic adds after the last clock read are the
// only work of the layer left out.
func (t *tracer) cost(op trace.Op, tid uint32, c *span) {
	tx := now()
	in := tx - c.te - c.slow
	self := in - (c.t1 - c.t0)
	t.counters.timed(tid, in, self)
	if t.byOp != nil && op < trace.NumOps {
		t.byOp[op].add(self)
	}
}

// opCost is one operation's requests, the sampled ones and their summed own work (ns,
// without /proc lookups), with Options.CostByOp; hist counts the sampled requests by own
// work, in buckets of a quarter of a power of two, for a median that a few preempted
// requests do not move.
type opCost struct {
	n, sampled, self atomic.Uint64
	hist             [costBuckets]atomic.Uint64
}

const costBuckets = 64 * 4

func (c *opCost) add(self int64) {
	v := uint64(max(self, 0))
	c.sampled.Add(1)
	c.self.Add(v)
	c.hist[costBucket(v)].Add(1)
}

// costBits sets the cost histogram's resolution: 2^costBits buckets per power of two
// (package loghist).
const costBits = 2

// costBucket is v's bucket.
func costBucket(v uint64) int { return loghist.Bucket(v, costBits) }

// costBucketMid is the middle of bucket b's range.
func costBucketMid(b int) uint64 {
	lo := loghist.Low(b, costBits)
	return lo + (loghist.High(b, costBits)-lo+1)/2
}

// median is the middle of the bucket holding the median sampled request.
func (c *opCost) median() uint64 {
	var total uint64
	for i := range c.hist {
		total += c.hist[i].Load()
	}
	var cum uint64
	for i := range c.hist {
		if cum += c.hist[i].Load(); total > 0 && cum*2 >= total {
			return costBucketMid(i)
		}
	}
	return 0
}

// keep resolves the caller of ev and applies the uid, comm and path filters, and leaves
// out the serving process's own requests (Options.IgnoreSelf).
func (t *tracer) keep(ev *trace.Event, c *span) bool {
	if ev.Tid != 0 && (ev.Pid == 0 || t.comms) {
		p := t.proc(ev.Tid, c)
		ev.Pid = p.pid
		if !p.record {
			return false
		}
	}
	if t.self != 0 && ev.Pid == t.self {
		return false
	}
	if ev.Tid == 0 && t.comms {
		return false // kernel-originated and not attributable to a recorded command
	}
	if t.uids != nil && !t.uids[ev.Uid] {
		return false
	}
	if t.filter != nil && !t.filter.ok(ev.Path) {
		return false
	}
	return true
}

// child interns parent/name for a name operation on directory node dir.
func (t *tracer) child(dir uint64, name string) uint32 {
	return t.intern(t.nodes.path(dir), name)
}

// intern returns the path id of parent/name.
func (t *tracer) intern(parent uint32, name string) uint32 {
	id := t.rec.Path(parent, name)
	if t.filter != nil {
		t.filter.learn(id, parent, name)
	}
	return id
}

// entry maps a node id returned in an entry reply to its path. lookup is true for replies
// describing an existing object (LOOKUP, READDIRPLUS): the first such sighting of a path is
// recorded with AddFile. Objects the job creates are marked seen without a File record.
func (t *tracer) entry(node uint64, dir uint64, name string, path uint32, a *fuse.Attr, lookup bool, at int64) {
	if node == 0 {
		return
	}
	t.nodes.ref(node, path, dir, name, a.Mode&syscall.S_IFMT == syscall.S_IFDIR)
	if path == 0 || !t.seen.testAndSet(path) || !lookup {
		return
	}
	t.rec.AddFile(trace.File{
		Path:  path,
		Type:  trace.TypeOfMode(a.Mode),
		Mode:  a.Mode & 0o7777,
		Size:  int64(a.Size),
		Seen:  at - t.origin,
		Nlink: a.Nlink,
	})
}

// opened remembers who opened handle fh.
func (t *tracer) opened(fh uint64, ev *trace.Event, c *span) {
	o := opener{tid: ev.Tid, uid: ev.Uid, gid: ev.Gid}
	if ev.Tid != 0 {
		o.pid = t.proc(ev.Tid, c).pid
		ev.Pid = o.pid
	}
	t.handles.set(fh, o)
}

// asOpener attributes a request without a caller (pid 0) to the handle's opener. A release
// also forgets the handle (go-fuse reuses handle numbers).
func (t *tracer) asOpener(ev *trace.Event, fh uint64, release bool) {
	var o opener
	var ok bool
	if release {
		o, ok = t.handles.del(fh)
	} else if ev.Tid == 0 {
		o, ok = t.handles.get(fh)
	}
	if ok && ev.Tid == 0 {
		ev.Tid, ev.Pid, ev.Uid, ev.Gid = o.tid, o.pid, o.uid, o.gid
	}
}

// --- RawFileSystem ---

// String names the file system in go-fuse's debug output.
func (t *tracer) String() string { return "iotap(" + t.inner.String() + ")" }

// SetDebug forwards to the bridge.
func (t *tracer) SetDebug(debug bool) { t.inner.SetDebug(debug) }

// Init forwards the server to the bridge (notifications need it).
func (t *tracer) Init(s *fuse.Server) { t.inner.Init(s) }

// OnUnmount forwards to the bridge.
func (t *tracer) OnUnmount() { t.inner.OnUnmount() }

func (t *tracer) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if t.probe != "" && h.NodeId == fuse.FUSE_ROOT_ID && name == t.probe {
		return t.probed(now())
	}
	c := t.enterMeasured(cancel, h.Unique)
	st := t.inner.Lookup(cancel, h, name, out)
	t.leave(&c)
	ev := event(trace.OpLookup, h)
	if st == fuse.OK && out.NodeId != 0 {
		ev.Node2, ev.Ret, ev.Mode = out.NodeId, int64(out.Size), out.Mode
		var known bool
		if ev.Path, known = t.nodes.refKnown(out.NodeId, h.NodeId, name); !known {
			// First sighting under this name (a known node was already described).
			ev.Path = t.child(h.NodeId, name)
			t.entry(out.NodeId, h.NodeId, name, ev.Path, &out.Attr, true, c.s1)
		}
	} else if ev.Path = t.child(h.NodeId, name); st == fuse.OK {
		// A negative entry (node id 0, cached by the kernel): the caller sees ENOENT.
		t.commit(&ev, &c, fuse.ENOENT)
		return st
	}
	t.commit(&ev, &c, st)
	return st
}

// probed answers a lookup of Options.ProbeName that entered the layer at t0: ENOENT,
// unrecorded, its handling timed.
func (t *tracer) probed(t0 int64) fuse.Status {
	t.probeN.Add(1)
	t.probeDur.Add(uint64(max(now()-t0, 0)))
	return fuse.ENOENT
}

func (t *tracer) Forget(nodeid, nlookup uint64) {
	c := t.enter(nodeid)
	t.inner.Forget(nodeid, nlookup)
	t.leave(&c)
	ev := event(trace.OpForget, nil)
	ev.Node = nodeid
	ev.Path = t.nodes.path(nodeid)
	ev.Ret = int64(nlookup)
	t.nodes.forget(nodeid, nlookup)
	t.commit(&ev, &c, fuse.OK)
}

func (t *tracer) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.GetAttr(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpGetattr, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle = in.Fh()
	if st == fuse.OK {
		ev.Ret, ev.Mode = int64(out.Size), out.Mode
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.SetAttr(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpSetattr, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Valid
	if in.Valid&fuse.FATTR_FH != 0 {
		ev.Handle = in.Fh
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		ev.Offset = int64(in.Size)
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		ev.Mode = in.Mode
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Mknod(cancel, in, name, out)
	t.leave(&c)
	ev := event(trace.OpMknod, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Mode = in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, c.s1)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.Mkdir(cancel, in, name, out)
	t.leave(&c)
	ev := event(trace.OpMkdir, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Mode = in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, c.s1)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c := t.enterMeasured(cancel, h.Unique)
	st := t.inner.Unlink(cancel, h, name)
	t.leave(&c)
	ev := event(trace.OpUnlink, h)
	ev.Path = t.child(h.NodeId, name)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	c := t.enterMeasured(cancel, h.Unique)
	st := t.inner.Rmdir(cancel, h, name)
	t.leave(&c)
	ev := event(trace.OpRmdir, h)
	ev.Path = t.child(h.NodeId, name)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName string, newName string) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.Rename(cancel, in, oldName, newName)
	t.leave(&c)
	ev := event(trace.OpRename, &in.InHeader)
	ev.Path = t.child(in.NodeId, oldName)
	ev.Path2 = t.child(in.Newdir, newName)
	ev.Node2 = in.Newdir
	ev.Flags = in.Flags
	if st == fuse.OK {
		t.nodes.rename(ev.Path, ev.Path2, in.NodeId, oldName, in.Newdir, newName, in.Flags&trace.RenameExchange != 0, c.s0)
		// The object now at the new name is the one the trace knew at the old: a later
		// lookup of the new name is no first sighting (no File record).
		if ev.Path2 != 0 {
			t.seen.testAndSet(ev.Path2)
		}
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Link(cancel, in, name, out)
	t.leave(&c)
	ev := event(trace.OpLink, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Path2 = t.nodes.path(in.Oldnodeid)
	if st == fuse.OK {
		ev.Node2, ev.Ret, ev.Mode = out.NodeId, int64(out.Size), out.Mode
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, c.s1)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Symlink(cancel <-chan struct{}, h *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	c := t.enter(h.Unique)
	st := t.inner.Symlink(cancel, h, pointedTo, linkName, out)
	t.leave(&c)
	ev := event(trace.OpSymlink, h)
	ev.Path = t.child(h.NodeId, linkName)
	ev.Path2 = t.rec.Raw(pointedTo)
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, h.NodeId, linkName, ev.Path, &out.Attr, false, c.s1)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	c := t.enterMeasured(cancel, h.Unique)
	out, st := t.inner.Readlink(cancel, h)
	t.leave(&c)
	ev := event(trace.OpReadlink, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Ret = int64(len(out))
	t.commit(&ev, &c, st)
	return out, st
}

func (t *tracer) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Access(cancel, in)
	t.leave(&c)
	ev := event(trace.OpAccess, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Mask
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c := t.enter(h.Unique)
	sz, st := t.inner.GetXAttr(cancel, h, attr, dest)
	t.leave(&c)
	ev := event(trace.OpGetxattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Size = uint32(len(dest))
	ev.Ret = int64(sz)
	t.commit(&ev, &c, st)
	return sz, st
}

func (t *tracer) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	c := t.enter(h.Unique)
	sz, st := t.inner.ListXAttr(cancel, h, dest)
	t.leave(&c)
	ev := event(trace.OpListxattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Size = uint32(len(dest))
	ev.Ret = int64(sz)
	t.commit(&ev, &c, st)
	return sz, st
}

func (t *tracer) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.SetXAttr(cancel, in, attr, data)
	t.leave(&c)
	ev := event(trace.OpSetxattr, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Size = in.Size
	ev.Flags = in.Flags
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	c := t.enter(h.Unique)
	st := t.inner.RemoveXAttr(cancel, h, attr)
	t.leave(&c)
	ev := event(trace.OpRemovexattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.Create(cancel, in, name, out)
	t.leave(&c)
	ev := event(trace.OpCreate, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Flags, ev.Mode = in.Flags, in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Handle, ev.Ret = out.NodeId, out.Fh, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, c.s1)
		t.opened(out.Fh, &ev, &c)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Tmpfile(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpTmpfile, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId) // the directory: the file has no name
	ev.Flags, ev.Mode = in.Flags, in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Handle = out.NodeId, out.Fh
		t.entry(out.NodeId, 0, "", 0, &out.Attr, false, c.s1)
		t.opened(out.Fh, &ev, &c)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.Open(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpOpen, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Flags
	if st == fuse.OK {
		ev.Handle = out.Fh
		t.opened(out.Fh, &ev, &c)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	c := t.enterMeasured(cancel, in.Unique)
	res, st := t.inner.Read(cancel, in, buf)
	t.leave(&c)
	ev := event(trace.OpRead, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK && res != nil {
		ev.Ret = int64(res.Size())
	}
	t.commit(&ev, &c, st)
	return res, st
}

func (t *tracer) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Lseek(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpLseek, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Flags = in.Fh, int64(in.Offset), in.Whence
	if st == fuse.OK {
		ev.Ret = int64(out.Offset)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) lock(op trace.Op, in *fuse.LkIn) trace.Event {
	ev := event(op, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags, ev.Offset = in.Fh, in.Lk.Typ, int64(in.Lk.Start)
	if in.Lk.End >= in.Lk.Start && in.Lk.End-in.Lk.Start < 1<<32-1 {
		ev.Size = uint32(in.Lk.End - in.Lk.Start + 1)
	}
	return ev
}

func (t *tracer) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.GetLk(cancel, in, out)
	t.leave(&c)
	ev := t.lock(trace.OpGetlk, in)
	if st == fuse.OK {
		ev.Ret = int64(out.Lk.Typ)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.SetLk(cancel, in)
	t.leave(&c)
	ev := t.lock(trace.OpSetlk, in)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.SetLkw(cancel, in)
	t.leave(&c)
	ev := t.lock(trace.OpSetlkw, in)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	c := t.enter(in.Unique)
	t.inner.Release(cancel, in)
	t.leave(&c)
	ev := event(trace.OpRelease, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.Flags
	t.asOpener(&ev, in.Fh, true)
	t.commit(&ev, &c, fuse.OK)
}

func (t *tracer) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	c := t.enterMeasured(cancel, in.Unique)
	n, st := t.inner.Write(cancel, in, data)
	t.leave(&c)
	t.written(in, n, &c, st)
	return n, st
}

// Writev is where go-fuse v2.12 sends WRITE first; ENOSYS makes the server retry with Write,
// so that reply is not recorded (the Write is).
func (t *tracer) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	c := t.enterMeasured(cancel, in.Unique)
	n, st := t.inner.Writev(cancel, in, data)
	t.leave(&c)
	if st == fuse.ENOSYS {
		return n, st
	}
	t.written(in, n, &c, st)
	return n, st
}

func (t *tracer) written(in *fuse.WriteIn, n uint32, c *span, st fuse.Status) {
	ev := event(trace.OpWrite, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size, ev.Flags = in.Fh, int64(in.Offset), in.Size, in.WriteFlags
	if in.WriteFlags&fuse.WRITE_CACHE != 0 {
		// A write-back of dirty pages (cache=kernel), sent by whichever thread flushed
		// them: it belongs to the handle's opener.
		ev.Tid, ev.Pid = 0, 0
		t.asOpener(&ev, in.Fh, false)
	}
	if st == fuse.OK {
		ev.Ret = int64(n)
	}
	t.commit(&ev, c, st)
}

func (t *tracer) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	c := t.enter(in.Unique)
	n, st := t.inner.CopyFileRange(cancel, in)
	t.leave(&c)
	ev := event(trace.OpCopyFileRange, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Path2 = t.nodes.path(in.NodeIdOut)
	ev.Node2, ev.Handle, ev.Handle2 = in.NodeIdOut, in.FhIn, in.FhOut
	ev.Offset, ev.Offset2, ev.Flags = int64(in.OffIn), int64(in.OffOut), uint32(in.Flags)
	ev.Size = uint32(min(in.Len, 1<<32-1))
	if st == fuse.OK {
		ev.Ret = int64(n)
	}
	t.commit(&ev, &c, st)
	return n, st
}

func (t *tracer) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Ioctl(cancel, in, inbuf, out, outbuf)
	t.leave(&c)
	ev := event(trace.OpIoctl, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags, ev.Size = in.Fh, in.Cmd, in.InSize
	if st == fuse.OK {
		ev.Ret = int64(out.Result)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Flush(cancel, in)
	t.leave(&c)
	ev := event(trace.OpFlush, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle = in.Fh
	t.asOpener(&ev, in.Fh, false)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Fsync(cancel, in)
	t.leave(&c)
	ev := event(trace.OpFsync, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.FsyncFlags
	t.asOpener(&ev, in.Fh, false)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Fallocate(cancel, in)
	t.leave(&c)
	ev := event(trace.OpFallocate, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Flags = in.Fh, int64(in.Offset), in.Mode
	ev.Size = uint32(min(in.Length, 1<<32-1))
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	c := t.enterMeasured(cancel, in.Unique)
	st := t.inner.OpenDir(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpOpendir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Flags
	if st == fuse.OK {
		ev.Handle = out.Fh
		t.opened(out.Fh, &ev, &c)
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.ReadDir(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpReaddir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK {
		ev.Ret = int64(len(out.Bytes()))
	}
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.ReadDirPlus(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpReaddirplus, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK {
		buf := out.Bytes()
		ev.Ret = int64(len(buf))
		t.plusEntries(in.NodeId, ev.Path, buf, c.s1)
	}
	t.commit(&ev, &c, st)
	return st
}

// Layout of a READDIRPLUS reply: repeated {EntryOut, dirent{ino, off u64; namelen, type u32},
// name, padding to 8 bytes}.
const (
	entryOutSize = int(unsafe.Sizeof(fuse.EntryOut{}))
	direntSize   = 24
)

// plusEntries maps the node ids handed to the kernel in a READDIRPLUS reply: the kernel may
// use them without a LOOKUP.
func (t *tracer) plusEntries(dir uint64, dirPath uint32, buf []byte, at int64) {
	for len(buf) >= entryOutSize+direntSize {
		eo := (*fuse.EntryOut)(unsafe.Pointer(&buf[0]))
		nameLen := int(*(*uint32)(unsafe.Pointer(&buf[entryOutSize+16])))
		rec := entryOutSize + direntSize + (nameLen+7)&^7
		if nameLen > len(buf)-entryOutSize-direntSize {
			t.rec.CountError()
			return
		}
		if eo.NodeId != 0 {
			name := string(buf[entryOutSize+direntSize : entryOutSize+direntSize+nameLen])
			t.entry(eo.NodeId, dir, name, t.intern(dirPath, name), &eo.Attr, true, at)
		}
		if rec > len(buf) {
			return
		}
		buf = buf[rec:]
	}
}

func (t *tracer) ReleaseDir(in *fuse.ReleaseIn) {
	c := t.enter(in.Unique)
	t.inner.ReleaseDir(in)
	t.leave(&c)
	ev := event(trace.OpReleasedir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.Flags
	t.asOpener(&ev, in.Fh, true)
	t.commit(&ev, &c, fuse.OK)
}

func (t *tracer) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.FsyncDir(cancel, in)
	t.leave(&c)
	ev := event(trace.OpFsyncdir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.FsyncFlags
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	c := t.enter(h.Unique)
	st := t.inner.StatFs(cancel, h, out)
	t.leave(&c)
	ev := event(trace.OpStatfs, h)
	ev.Path = t.nodes.path(h.NodeId)
	t.commit(&ev, &c, st)
	return st
}

func (t *tracer) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	c := t.enter(in.Unique)
	st := t.inner.Statx(cancel, in, out)
	t.leave(&c)
	ev := event(trace.OpStatx, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.SxMask
	if st == fuse.OK {
		ev.Ret, ev.Mode = int64(out.Size), uint32(out.Mode)
	}
	t.commit(&ev, &c, st)
	return st
}
