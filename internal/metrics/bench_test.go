package metrics

import (
	"testing"

	"github.com/iotap/iotap/internal/tally"
)

// BenchmarkObserve is the trace encoder's work per event for the live line and summary
// (tally) alone, and with the metrics too, over batches of 256 events of every op: the
// difference is what --metrics adds to the encoder. Run it on a quiet machine:
//
//	go test -run '^$' -bench Observe -benchmem ./internal/metrics
func BenchmarkObserve(b *testing.B) {
	evs := spreadEvents(256)
	b.Run("tally", func(b *testing.B) {
		var tl tally.Tally
		b.ReportAllocs()
		for b.Loop() {
			tl.AddBatch(evs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
	b.Run("tally+metrics", func(b *testing.B) {
		var tl tally.Tally
		c := New(Info{})
		c.Observe(evs) // the series and native buckets exist, as in a mount that has run a while
		b.ReportAllocs()
		for b.Loop() {
			tl.AddBatch(evs)
			c.Observe(evs)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
	})
}
