package fusefs

import (
	"io"
	"strconv"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/trace"
)

// smallFileCycle runs the requests the kernel sends for one new 4 KiB file in
// bench/overhead.sh's small-file row (cache=none): negative LOOKUP, CREATE, WRITE, FLUSH,
// RELEASE; LOOKUP, GETATTR; LOOKUP, OPEN, READ, FLUSH, RELEASE; LOOKUP, UNLINK, FORGET.
// Every file has a new name, so the recorder interns a new path each time.
func smallFileCycle(r fuse.RawFileSystem, hdr *fuse.InHeader, name string, buf []byte) {
	var eo fuse.EntryOut
	r.Lookup(nil, hdr, name, &eo)
	ci := fuse.CreateIn{InHeader: *hdr, Flags: syscall.O_CREAT | syscall.O_WRONLY | syscall.O_TRUNC, Mode: 0o644}
	var co fuse.CreateOut
	if st := r.Create(nil, &ci, name, &co); st != fuse.OK {
		panic("create: " + st.String())
	}
	node, fh := co.NodeId, co.Fh
	wi := fuse.WriteIn{InHeader: *hdr, Fh: fh, Size: uint32(len(buf))}
	wi.NodeId = node
	r.Writev(nil, &wi, [][]byte{buf})
	fi := fuse.FlushIn{InHeader: *hdr, Fh: fh}
	fi.NodeId = node
	r.Flush(nil, &fi)
	ri := fuse.ReleaseIn{InHeader: fuse.InHeader{NodeId: node}, Fh: fh}
	r.Release(nil, &ri)

	r.Lookup(nil, hdr, name, &eo)
	ga := fuse.GetAttrIn{InHeader: *hdr}
	ga.NodeId = node
	var ao fuse.AttrOut
	r.GetAttr(nil, &ga, &ao)

	r.Lookup(nil, hdr, name, &eo)
	oi := fuse.OpenIn{InHeader: *hdr, Flags: syscall.O_RDONLY}
	oi.NodeId = node
	var oo fuse.OpenOut
	if st := r.Open(nil, &oi, &oo); st != fuse.OK {
		panic("open: " + st.String())
	}
	rd := fuse.ReadIn{InHeader: *hdr, Fh: oo.Fh, Size: uint32(len(buf))}
	rd.NodeId = node
	if res, st := r.Read(nil, &rd, buf); st == fuse.OK && res != nil {
		res.Done()
	}
	fi.Fh = oo.Fh
	r.Flush(nil, &fi)
	ri.Fh = oo.Fh
	r.Release(nil, &ri)

	r.Lookup(nil, hdr, name, &eo)
	r.Unlink(nil, hdr, name)
	r.Forget(node, 4)
}

// BenchmarkSmallFile is the small-file row without FUSE: the bare bridge against the tracer
// with the real trace writer (new names every iteration, as in the overhead script).
func BenchmarkSmallFile(b *testing.B) {
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	buf := make([]byte, 4096)
	for _, c := range []struct {
		name string
		rec  Recorder
	}{{"untraced", nil}, {"traced-nop", &nopRecorder{}}, {"traced-writer", w}} {
		b.Run(c.name, func(b *testing.B) {
			rec := c.rec
			if rec == nil {
				rec = &nopRecorder{}
			}
			u := newUnitFS(b, rec)
			var r fuse.RawFileSystem = u.tr
			if c.rec == nil {
				r = u.raw
			}
			names := make([]string, 1<<16)
			for i := range names {
				names[i] = "f" + strconv.Itoa(i)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				smallFileCycle(r, &u.hdr, names[i%len(names)]+"-"+strconv.Itoa(i/len(names)), buf)
				i++
			}
		})
	}
}
