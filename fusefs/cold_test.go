package fusefs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/trace"
)

// evict touches one byte per cache line of buf, pushing the tracer's data out of the CPU
// caches as a FUSE round trip (two context switches and the kernel's request handling)
// does between two requests of a real mount.
func evict(buf []byte) {
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
}

// reportDelta reports the summed untraced and traced times (ns) per iteration and their
// difference, the layer's cost; ns/op, which counts the untimed evictions, is zeroed.
func reportDelta(b *testing.B, base, traced int64) {
	n := float64(b.N)
	b.ReportMetric(float64(base)/n, "untraced-ns/op")
	b.ReportMetric(float64(traced)/n, "traced-ns/op")
	b.ReportMetric(float64(traced-base)/n, "delta-ns/op")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkHotPathCold is the per-request cost of recording with cold CPU caches, as in a
// real mount, where the microbenchmarks' warm loops (BenchmarkHotPath) understate it. Each
// iteration evicts the caches (1 MiB touched, untimed), times the request on the untraced
// bridge, evicts again and times it through the tracer, so both see the same conditions at
// the same moment. Metrics: untraced-ns/op, traced-ns/op and their difference, delta-ns/op.
func BenchmarkHotPathCold(b *testing.B) {
	u := benchUnits(b)
	buf := make([]byte, 1<<20)
	for _, op := range []string{"lookup", "relookup", "getattr", "read4k"} {
		for _, rn := range []string{"nop", "writer"} {
			b.Run(op+"/"+rn, func(b *testing.B) {
				x := u[rn]
				fn := x.ops()[op]
				var base, traced int64
				for b.Loop() {
					evict(buf)
					t0 := now()
					fn(x.raw)
					t1 := now()
					evict(buf)
					t2 := now()
					fn(x.tr)
					base += t1 - t0
					traced += now() - t2
				}
				reportDelta(b, base, traced)
			})
		}
	}
}

// manyFiles is a unit tier recording into a trace writer over a directory of n empty files,
// and their names.
func manyFiles(b *testing.B, n int) (*unitFS, []string) {
	w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Close() })
	u := newUnitFS(b, w)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%06d", i)
		if err := os.WriteFile(filepath.Join(u.rootDir, names[i]), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return u, names
}

// BenchmarkRelookupCold is a repeated LOOKUP of one of 5000 known names (a stat of a file
// the job has seen, with 0 s entry timeouts), with cold CPU caches: the case refKnown
// serves without the node table's lock and map. Metrics as BenchmarkHotPathCold's.
func BenchmarkRelookupCold(b *testing.B) {
	u, names := manyFiles(b, 5000)
	n := len(names)
	var eo fuse.EntryOut
	h := u.hdr
	for _, nm := range names { // the first sighting of each: both layers know all names
		u.tr.Lookup(u.cancel, &h, nm, &eo)
	}
	buf := make([]byte, 1<<20)
	var base, traced int64
	i := 0
	for b.Loop() {
		nm := names[i%n]
		i += 7919 // a prime stride: no locality between consecutive names
		h.Unique += 2
		// Alternate which goes first: the first call after a quiet spell pays more.
		for k := range 2 {
			evict(buf)
			t0 := now()
			if (i+k)%2 == 0 {
				u.raw.Lookup(u.cancel, &h, nm, &eo)
				base += now() - t0
			} else {
				u.tr.Lookup(u.cancel, &h, nm, &eo)
				traced += now() - t0
			}
		}
	}
	reportDelta(b, base, traced)
}

// BenchmarkForgetCold is the FORGET of the last reference to one of 5000 nodes, with cold
// CPU caches (a file the job is done with): the node leaves the node table, its slot and
// the path index. untraced-ns/op is the bridge's forget of one reference, traced-ns/op
// the tracer's forget of the last one (bridge included); delta-ns/op their difference.
func BenchmarkForgetCold(b *testing.B) {
	u, names := manyFiles(b, 5000)
	n := len(names)
	var eo fuse.EntryOut
	h := u.hdr
	buf := make([]byte, 1<<20)
	var base, traced int64
	i := 0
	for b.Loop() {
		nm := names[i%n]
		i += 7919
		for range 2 { // two references, in the bridge and in the tracer's table
			h.Unique += 2
			u.tr.Lookup(u.cancel, &h, nm, &eo)
		}
		evict(buf)
		t0 := now()
		u.raw.Forget(eo.NodeId, 1)
		base += now() - t0
		evict(buf)
		t0 = now()
		u.tr.Forget(eo.NodeId, 1)
		traced += now() - t0
	}
	reportDelta(b, base, traced)
}
