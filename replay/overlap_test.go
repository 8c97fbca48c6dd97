package replay

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/tracetest"
)

// queueTrace is a trace of thread 1 reading file "q" at queue depth depth: n reads of
// 4 KiB, each lasting dur, the first depth submitted together, then each 500 ns after the
// completion of the read it replaces; and of thread 2 reading file "s" one read at a time.
func queueTrace(t testing.TB, depth, n int, dur int64) []byte {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("q"), Type: trace.TypeFile, Mode: 0o644, Size: 1 << 20})
	b.W.AddFile(trace.File{Path: b.Path("s"), Type: trace.TypeFile, Mode: 0o644, Size: 1 << 20})
	fq := b.Open(1, "q", unix.O_RDONLY)
	fs := b.Open(2, "s", unix.O_RDONLY)
	t0 := b.Clock[1] + 1000
	at := make([]int64, n)
	for k := range at {
		at[k] = t0 + int64(k)*1000 // the first batch: submitted together
		if k >= depth {
			at[k] = at[k-depth] + dur + 500 // then each read 500 ns after the completion it replaces
		}
	}
	for k := 0; k < n; k++ {
		b.At(1, at[k]).Ev(1, trace.OpRead, "q", dur, 0, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fq, int64(k%256)*4096, 4096, 4096
		})
	}
	b.At(1, at[n-1]+dur+1000).Close(1, "q", fq)
	b.At(2, t0)
	for k := 0; k < n/depth; k++ {
		b.Ev(2, trace.OpRead, "s", dur, 1000, func(e *trace.Event) { e.Handle, e.Offset, e.Size, e.Ret = fs, int64(k)*4096, 4096, 4096 })
	}
	b.Close(2, "s", fs)
	return b.Bytes()
}

// TestPlanQueueDepth: the planner gives each read of the queued thread the number of its
// thread's reads still running at its start, and times it from the completion it
// followed, or from the previous start within a batch; the other thread's reads overlap
// nothing.
func TestPlanQueueDepth(t *testing.T) {
	const depth, n, dur = 8, 64, int64(4e6)
	var reads [3][]replayOp
	planEach(t, queueTrace(t, depth, n, dur), func(op *replayOp) {
		if op.Kind == fold.Read {
			reads[op.Worker] = append(reads[op.Worker], *op)
		}
		if op.Kind == fold.Read || op.Kind == fold.Close {
			for _, d := range op.Deps[:op.NDeps] {
				if d.Res > 1<<31 && op.Kind == fold.Read && op.Worker == 1 && op.Overlap > 0 && d.Need > uint32(len(reads[1])) {
					t.Errorf("read %d waits for %d ops of its handle: every earlier one", len(reads[1]), d.Need)
				}
			}
		}
	})
	if len(reads[1]) != n || len(reads[2]) != n/depth {
		t.Fatalf("reads: %d and %d, want %d and %d", len(reads[1]), len(reads[2]), n, n/depth)
	}
	for k, op := range reads[1] {
		want := min(k, depth-1)
		if int(op.Overlap) != want {
			t.Errorf("read %d: overlap %d, want %d", k, op.Overlap, want)
		}
		if k > 0 && k < depth && (!op.AfterIssue || op.Think != 1000) {
			t.Errorf("read %d of the batch: after issue %v, think %d; want the gap since the previous start, 1000", k, op.AfterIssue, op.Think)
		}
		if k >= depth && (op.AfterIssue || op.Think != 500) {
			t.Errorf("read %d: after issue %v, think %d; want the gap since the completion it followed, 500", k, op.AfterIssue, op.Think)
		}
	}
	for k, op := range reads[2] {
		if op.Overlap != 0 || op.AfterIssue {
			t.Errorf("thread 2 read %d: overlap %d, after issue %v; want 0, false", k, op.Overlap, op.AfterIssue)
		}
	}
}

// inflight counts the reads of each file in flight at once through a middleware that
// makes each last d.
type inflight struct {
	mu       sync.Mutex
	cur, max map[string]int
	d        time.Duration
}

func (f *inflight) middleware(ctx context.Context, c Call, next func(context.Context) error) error {
	if c.Method != "File.ReadAt" {
		return next(ctx)
	}
	f.mu.Lock()
	f.cur[c.Name]++
	f.max[c.Name] = max(f.max[c.Name], f.cur[c.Name])
	f.mu.Unlock()
	time.Sleep(f.d)
	err := next(ctx)
	f.mu.Lock()
	f.cur[c.Name]--
	f.mu.Unlock()
	return err
}

// TestReplayQueueDepth: the reads one thread kept in flight together are issued together
// again, up to the recorded depth and never beyond it, in every timing mode; a thread that
// read one at a time still does.
func TestReplayQueueDepth(t *testing.T) {
	const depth, n = 8, 64
	for _, timing := range []Timing{TimingAFAP, TimingOriginal, TimingThink} {
		t.Run(timing.String(), func(t *testing.T) {
			data := queueTrace(t, depth, n, int64(20*time.Millisecond))
			_, d := target(t, "")
			f := &inflight{cur: map[string]int{}, max: map[string]int{}, d: 20 * time.Millisecond}
			sum := replayOnto(t, data, Decorate(d, f.middleware), nil, Options{Timing: timing})
			if sum.Divergences != 0 {
				t.Errorf("%d divergences: %v", sum.Divergences, sum.Examples)
			}
			if f.max["q"] != depth {
				t.Errorf("reads of q in flight at once: at most %d, recorded %d", f.max["q"], depth)
			}
			if f.max["s"] != 1 {
				t.Errorf("reads of s in flight at once: at most %d, recorded 1", f.max["s"])
			}
			if sum.Overlapped != n-1 || sum.MaxQueueDepth != depth {
				t.Errorf("summary: %d overlapped ops, depth %d; want %d, %d", sum.Overlapped, sum.MaxQueueDepth, n-1, depth)
			}
			// 64 reads of 20 ms at depth 8 take 160 ms; one at a time, 1.28 s.
			if timing != TimingAFAP && sum.ReplaySpan > sum.RecordedSpan*3 {
				t.Errorf("replay took %v, recorded %v", sum.ReplaySpan, sum.RecordedSpan)
			}
		})
	}
}

