package fusefs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/internal/loopback"
	"github.com/iotap/iotap/fusefs/internal/servicetime"
	"github.com/iotap/iotap/trace"
)

// nopRecorder discards everything (the cost of the layer without the trace writer).
type nopRecorder struct{}

func (*nopRecorder) Origin() int64              { return 0 }
func (*nopRecorder) Append(*trace.Event)        {}
func (*nopRecorder) Path(uint32, string) uint32 { return 2 }
func (*nopRecorder) Raw(string) uint32          { return 3 }
func (*nopRecorder) AddProcess(trace.Process)   {}
func (*nopRecorder) AddFile(trace.File)         {}
func (*nopRecorder) CountError()                {}

// unitFS is the node tree over a temp dir, without a mount: the unit tier calls the raw
// methods directly.
type unitFS struct {
	raw  fuse.RawFileSystem // the bridge
	tr   *tracer
	hdr  fuse.InHeader
	node uint64 // node id of "f"
	fh   uint64 // open handle of "f"
	// cancel stands for the request's cancel channel (go-fuse makes one per request
	// object); service times travel in a slot keyed by it.
	cancel  chan struct{}
	rootDir string
}

func newUnitFS(t testing.TB, rec Recorder) *unitFS {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := Options{}.withDefaults()
	times := new(servicetime.Table)
	raw, err := loopback.New(dir, fd, o.loopbackOptions(times), o.fsOptions())
	if err != nil {
		t.Fatal(err)
	}
	u := &unitFS{raw: raw, cancel: make(chan struct{}), rootDir: dir}
	u.tr = newTracer(u.raw, rec, o)
	u.tr.serviceTimes = times
	u.hdr = fuse.InHeader{NodeId: 1, Caller: fuse.Caller{Owner: fuse.Owner{Uid: 0, Gid: 0}, Pid: uint32(syscall.Gettid())}}
	var eo fuse.EntryOut
	if st := u.tr.Lookup(nil, &u.hdr, "f", &eo); st != fuse.OK {
		t.Fatalf("lookup: %v", st)
	}
	u.node = eo.NodeId
	in := fuse.OpenIn{InHeader: u.hdr, Flags: syscall.O_RDWR}
	in.NodeId = u.node
	var oo fuse.OpenOut
	if st := u.tr.Open(nil, &in, &oo); st != fuse.OK {
		t.Fatalf("open: %v", st)
	}
	u.fh = oo.Fh
	t.Cleanup(func() { _ = unix.Close(fd) })
	return u
}

// ops are the hot requests, each runnable against the tracer or the bare bridge.
func (u *unitFS) ops() map[string]func(r fuse.RawFileSystem) {
	buf := make([]byte, 4096)
	data := [][]byte{make([]byte, 4096)}
	var eo fuse.EntryOut
	var ao fuse.AttrOut
	ga := fuse.GetAttrIn{InHeader: u.hdr}
	ga.NodeId = u.node
	rd := fuse.ReadIn{InHeader: u.hdr, Fh: u.fh, Offset: 4096, Size: 4096}
	rd.NodeId = u.node
	wr := fuse.WriteIn{InHeader: u.hdr, Fh: u.fh, Offset: 8192, Size: 4096}
	wr.NodeId = u.node
	lh := u.hdr
	// Each request gets the next id, as from the kernel (ids step by 2): the layer times
	// its own work on the requests whose id it samples.
	var unique uint64
	next := func() uint64 { unique += 2; return unique }
	var held uint64 // relookup's references not yet forgotten
	return map[string]func(r fuse.RawFileSystem){
		"lookup": func(r fuse.RawFileSystem) {
			lh.Unique = next()
			r.Lookup(u.cancel, &lh, "f", &eo)
			r.Forget(eo.NodeId, 1)
		},
		// A repeated lookup of a known name (a stat with 0 s entry timeouts); the kernel's
		// references are forgotten in batches.
		"relookup": func(r fuse.RawFileSystem) {
			lh.Unique = next()
			if r.Lookup(u.cancel, &lh, "f", &eo) == fuse.OK {
				if held++; held == 64 {
					r.Forget(eo.NodeId, held)
					held = 0
				}
			}
		},
		"getattr": func(r fuse.RawFileSystem) { ga.Unique = next(); r.GetAttr(u.cancel, &ga, &ao) },
		"read4k":  func(r fuse.RawFileSystem) { rd.Unique = next(); r.Read(u.cancel, &rd, buf) },
		"write4k": func(r fuse.RawFileSystem) { wr.Unique = next(); r.Writev(u.cancel, &wr, data) },
	}
}

// TestHotPathAllocs: recording adds no allocation to the requests it times, whether the
// recorder is a no-op or the real trace writer. (The go-fuse bridge itself allocates a
// context per request; that is the untraced baseline.)
func TestHotPathAllocs(t *testing.T) {
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	for name, rec := range map[string]Recorder{"nop": &nopRecorder{}, "writer": w} {
		u := newUnitFS(t, rec)
		for op, fn := range u.ops() {
			base := testing.AllocsPerRun(200, func() { fn(u.raw) })
			traced := testing.AllocsPerRun(200, func() { fn(u.tr) })
			if traced > base {
				t.Errorf("%s/%s: %.1f allocs traced vs %.1f untraced", name, op, traced, base)
			}
		}
	}
}

