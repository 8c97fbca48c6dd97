package fusefs

import "testing"

// evict touches one byte per cache line of buf, pushing the tracer's data out of the CPU
// caches as a FUSE round trip (two context switches and the kernel's request handling)
// does between two requests of a real mount.
func evict(buf []byte) {
	for i := 0; i < len(buf); i += 64 {
		buf[i]++
	}
}

// BenchmarkHotPathCold is the per-request cost of recording with cold CPU caches, as in a
// real mount, where the microbenchmarks' warm loops (BenchmarkHotPath) understate it. Each
// iteration evicts the caches (1 MiB touched, untimed), times the request on the untraced
// bridge, evicts again and times it through the tracer, so both see the same conditions at
// the same moment. Metrics: untraced-ns/op, traced-ns/op and their difference, delta-ns/op.
func BenchmarkHotPathCold(b *testing.B) {
	u := benchUnits(b)
	buf := make([]byte, 1<<20)
	for _, op := range []string{"lookup", "getattr", "read4k"} {
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
				n := float64(b.N)
				b.ReportMetric(float64(base)/n, "untraced-ns/op")
				b.ReportMetric(float64(traced)/n, "traced-ns/op")
				b.ReportMetric(float64(traced-base)/n, "delta-ns/op")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
