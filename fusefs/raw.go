package fusefs

import (
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/trace"
)

// tracer is a fuse.RawFileSystem that times every request served by inner (the fs.NewNodeFS
// bridge) and records it. It implements every RawFileSystem method itself, without
// embedding, so a method added by a go-fuse upgrade cannot go through untimed
// (TestTracerDefinesEveryRawMethod enforces it).
type tracer struct {
	inner  fuse.RawFileSystem
	rec    Recorder
	w      *trace.Writer // rec, when it is the trace writer (called directly)
	origin int64
	opts   Options

	uids   map[uint32]bool // record only these uids when non-nil
	filter *pathFilter     // nil without path filters

	nodes   *nodeTable
	handles *handleTable                  // fh → opener, from open/create/opendir replies
	procs   *shardedMap[uint32, procInfo] // tid → attribution
	pcache  [procCacheSize]procSlot       // direct-mapped cache in front of procs
	seen    bitset                        // path ids already described by AddFile (or created)
	svc     *svcTable                     // service times from the node code (nil: handler times)
	stats   liveStats
	byOp    *[trace.NumOps]opCost // with Options.CostByOp
}

var _ fuse.RawFileSystem = (*tracer)(nil)

func newTracer(inner fuse.RawFileSystem, rec Recorder, o Options) *tracer {
	t := &tracer{
		inner:   inner,
		rec:     rec,
		origin:  rec.Origin(),
		opts:    o,
		filter:  newPathFilter(o.Include, o.Exclude),
		handles: newHandleTable(),
		procs:   newShardedMap[uint32, procInfo](),
	}
	t.w, _ = rec.(*trace.Writer)
	if o.CostByOp {
		t.byOp = new([trace.NumOps]opCost)
	}
	t.nodes = newNodeTable(t.intern)
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
		ev.Tid = h.Pid
		ev.Uid = h.Uid
		ev.Gid = h.Gid
	}
	return ev
}

// commit finishes ev (times, errno, attribution), applies the filters and records it,
// for a request whose handler (the bridge) ran from t0 to t1.
func (t *tracer) commit(ev *trace.Event, t0, t1 int64, st fuse.Status) {
	t.record(ev, t0, t1, st)
	t.cost(ev.Op, t0, t0, t1)
}

// commitSvc is commit with the backend call's times when the node code measured one
// (see svc.go); it releases the request's slot. te is when the layer was entered, before
// it claimed the slot.
func (t *tracer) commitSvc(ev *trace.Event, sl svcRef, te, t0, t1 int64, st fuse.Status) {
	s0, s1 := t.svc.finish(sl, t0, t1)
	t.record(ev, s0, s1, st)
	t.cost(ev.Op, te, t0, t1)
}

