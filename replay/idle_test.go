package replay

import (
	"bytes"
	"cmp"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// TestIdleShare checks the summary's own time (Idle, ThinkShare) against the replay trace
// it wrote: the span less the union of the replayed calls' [start, end), merged by hand
// across threads. Two threads stat files with recorded gaps of 2 ms and 3 ms, while a
// third reads 32 MiB at a time every 10 ms, over the others' calls: most of the runtime
// is the threads' own time.
func TestIdleShare(t *testing.T) {
	b := tracetest.New(t)
	for _, n := range []string{"a", "b"} {
		b.W.AddFile(trace.File{Path: b.Path(n), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	}
	for i := range 40 {
		b.Ev(1, trace.OpGetattr, "a", 20_000, 2_000_000, func(e *trace.Event) { e.Mode, e.Ret = unix.S_IFREG|0o644, 10 })
		if i%2 == 0 {
			b.Ev(2, trace.OpGetattr, "b", 20_000, 3_000_000, func(e *trace.Event) { e.Mode, e.Ret = unix.S_IFREG|0o644, 10 })
		}
	}
	b.W.AddFile(trace.File{Path: b.Path("big"), Type: trace.TypeFile, Mode: 0o644, Size: 32 << 20})
	fh := b.Open(3, "big", unix.O_RDONLY)
	for range 6 {
		b.RW(3, trace.OpRead, "big", fh, 0, 1<<20, 1<<20)
		b.At(3, b.Clock[3]+10_000_000)
	}
	b.Close(3, "big", fh)
	data := b.Bytes()
	_, d := target(t, "")
	var out bytes.Buffer
	w, err := trace.NewWriter(&out, trace.Header{Kind: "replay"}, trace.WriterOptions{})
	must(t, err)
	sum := replayOnto(t, data, d, w, Options{Timing: TimingThink})
	must(t, w.Close())

	// The union of the calls' intervals, from the replay trace.
	r := tracetest.Reader(t, out.Bytes())
	var iv [][2]int64
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		iv = append(iv, [2]int64{ev.Start, ev.Start + ev.Dur})
	}
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var busy, end int64
	for _, v := range iv {
		from := max(v[0], end)
		if v[1] > from {
			busy += v[1] - from
		}
		end = max(end, v[1])
	}
	if len(iv) != int(sum.ReplayedOps) {
		t.Fatalf("%d events in the replay trace, %d ops replayed", len(iv), sum.ReplayedOps)
	}
	want := sum.ReplaySpan - time.Duration(busy)
	if d := sum.Idle - want; d < -5*time.Microsecond || d > 5*time.Microsecond {
		t.Errorf("idle %v, want span %v less the calls' union %v = %v", sum.Idle, sum.ReplaySpan, time.Duration(busy), want)
	}
	if share := float64(want) / float64(sum.ReplaySpan); sum.ThinkShare < share-0.001 || sum.ThinkShare > share+0.001 {
		t.Errorf("think share %.4f, want %.4f", sum.ThinkShare, share)
	}
	if sum.ThinkShare < 0.5 {
		t.Errorf("think share %.3f of a replay of calls 2–10 ms apart", sum.ThinkShare)
	}
	var text strings.Builder
	sum.Print(&text)
	if !strings.Contains(text.String(), "of that runtime (") {
		t.Errorf("the summary does not state the own time:\n%s", text.String())
	}
}
