package fusefs

import (
	"testing"

	"github.com/iotap/iotap/trace"
)

// BenchmarkPartsCold splits the recording cost of one request into its parts, each timed
// alone with cold CPU caches (as in a mount, where a FUSE round trip between two requests
// evicts them): which data structure to make cheaper. The metric part-ns/op is the part's
// time less that of an empty timed section. "cache" evicts the data caches only;
// "cache+tlb" also the TLB, which brings the parts to the layer's own time measured in a
// mount (the layer's cost line; bench/overhead.sh's self rows).
func BenchmarkPartsCold(b *testing.B) {
	u := benchUnits(b)["writer"]
	tr := u.tr
	buf := make([]byte, 1<<20)
	tid := u.hdr.Pid
	var sink uint32
	ev := trace.Event{Op: trace.OpGetattr, Tid: tid, Node: u.node}
	parts := []struct {
		name string
		fn   func()
	}{
		{"empty", func() {}},
		{"event", func() { ev := event(trace.OpGetattr, &u.hdr); sink += ev.Tid }},
		{"nodes.path", func() { sink += tr.nodes.path(u.node) }},
		{"nodes.refKnown", func() {
			p, _ := tr.nodes.refKnown(u.node, 1, "f")
			tr.nodes.forget(u.node, 1)
			sink += p
		}},
		{"child(intern)", func() { sink += tr.child(1, "f") }},
		{"proc", func() { c := span{s1: now()}; sink += tr.proc(tid, &c).pid }},
		{"handles.get", func() { o, _ := tr.handles.get(u.fh); sink += o.pid }},
		{"servicetime", func() { tr.serviceTimes.Take(tr.serviceTimes.Begin(u.cancel), 0) }},
		{"counters.count", func() { tr.counters.count(tid) }},
		{"writer.Append", func() { tr.rec.Append(&ev) }},
	}
	tlb := make([]byte, 64<<20)
	for _, mode := range []struct {
		name  string
		pages []byte
	}{{"cache", nil}, {"cache+tlb", tlb}} {
		for _, p := range parts {
			b.Run(mode.name+"/"+p.name, func(b *testing.B) {
				var el, empty int64
				for b.Loop() {
					evict(buf)
					evictPages(mode.pages)
					t0 := now()
					t1 := now()
					evict(buf)
					evictPages(mode.pages)
					t2 := now()
					p.fn()
					el += now() - t2
					empty += t1 - t0
				}
				b.ReportMetric(float64(el-empty)/float64(b.N), "part-ns/op")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	_ = sink
}

// evictPages touches one byte per 4 KiB page of buf: with 64 MiB, more pages than the
// TLB maps, so each page the next request touches costs a page walk (in a VM, a
// two-level one), as after the kernel's and the application's work in a mount.
func evictPages(buf []byte) {
	for i := 0; i < len(buf); i += 4096 {
		buf[i]++
	}
}
