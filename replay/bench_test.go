package replay

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// shmBase returns /dev/shm when it is a usable tmpfs, else "" (the test's temp dir).
func shmBase(tb testing.TB) string {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		return "/dev/shm"
	}
	tb.Logf("/dev/shm is not a tmpfs: using the test's temp dir")
	return ""
}

// statTrace makes a trace of threads issuing lstat-style lookups of existing files at a
// fixed total rate (ops per second), interleaved round robin.
func statTrace(tb testing.TB, threads, ops int, rate float64) []byte {
	b := tracetest.New(tb)
	gap := int64(1e9 / rate)
	for i := 0; i < threads; i++ {
		b.W.AddFile(trace.File{Path: b.Path(fmt.Sprintf("d%d/f", i)), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	}
	for i := 0; i < ops; i++ {
		tid := uint32(1 + i%threads)
		b.At(tid, 1e9+int64(i)*gap)
		name := fmt.Sprintf("d%d/f", i%threads)
		b.Ev(tid, trace.OpGetattr, name, 2000, 0, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	return b.Bytes()
}

// BenchmarkScheduleLag replays 10,000 ops/s in original timing mode and reports the
// scheduler's issue lag (actual minus due start time).
func BenchmarkScheduleLag(b *testing.B) {
	const rate, ops = 10000, 10000 // one second of trace
	data := statTrace(b, 4, ops, rate)
	base := shmBase(b)
	var agg hist
	var spanErr float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, d := target(b, base)
		st, err := DeriveState(tracetest.Reader(b, data), PlanOptions{})
		must(b, err)
		must(b, Prepare(context.Background(), d, st, false))
		b.StartTimer()
		sum, err := Run(context.Background(), tracetest.Reader(b, data), d, nil, Options{Timing: TimingOriginal})
		must(b, err)
		if sum.Divergences != 0 || sum.ReplayedOps != ops {
			b.Fatalf("replayed %d ops, %d divergences: %v", sum.ReplayedOps, sum.Divergences, sum.Examples)
		}
		agg.merge(&sum.lag)
		spanErr += float64(sum.ReplaySpan-sum.RecordedSpan) / float64(sum.RecordedSpan)
	}
	b.ReportMetric(float64(agg.quantile(0.5))/1e3, "lag-p50-µs")
	b.ReportMetric(float64(agg.quantile(0.99))/1e3, "lag-p99-µs")
	b.ReportMetric(float64(agg.quantile(0.999))/1e3, "lag-p99.9-µs")
	b.ReportMetric(float64(agg.max)/1e3, "lag-max-µs")
	b.ReportMetric(100*spanErr/float64(b.N), "runtime-err-%")
	b.ReportMetric(0, "ns/op")
	logLoad(b)
}

// logLoad logs the load average: timing figures mean little on a busy machine.
func logLoad(b *testing.B) {
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average: %s", la)
	}
}

// metaTrace makes a metadata-only trace: each thread creates, stats and removes files in
// its own directory (create+close, lstat ×3, unlink per file).
func metaTrace(tb testing.TB, threads, files int) []byte {
	b := tracetest.New(tb)
	for t := 0; t < threads; t++ {
		tid := uint32(1 + t)
		b.At(tid, 1e9)
		dir := fmt.Sprintf("t%d", t)
		b.Ev(tid, trace.OpMkdir, dir, 1000, 0, func(e *trace.Event) { e.Mode = 0o755 })
		for i := 0; i < files; i++ {
			name := fmt.Sprintf("%s/f%d", dir, i)
			b.FH++
			fh := b.FH
			b.Ev(tid, trace.OpCreate, name, 1000, 0, func(e *trace.Event) {
				e.Handle, e.Flags, e.Mode = fh, unix.O_WRONLY|unix.O_CREAT, 0o644
			})
			b.Ev(tid, trace.OpRelease, name, 1000, 0, func(e *trace.Event) { e.Handle = fh })
			for k := 0; k < 3; k++ {
				b.Ev(tid, trace.OpGetattr, name, 1000, 0, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644 })
			}
			b.Ev(tid, trace.OpUnlink, name, 1000, 0, nil)
			b.Lookup(tid, name, syscall.ENOENT, 0, 0)
		}
	}
	return b.Bytes()
}

// BenchmarkAFAPMetadata replays a metadata-only trace as fast as possible onto tmpfs and
// reports replayed ops per second (the replay trace is written, to io.Discard).
func BenchmarkAFAPMetadata(b *testing.B) {
	const threads, files = 4, 10000
	data := metaTrace(b, threads, files)
	base := shmBase(b)
	var ops uint64
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, d := target(b, base)
		w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "replay"}, trace.WriterOptions{})
		must(b, err)
		b.StartTimer()
		t0 := time.Now()
		sum, err := Run(context.Background(), tracetest.Reader(b, data), d, w, Options{Timing: TimingAFAP})
		elapsed += time.Since(t0)
		must(b, err)
		b.StopTimer()
		must(b, w.Close())
		if sum.Divergences != 0 {
			b.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
		}
		ops += sum.ReplayedOps
		b.StartTimer()
	}
	b.ReportMetric(float64(ops)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(ops), "ns/replayed-op")
	b.ReportMetric(0, "ns/op")
	logLoad(b)
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
