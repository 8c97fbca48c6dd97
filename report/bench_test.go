package report

import (
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// writeBenchTrace writes n events over nfiles files (reads, writes, getattr, lookup in
// random order) with trace.Writer.
func writeBenchTrace(b *testing.B, path string, n, nfiles int) {
	w, err := trace.Create(path, trace.Header{Hostname: "bench", WallStart: time.Unix(1.7e9, 0), Origin: 1,
		FUSE: trace.FUSEOptions{Cache: "none"}, Target: trace.Target{FSType: "ext4"}}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	paths := make([]uint32, nfiles)
	for i := range paths {
		paths[i] = w.Path(trace.RootPath, "f"+itoa(i))
	}
	offs := make([]int64, nfiles)
	var ts int64
	for range n {
		f := rng.IntN(nfiles)
		ts += int64(rng.IntN(20_000))
		ev := trace.Event{Start: ts, Dur: int64(5_000 + rng.ExpFloat64()*100_000), Path: paths[f], Handle: uint64(f + 1), Tid: uint32(1 + f%8), Pid: uint32(1 + f%8)}
		switch r := rng.IntN(10); {
		case r < 6:
			ev.Op, ev.Offset, ev.Size, ev.Ret = trace.OpRead, offs[f], 65536, 65536
			offs[f] += 65536
		case r < 7:
			ev.Op, ev.Offset, ev.Size, ev.Ret = trace.OpWrite, offs[f], 4096, 4096
		case r < 9:
			ev.Op = trace.OpGetattr
		default:
			ev.Op = trace.OpLookup
		}
		w.Append(&ev)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// BenchmarkReadAndAggregate is what `iotap report` spends per event: decode the trace file
// and aggregate every event (rendering is per report, not per event), with the
// per-system-call view (calls: the requests folded into calls, as the report does) and
// without it (requests), side by side.
func BenchmarkReadAndAggregate(b *testing.B) {
	for _, bc := range []struct {
		name   string
		nfiles int
		calls  bool
	}{{"64files/requests", 64, false}, {"64files/calls", 64, true}, {"100kfiles/requests", 100_000, false}, {"100kfiles/calls", 100_000, true}} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 1 << 20
			path := filepath.Join(b.TempDir(), "bench.iotap")
			writeBenchTrace(b, path, n, bc.nfiles)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				r, err := trace.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				o := stats.Options{}
				if bc.calls {
					o.Names = r
				}
				a := stats.NewAccumulator("bench", r.Header(), o)
				for {
					ev, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					a.Add(ev)
				}
				f, _ := r.Footer()
				a.Finish(r, f, r.Damage())
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "events/s")
		})
	}
}