// TestReplayQueueDepthCancel: cancelling a replay whose thread has reads in flight and
// helpers waiting ends it.
func TestReplayQueueDepthCancel(t *testing.T) {
	data := queueTrace(t, 16, 4096, int64(10*time.Millisecond))
	_, d := target(t, "")
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	must(t, Prepare(t.Context(), d, st, false))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	f := &inflight{cur: map[string]int{}, max: map[string]int{}, d: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, tracetest.Reader(t, data), Decorate(d, f.middleware), nil, Options{Timing: TimingOriginal})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled replay returned no error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled replay did not end")
	}
}

// BenchmarkQueueDepthLag measures the issue lag of reads replayed at queue depth 16 on a
// directory (original timing: each read due at its recorded start, 200 µs apart
// at depth 16).
func BenchmarkQueueDepthLag(b *testing.B) {
	for _, depth := range []int{1, 16} {
		b.Run(fmt.Sprintf("depth%d", depth), func(b *testing.B) {
			data := queueTrace(b, depth, 2000, int64(depth)*200_000)
			var p50, p99 time.Duration
			for i := 0; i < b.N; i++ {
				_, d := target(b, "")
				sum := replayOnto(b, data, d, nil, Options{Timing: TimingOriginal})
				p50, p99 = max(p50, sum.LagP50), max(p99, sum.LagP99)
			}
			b.ReportMetric(float64(p50.Microseconds()), "lag-p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "lag-p99-µs")
		})
	}
}

// TestPlanAsyncRelease: the kernel sends a file's RELEASE after the application's close()
// returned, while the thread goes on: a single-threaded job whose releases overlap its
// next calls has a queue depth of 1, and its close is timed by the flush it waited for.
func TestPlanAsyncRelease(t *testing.T) {
	b := tracetest.New(t)
	for i := range 20 {
		name := fmt.Sprintf("f%d", i)
		b.W.AddFile(trace.File{Path: b.Path(name), Type: trace.TypeFile, Mode: 0o644, Size: 4096})
	}
	var flushAt int64
	for i := range 20 {
		name := fmt.Sprintf("f%d", i)
		fh := b.Open(1, name, unix.O_RDONLY)
		b.RW(1, trace.OpRead, name, fh, 0, 4096, 4096)
		flushAt = b.Clock[1]
		b.Ev(1, trace.OpFlush, name, 2000, 500, func(e *trace.Event) { e.Handle = fh })
		// The release starts after the flush and runs while the thread opens the next file.
		rel := b.Clock[1]
		b.Ev(1, trace.OpStatfs, "-", 1000, 0, nil) // the next call, then the release
		b.At(1, rel).Ev(1, trace.OpRelease, name, 300_000, 0, func(e *trace.Event) { e.Handle = fh })
		b.At(1, rel+3000)
	}
	closes := 0
	planEach(t, b.Bytes(), func(op *replayOp) {
		if op.Overlap != 0 {
			t.Errorf("op %v of %s: overlap %d, want 0", op.Kind, op.Name, op.Overlap)
		}
		if op.Kind == fold.Close {
			closes++
			if op.Name == "f19" && (op.Start != flushAt || op.Dur != 2000) {
				t.Errorf("close of f19 at %d for %d ns, want the flush's %d for 2000 ns", op.Start, op.Dur, flushAt)
			}
		}
	})
	if closes != 20 {
		t.Errorf("%d closes, want 20", closes)
	}
}

// TestPlanDirClose: a directory's close sends only a release, after close() returned: the
// thread's next call, which runs while the release does, is not at a queue depth of 2.
func TestPlanDirClose(t *testing.T) {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("d"), Type: trace.TypeDir, Mode: 0o755})
	b.W.AddFile(trace.File{Path: b.Path("d/f"), Type: trace.TypeFile, Mode: 0o644, Size: 4096})
	for range 5 {
		b.Walk(1, "d", 0, unix.S_IFDIR|0o755, 4096)
		b.FH++
		dh := b.FH
		b.Ev(1, trace.OpOpendir, "d", 5000, 1000, func(e *trace.Event) { e.Handle = dh })
		b.Ev(1, trace.OpFsyncdir, "d", 5000, 1000, func(e *trace.Event) { e.Handle = dh })
		rel := b.Clock[1]
		b.Ev(1, trace.OpReleasedir, "d", 80_000, 0, func(e *trace.Event) { e.Handle = dh })
		b.At(1, rel+2000)
		fh := b.Open(1, "d/f", unix.O_RDONLY)
		b.RW(1, trace.OpRead, "d/f", fh, 0, 4096, 4096).Close(1, "d/f", fh)
		b.At(1, b.Clock[1]+100_000)
	}
	planEach(t, b.Bytes(), func(op *replayOp) {
		if op.Overlap != 0 {
			t.Errorf("op %v of %s: overlap %d, want 0", op.Kind, op.Name, op.Overlap)
		}
	})
}

// planEach plans the trace data with default options, calls f with each op in turn and
// returns the planner.
func planEach(t *testing.T, data []byte, f func(op *replayOp)) *planner {
	t.Helper()
	p := newPlanner(tracetest.Reader(t, data), PlanOptions{})
	for {
		op, err := p.next()
		if err == io.EOF {
			return p
		}
		must(t, err)
		f(op)
	}
}
