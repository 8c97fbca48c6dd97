package export

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/iotap/iotap/trace"
)

// BenchmarkExport exports the trace $IOTAP_BENCH_TRACE (a tracegen trace: bench/tracegen)
// in each row format, reporting events per second.
func BenchmarkExport(b *testing.B) {
	path := os.Getenv("IOTAP_BENCH_TRACE")
	if path == "" {
		b.Skip("set IOTAP_BENCH_TRACE to a trace (go run ./bench/tracegen -events 1000000 -o T)")
	}
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		b.Run(format, func(b *testing.B) {
			var events uint64
			for b.Loop() {
				r, err := trace.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Write(context.Background(), r, io.Discard, Options{Format: format}); err != nil {
					b.Fatal(err)
				}
				if f, ok := r.Footer(); ok {
					events = f.Events
				}
				_ = r.Close()
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