// TestWrapperAllocs: the wrapper over a stub file system allocates nothing at all.
func TestWrapperAllocs(t *testing.T) {
	tr := newTracer(fuse.NewDefaultRawFileSystem(), &nopRecorder{}, Options{})
	h := fuse.InHeader{NodeId: 1, Caller: fuse.Caller{Pid: uint32(syscall.Gettid())}}
	var eo fuse.EntryOut
	rd := fuse.ReadIn{InHeader: h, Size: 4096}
	wr := fuse.WriteIn{InHeader: h, Size: 4096}
	rel := fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: 1}}
	buf := make([]byte, 4096)
	data := [][]byte{buf}
	for name, fn := range map[string]func(){
		"lookup":  func() { tr.Lookup(nil, &h, "x", &eo) },
		"read":    func() { tr.Read(nil, &rd, buf) },
		"write":   func() { tr.Write(nil, &wr, buf) },
		"writev":  func() { tr.Writev(nil, &wr, data) },
		"release": func() { tr.Release(nil, &rel) },
		"forget":  func() { tr.Forget(5, 1) },
	} {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s: %.1f allocs per op", name, n)
		}
	}
}

// BenchmarkHotPath compares the bare bridge with the traced wrapper (no-op recorder and the
// real trace writer) on a real directory, without FUSE.
func BenchmarkHotPath(b *testing.B) {
	u := benchUnits(b)
	for _, op := range []string{"lookup", "getattr", "read4k", "write4k"} {
		b.Run(op+"/untraced", func(b *testing.B) {
			fn := u["nop"].ops()[op]
			b.ReportAllocs()
			for b.Loop() {
				fn(u["nop"].raw)
			}
		})
		for _, rn := range []string{"nop", "writer"} {
			b.Run(op+"/traced-"+rn, func(b *testing.B) {
				fn := u[rn].ops()[op]
				b.ReportAllocs()
				for b.Loop() {
					fn(u[rn].tr)
				}
			})
		}
	}
}

// benchUnits returns two unit trees for the hot-path benchmarks: "nop" records into a
// recorder that discards everything, "writer" into a trace writer (closed in b.Cleanup).
func benchUnits(b *testing.B) map[string]*unitFS {
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	return map[string]*unitFS{"nop": newUnitFS(b, &nopRecorder{}), "writer": newUnitFS(b, w)}
}

// BenchmarkWrapper is the cost of recording alone (stub file system underneath).
func BenchmarkWrapper(b *testing.B) {
	tr := newTracer(fuse.NewDefaultRawFileSystem(), &nopRecorder{}, Options{})
	rd := fuse.ReadIn{InHeader: fuse.InHeader{NodeId: 1, Caller: fuse.Caller{Pid: uint32(syscall.Gettid())}}, Size: 4096}
	buf := make([]byte, 4096)
	b.ReportAllocs()
	for b.Loop() {
		tr.Read(nil, &rd, buf)
	}
}

// lastRecorder keeps the last event appended.
type lastRecorder struct {
	nopRecorder
	ev trace.Event
}

func (r *lastRecorder) Append(ev *trace.Event) { r.ev = *ev }

