package trace

import (
	"bytes"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// mixTrace encodes about n events of the realistic mix and returns the file bytes.
func mixTrace(tb testing.TB, n int, o WriterOptions) ([]byte, int) {
	tb.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), o)
	if err != nil {
		tb.Fatal(err)
	}
	count := 0
	newMix(7, w.Path, func(e *Event) { count++; w.Append(e) }).run(n)
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), count
}

// TestBytesPerEvent checks the encoded size of the realistic mix (target ≤ 12 bytes per
// event, everything included: header, side tables, frames, footer).
func TestBytesPerEvent(t *testing.T) {
	b, n := mixTrace(t, 200_000, WriterOptions{})
	per := float64(len(b)) / float64(n)
	t.Logf("mix: %d events, %d bytes, %.2f bytes/event", n, len(b), per)
	if per > 12 {
		t.Errorf("%.2f bytes/event, target 12", per)
	}
}

// reportBlocked reports how long Append waited for buffer space per event: the
// background encoder's cost showing through when it cannot keep up.
func reportBlocked(b *testing.B, w *Writer) {
	st := w.Stats()
	b.ReportMetric(float64(st.Blocked.Nanoseconds())/float64(st.Events), "blocked-ns/event")
}

// BenchmarkAppendProducer measures the producer's own cost (Now and Append) without
// waiting for the encoder: the timer stops every 64 Ki events until the encoder has
// drained most of the buffer.
func BenchmarkAppendProducer(b *testing.B) {
	w, err := NewWriter(io.Discard, Header{}, WriterOptions{BufferEvents: 1 << 19})
	if err != nil {
		b.Fatal(err)
	}
	ev := Event{Op: OpRead, Tid: 7, Pid: 7, Size: 1 << 20, Ret: 1 << 20, Path: 5, Node: 9, Handle: 3}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i&(1<<16-1) == 0 {
			b.StopTimer()
			for len(w.avail) < cap(w.avail)*3/4 {
				time.Sleep(100 * time.Microsecond)
			}
			b.StartTimer()
		}
		ev.Offset += 1 << 20
		ev.Start = Now()
		w.Append(&ev)
	}
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	reportBlocked(b, w)
}

func BenchmarkAppend(b *testing.B) {
	w, err := NewWriter(io.Discard, Header{}, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ev := Event{Op: OpRead, Tid: 7, Pid: 7, Size: 1 << 20, Ret: 1 << 20, Path: 5, Node: 9, Handle: 3}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		ev.Offset += 1 << 20
		ev.Start = Now()
		w.Append(&ev)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	// CPU of the whole pipeline (producer, encoder, zstd) per event.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/event")
	reportBlocked(b, w)
}

func BenchmarkAppendParallel(b *testing.B) {
	w, err := NewWriter(io.Discard, Header{}, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var tids atomic.Uint32
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ev := Event{Op: OpRead, Tid: 1000 + tids.Add(1), Size: 4096, Ret: 4096, Path: 5, Node: 9, Handle: 3}
		for pb.Next() {
			ev.Offset += 4096
			ev.Start = Now()
			w.Append(&ev)
		}
	})
	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	reportBlocked(b, w)
}

func BenchmarkPathHit(b *testing.B) {
	w, err := NewWriter(io.Discard, Header{}, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	dir := w.Path(RootPath, "dir")
	w.Path(dir, "name.txt")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w.Path(dir, "name.txt")
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data, n := mixTrace(b, 500_000, WriterOptions{})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for {
			_, err := r.Next()
			if err != nil {
				break
			}
			got++
		}
		_ = r.Close()
		if got != n {
			b.Fatalf("decoded %d of %d", got, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(n)*float64(b.N)/(processCPU()-cpu0).Seconds(), "events/cpu-s")
	b.ReportMetric(float64(len(data))/float64(n), "bytes/event")
}

// BenchmarkEncode measures the column encoder on a chunk of the mix, fed in blocks of
// encodeBlock events as the writer feeds it.
func BenchmarkEncode(b *testing.B) {
	var evs []Event
	newMix(7, func(uint32, string) uint32 { return 3 }, func(e *Event) { evs = append(evs, *e) }).run(DefaultChunkEvents)
	evs = evs[:DefaultChunkEvents]
	var pred offsetPredictor
	c := columnEncoder{version: Version2, pred: &pred}
	var raw []byte
	b.ReportAllocs()
	for b.Loop() {
		c.reset()
		for i := 0; i < len(evs); i += encodeBlock {
			c.add(evs[i:min(i+encodeBlock, len(evs))])
		}
		raw = c.payload(raw[:0])
	}
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