// record sets ev's times and errno, counts it, and appends it if it passes the filters.
func (t *tracer) record(ev *trace.Event, t0, t1 int64, st fuse.Status) {
	ev.Start = t0 - t.origin
	ev.Dur = t1 - t0
	if st != fuse.OK {
		ev.Errno = uint16(st)
	}
	t.stats.op(ev.Dur, st != fuse.OK)
	if !t.keep(ev, t1) {
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

// cost accounts a request's time in the layer, from its entry te to now, and the layer's
// own part of it: everything but the bridge's t0..t1. The atomic adds after the last
// clock read are the only work of the layer left out.
func (t *tracer) cost(op trace.Op, te, t0, t1 int64) {
	tx := now()
	self := uint64(tx - te - (t1 - t0))
	t.stats.inLayer.Add(uint64(tx - te))
	t.stats.self.Add(self)
	if t.byOp != nil && op < trace.NumOps {
		t.byOp[op].n.Add(1)
		t.byOp[op].self.Add(self)
	}
}

// opCost is one operation's count and summed own work (ns), with Options.CostByOp.
type opCost struct{ n, self atomic.Uint64 }

// keep resolves the caller of ev and applies the uid, comm and path filters.
func (t *tracer) keep(ev *trace.Event, at int64) bool {
	if ev.Tid != 0 && (ev.Pid == 0 || len(t.opts.Comms) > 0) {
		p := t.proc(ev.Tid, at)
		ev.Pid = p.pid
		if !p.record {
			return false
		}
	}
	if ev.Tid == 0 && len(t.opts.Comms) > 0 {
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
func (t *tracer) opened(fh uint64, ev *trace.Event, at int64) {
	o := opener{tid: ev.Tid, uid: ev.Uid, gid: ev.Gid}
	if ev.Tid != 0 {
		o.pid = t.proc(ev.Tid, at).pid
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
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Lookup(cancel, h, name, out)
	t1 := now()
	ev := event(trace.OpLookup, h)
	if st == fuse.OK && out.NodeId != 0 {
		ev.Node2, ev.Ret, ev.Mode = out.NodeId, int64(out.Size), out.Mode
		var known bool
		if ev.Path, known = t.nodes.refKnown(out.NodeId, h.NodeId, name); !known {
			// First sighting under this name (a known node was already described).
			ev.Path = t.child(h.NodeId, name)
			t.entry(out.NodeId, h.NodeId, name, ev.Path, &out.Attr, true, t1)
		}
	} else if ev.Path = t.child(h.NodeId, name); st == fuse.OK {
		// A negative entry (node id 0, cached by the kernel): the caller sees ENOENT.
		t.commitSvc(&ev, sl, te, t0, t1, fuse.ENOENT)
		return st
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Forget(nodeid, nlookup uint64) {
	t0 := now()
	t.inner.Forget(nodeid, nlookup)
	t1 := now()
	ev := event(trace.OpForget, nil)
	ev.Node = nodeid
	ev.Path = t.nodes.path(nodeid)
	ev.Ret = int64(nlookup)
	t.nodes.forget(nodeid, nlookup)
	t.commit(&ev, t0, t1, fuse.OK)
}

func (t *tracer) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.GetAttr(cancel, in, out)
	t1 := now()
	ev := event(trace.OpGetattr, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle = in.Fh()
	if st == fuse.OK {
		ev.Ret, ev.Mode = int64(out.Size), out.Mode
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.SetAttr(cancel, in, out)
	t1 := now()
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
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	t0 := now()
	st := t.inner.Mknod(cancel, in, name, out)
	t1 := now()
	ev := event(trace.OpMknod, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Mode = in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, t1)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Mkdir(cancel, in, name, out)
	t1 := now()
	ev := event(trace.OpMkdir, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Mode = in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, t1)
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Unlink(cancel, h, name)
	t1 := now()
	ev := event(trace.OpUnlink, h)
	ev.Path = t.child(h.NodeId, name)
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Rmdir(cancel, h, name)
	t1 := now()
	ev := event(trace.OpRmdir, h)
	ev.Path = t.child(h.NodeId, name)
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName string, newName string) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Rename(cancel, in, oldName, newName)
	t1 := now()
	ev := event(trace.OpRename, &in.InHeader)
	ev.Path = t.child(in.NodeId, oldName)
	ev.Path2 = t.child(in.Newdir, newName)
	ev.Node2 = in.Newdir
	ev.Flags = in.Flags
	if st == fuse.OK {
		t.nodes.rename(ev.Path, ev.Path2, in.NodeId, oldName, in.Newdir, newName, in.Flags&renameExchange != 0)
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

const renameExchange = 2 // RENAME_EXCHANGE

func (t *tracer) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	t0 := now()
	st := t.inner.Link(cancel, in, name, out)
	t1 := now()
	ev := event(trace.OpLink, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Path2 = t.nodes.path(in.Oldnodeid)
	if st == fuse.OK {
		ev.Node2, ev.Ret, ev.Mode = out.NodeId, int64(out.Size), out.Mode
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, t1)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Symlink(cancel <-chan struct{}, h *fuse.InHeader, pointedTo string, linkName string, out *fuse.EntryOut) fuse.Status {
	t0 := now()
	st := t.inner.Symlink(cancel, h, pointedTo, linkName, out)
	t1 := now()
	ev := event(trace.OpSymlink, h)
	ev.Path = t.child(h.NodeId, linkName)
	ev.Path2 = t.rec.Raw(pointedTo)
	if st == fuse.OK {
		ev.Node2, ev.Ret = out.NodeId, int64(out.Size)
		t.entry(out.NodeId, h.NodeId, linkName, ev.Path, &out.Attr, false, t1)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	out, st := t.inner.Readlink(cancel, h)
	t1 := now()
	ev := event(trace.OpReadlink, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Ret = int64(len(out))
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return out, st
}

func (t *tracer) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	t0 := now()
	st := t.inner.Access(cancel, in)
	t1 := now()
	ev := event(trace.OpAccess, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Mask
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	t0 := now()
	sz, st := t.inner.GetXAttr(cancel, h, attr, dest)
	t1 := now()
	ev := event(trace.OpGetxattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Size = uint32(len(dest))
	ev.Ret = int64(sz)
	t.commit(&ev, t0, t1, st)
	return sz, st
}

func (t *tracer) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	t0 := now()
	sz, st := t.inner.ListXAttr(cancel, h, dest)
	t1 := now()
	ev := event(trace.OpListxattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	ev.Size = uint32(len(dest))
	ev.Ret = int64(sz)
	t.commit(&ev, t0, t1, st)
	return sz, st
}

func (t *tracer) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	t0 := now()
	st := t.inner.SetXAttr(cancel, in, attr, data)
	t1 := now()
	ev := event(trace.OpSetxattr, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Size = in.Size
	ev.Flags = in.Flags
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	t0 := now()
	st := t.inner.RemoveXAttr(cancel, h, attr)
	t1 := now()
	ev := event(trace.OpRemovexattr, h)
	ev.Path = t.nodes.path(h.NodeId)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Create(cancel, in, name, out)
	t1 := now()
	ev := event(trace.OpCreate, &in.InHeader)
	ev.Path = t.child(in.NodeId, name)
	ev.Flags, ev.Mode = in.Flags, in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Handle, ev.Ret = out.NodeId, out.Fh, int64(out.Size)
		t.entry(out.NodeId, in.NodeId, name, ev.Path, &out.Attr, false, t1)
		t.opened(out.Fh, &ev, t1)
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	t0 := now()
	st := t.inner.Tmpfile(cancel, in, out)
	t1 := now()
	ev := event(trace.OpTmpfile, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId) // the directory: the file has no name
	ev.Flags, ev.Mode = in.Flags, in.Mode
	if st == fuse.OK {
		ev.Node2, ev.Handle = out.NodeId, out.Fh
		t.entry(out.NodeId, 0, "", 0, &out.Attr, false, t1)
		t.opened(out.Fh, &ev, t1)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.Open(cancel, in, out)
	t1 := now()
	ev := event(trace.OpOpen, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Flags
	if st == fuse.OK {
		ev.Handle = out.Fh
		t.opened(out.Fh, &ev, t1)
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	res, st := t.inner.Read(cancel, in, buf)
	t1 := now()
	ev := event(trace.OpRead, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK && res != nil {
		ev.Ret = int64(res.Size())
		t.stats.rbytes.Add(uint64(ev.Ret))
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return res, st
}

func (t *tracer) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	t0 := now()
	st := t.inner.Lseek(cancel, in, out)
	t1 := now()
	ev := event(trace.OpLseek, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Flags = in.Fh, int64(in.Offset), in.Whence
	if st == fuse.OK {
		ev.Ret = int64(out.Offset)
	}
	t.commit(&ev, t0, t1, st)
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
	t0 := now()
	st := t.inner.GetLk(cancel, in, out)
	t1 := now()
	ev := t.lock(trace.OpGetlk, in)
	if st == fuse.OK {
		ev.Ret = int64(out.Lk.Typ)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t0 := now()
	st := t.inner.SetLk(cancel, in)
	t1 := now()
	ev := t.lock(trace.OpSetlk, in)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	t0 := now()
	st := t.inner.SetLkw(cancel, in)
	t1 := now()
	ev := t.lock(trace.OpSetlkw, in)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	t0 := now()
	t.inner.Release(cancel, in)
	t1 := now()
	ev := event(trace.OpRelease, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.Flags
	t.asOpener(&ev, in.Fh, true)
	t.commit(&ev, t0, t1, fuse.OK)
}

func (t *tracer) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	n, st := t.inner.Write(cancel, in, data)
	t1 := now()
	t.written(in, n, sl, te, t0, t1, st)
	return n, st
}

// Writev is where go-fuse v2.12 sends WRITE first; ENOSYS makes the server retry with Write,
// so that reply is not recorded (the Write is).
func (t *tracer) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	n, st := t.inner.Writev(cancel, in, data)
	t1 := now()
	if st == fuse.ENOSYS {
		t.svc.finish(sl, t0, t1)
		return n, st
	}
	t.written(in, n, sl, te, t0, t1, st)
	return n, st
}

func (t *tracer) written(in *fuse.WriteIn, n uint32, sl svcRef, te, t0, t1 int64, st fuse.Status) {
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
		t.stats.wbytes.Add(uint64(n))
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
}

func (t *tracer) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	t0 := now()
	n, st := t.inner.CopyFileRange(cancel, in)
	t1 := now()
	ev := event(trace.OpCopyFileRange, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Path2 = t.nodes.path(in.NodeIdOut)
	ev.Node2, ev.Handle, ev.Handle2 = in.NodeIdOut, in.FhIn, in.FhOut
	ev.Offset, ev.Offset2, ev.Flags = int64(in.OffIn), int64(in.OffOut), uint32(in.Flags)
	ev.Size = uint32(min(in.Len, 1<<32-1))
	if st == fuse.OK {
		ev.Ret = int64(n)
		t.stats.rbytes.Add(uint64(n))
		t.stats.wbytes.Add(uint64(n))
	}
	t.commit(&ev, t0, t1, st)
	return n, st
}

func (t *tracer) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	t0 := now()
	st := t.inner.Ioctl(cancel, in, inbuf, out, outbuf)
	t1 := now()
	ev := event(trace.OpIoctl, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags, ev.Size = in.Fh, in.Cmd, in.InSize
	if st == fuse.OK {
		ev.Ret = int64(out.Result)
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	t0 := now()
	st := t.inner.Flush(cancel, in)
	t1 := now()
	ev := event(trace.OpFlush, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle = in.Fh
	t.asOpener(&ev, in.Fh, false)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t0 := now()
	st := t.inner.Fsync(cancel, in)
	t1 := now()
	ev := event(trace.OpFsync, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.FsyncFlags
	t.asOpener(&ev, in.Fh, false)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	t0 := now()
	st := t.inner.Fallocate(cancel, in)
	t1 := now()
	ev := event(trace.OpFallocate, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Flags = in.Fh, int64(in.Offset), in.Mode
	ev.Size = uint32(min(in.Length, 1<<32-1))
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	te := now()
	sl := t.svc.begin(cancel)
	t0 := now()
	st := t.inner.OpenDir(cancel, in, out)
	t1 := now()
	ev := event(trace.OpOpendir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Flags = in.Flags
	if st == fuse.OK {
		ev.Handle = out.Fh
		t.opened(out.Fh, &ev, t1)
	}
	t.commitSvc(&ev, sl, te, t0, t1, st)
	return st
}

func (t *tracer) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t0 := now()
	st := t.inner.ReadDir(cancel, in, out)
	t1 := now()
	ev := event(trace.OpReaddir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK {
		ev.Ret = int64(len(out.Bytes()))
	}
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	t0 := now()
	st := t.inner.ReadDirPlus(cancel, in, out)
	t1 := now()
	ev := event(trace.OpReaddirplus, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Offset, ev.Size = in.Fh, int64(in.Offset), in.Size
	if st == fuse.OK {
		buf := out.Bytes()
		ev.Ret = int64(len(buf))
		t.plusEntries(in.NodeId, ev.Path, buf, t1)
	}
	t.commit(&ev, t0, t1, st)
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
	t0 := now()
	t.inner.ReleaseDir(in)
	t1 := now()
	ev := event(trace.OpReleasedir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.Flags
	t.asOpener(&ev, in.Fh, true)
	t.commit(&ev, t0, t1, fuse.OK)
}

func (t *tracer) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	t0 := now()
	st := t.inner.FsyncDir(cancel, in)
	t1 := now()
	ev := event(trace.OpFsyncdir, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.FsyncFlags
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	t0 := now()
	st := t.inner.StatFs(cancel, h, out)
	t1 := now()
	ev := event(trace.OpStatfs, h)
	ev.Path = t.nodes.path(h.NodeId)
	t.commit(&ev, t0, t1, st)
	return st
}

func (t *tracer) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	t0 := now()
	st := t.inner.Statx(cancel, in, out)
	t1 := now()
	ev := event(trace.OpStatx, &in.InHeader)
	ev.Path = t.nodes.path(in.NodeId)
	ev.Handle, ev.Flags = in.Fh, in.SxMask
	if st == fuse.OK {
		ev.Ret, ev.Mode = int64(out.Size), uint32(out.Mode)
	}
	t.commit(&ev, t0, t1, st)
	return st
}