// TestServiceTime: for reads, writes, opens, creates and setattrs through a handle, the
// event carries the time of the backend system call the node code measured (handed over
// in the request's slot), not the handler's; other requests keep the handler's time.
func TestServiceTime(t *testing.T) {
	rec := &lastRecorder{}
	u := newUnitFS(t, rec)
	last := struct{ start, dur int64 }{dur: -1}
	u.tr.serviceTimes.SetProbe(func(start, dur int64) { last.start, last.dur = start, dur })
	check := func(name string, call func() fuse.Status) {
		t.Helper()
		last.dur = -1
		before := now()
		if st := call(); st != fuse.OK {
			t.Fatalf("%s: %v", name, st)
		}
		after := now()
		if last.dur < 0 {
			t.Fatalf("%s: the node code measured nothing", name)
		}
		if rec.ev.Start != last.start || rec.ev.Dur != last.dur {
			t.Errorf("%s: event start %d dur %d, backend call start %d dur %d", name, rec.ev.Start, rec.ev.Dur, last.start, last.dur)
		}
		if last.start < before || last.start+last.dur > after {
			t.Errorf("%s: backend call [%d,%d] outside the request [%d,%d]", name, last.start, last.start+last.dur, before, after)
		}
	}
	buf := make([]byte, 4096)
	rd := fuse.ReadIn{InHeader: u.hdr, Fh: u.fh, Size: 4096}
	rd.NodeId = u.node
	check("read", func() fuse.Status { _, st := u.tr.Read(u.cancel, &rd, buf); return st })
	wr := fuse.WriteIn{InHeader: u.hdr, Fh: u.fh, Size: 4096}
	wr.NodeId = u.node
	check("writev", func() fuse.Status { _, st := u.tr.Writev(u.cancel, &wr, [][]byte{buf}); return st })
	check("write", func() fuse.Status { _, st := u.tr.Write(u.cancel, &wr, buf); return st })
	sa := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: u.hdr, Valid: fuse.FATTR_SIZE | fuse.FATTR_FH, Fh: u.fh, Size: 100}}
	sa.NodeId = u.node
	var ao fuse.AttrOut
	check("setattr", func() fuse.Status { return u.tr.SetAttr(u.cancel, &sa, &ao) })
	if ao.Size != 100 {
		t.Errorf("setattr reply size %d, want 100", ao.Size)
	}
	op := fuse.OpenIn{InHeader: u.hdr, Flags: syscall.O_RDONLY}
	op.NodeId = u.node
	var oo fuse.OpenOut
	check("open", func() fuse.Status { return u.tr.Open(u.cancel, &op, &oo) })
	ci := fuse.CreateIn{InHeader: u.hdr, Flags: syscall.O_RDWR, Mode: 0o640}
	ci.NodeId = 1
	var co fuse.CreateOut
	check("create", func() fuse.Status { return u.tr.Create(u.cancel, &ci, "new", &co) })
	if co.Mode&0o777 != 0o640 || co.NodeId == 0 {
		t.Errorf("create reply mode %o node %d", co.Mode, co.NodeId)
	}
	// A later lookup finds the inode the create made (same identity as the loopback's).
	var eo fuse.EntryOut
	check("lookup", func() fuse.Status { return u.tr.Lookup(u.cancel, &u.hdr, "new", &eo) })
	if eo.NodeId != co.NodeId {
		t.Errorf("lookup after create: node %d, create gave %d", eo.NodeId, co.NodeId)
	}
	ga := fuse.GetAttrIn{InHeader: u.hdr}
	ga.NodeId = eo.NodeId
	check("getattr", func() fuse.Status { return u.tr.GetAttr(u.cancel, &ga, &ao) })
	// Access is not carried out by the node code: the handler's time is recorded.
	last.dur = -1
	ac := fuse.AccessIn{InHeader: u.hdr, Mask: 4}
	ac.NodeId = eo.NodeId
	if st := u.tr.Access(u.cancel, &ac); st != fuse.OK || last.dur >= 0 {
		t.Errorf("access: %v, measured %d", st, last.dur)
	}
	// Every slot is free again, whatever channels the requests came with: the table does
	// not grow with go-fuse's new channels.
	for i := 0; i < 10000; i++ {
		c := make(chan struct{})
		u.tr.GetAttr(c, &ga, &ao)
	}
	if n := u.tr.serviceTimes.Claimed(); n != 0 {
		t.Fatalf("%d slots still claimed", n)
	}
}

// BenchmarkLookupMany is LOOKUP+FORGET over 10,000 distinct files (the small-file
// workload's name operations: maps larger than the CPU caches), bare bridge vs traced.
func BenchmarkLookupMany(b *testing.B) {
	const n = 10000
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	u := newUnitFS(b, w)
	dir := b.TempDir()
	_ = dir
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%06d", i)
	}
	root := u.rootDir
	for _, nm := range names {
		if err := os.WriteFile(filepath.Join(root, nm), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"untraced", "traced"} {
		r := u.raw
		if mode == "traced" {
			r = u.tr
		}
		b.Run(mode, func(b *testing.B) {
			var eo fuse.EntryOut
			i := 0
			for b.Loop() {
				r.Lookup(u.cancel, &u.hdr, names[i%n], &eo)
				r.Forget(eo.NodeId, 1)
				i += 7919 // a prime stride: no locality between consecutive names
			}
		})
	}
}

// kernelEvent is a read kernel passthrough served, as package legs hands it to the layer.
func (u *unitFS) kernelEvent() trace.Event {
	return trace.Event{Op: trace.OpRead, Passthrough: true, Node: u.node, Handle: u.fh, Offset: 4096, Size: 4096, Ret: 4096,
		Tid: u.hdr.Pid, Pid: uint32(os.Getpid()), Start: 1000, Dur: 2000, Queued: 1000, Done: 3000, CallStart: 1000, CallEnd: 3000}
}

// TestKernelCallAllocs: recording a call the kernel served allocates nothing.
func TestKernelCallAllocs(t *testing.T) {
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	u := newUnitFS(t, w)
	s := &Server{tracer: u.tr}
	ev := u.kernelEvent()
	if n := testing.AllocsPerRun(1000, func() { e := ev; s.KernelCall(&e) }); n != 0 {
		t.Errorf("%.1f allocs per call", n)
	}
}

// BenchmarkKernelCall is what the layer spends on each read or write the kernel served:
// naming its path and caller and appending it to the trace writer.
func BenchmarkKernelCall(b *testing.B) {
	u := benchUnits(b)["writer"]
	s := &Server{tracer: u.tr}
	ev := u.kernelEvent()
	b.ReportAllocs()
	for b.Loop() {
		e := ev
		s.KernelCall(&e)
	}
}
