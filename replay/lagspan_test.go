package replay

import (
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// unionLength is the union of the intervals computed the plain way: mark every ns.
func unionLength(in []lagSpan) int64 {
	var hi int64
	for _, s := range in {
		hi = max(hi, s.to)
	}
	marked := make([]bool, hi)
	for _, s := range in {
		for t := s.from; t < s.to; t++ {
			marked[t] = true
		}
	}
	var n int64
	for _, m := range marked {
		if m {
			n++
		}
	}
	return n
}

// TestLagUnion: the union counts a moment once however many intervals hold it, in any
// order and batching, as marking every nanosecond does; retiring old spans (to bound
// memory) may count more, never less.
func TestLagUnion(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []lagSpan
		want int64
	}{
		{"disjoint", []lagSpan{{0, 10}, {20, 25}}, 15},
		{"nested", []lagSpan{{0, 100}, {10, 20}, {30, 40}}, 100},
		{"queue of 16 late together", func() []lagSpan {
			var s []lagSpan
			for k := int64(0); k < 16; k++ {
				s = append(s, lagSpan{1000, 1000 + 10*(k+1)}) // ready together, issued one after another
			}
			return s
		}(), 160},
		{"touching", []lagSpan{{0, 10}, {10, 20}, {5, 15}}, 20},
		{"bridging", []lagSpan{{0, 10}, {20, 30}, {40, 50}, {5, 45}}, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lagSpans
			var st runStats
			st.init()
			for _, s := range tc.in {
				st.recordLag(&l, s.from, s.to)
			}
			st.lags.flush()
			if got := l.total(); got != tc.want {
				t.Errorf("union %d, want %d", got, tc.want)
			}
		})
	}
	// Many random intervals, added from several workers' batches in any order.
	r := rand.New(rand.NewPCG(1, 2))
	var in []lagSpan
	for range 20000 {
		from := r.Int64N(200000)
		in = append(in, lagSpan{from, from + 1 + r.Int64N(30)})
	}
	want := unionLength(in)
	var l lagSpans
	workers := make([]runStats, 7)
	for i, s := range in {
		st := &workers[i%len(workers)]
		if st.lag == nil {
			st.init()
		}
		st.recordLag(&l, s.from, s.to)
	}
	for i := range workers {
		workers[i].lags.flush()
	}
	if got := l.total(); got != want {
		t.Errorf("random intervals: union %d, want %d", got, want)
	}
	if len(l.spans) > maxLagSpans {
		t.Errorf("%d spans kept", len(l.spans))
	}
	// More disjoint spans than are kept: older ones are retired, and late intervals
	// reaching back before them are counted whole.
	var big lagSpans
	for k := int64(0); k < 3*maxLagSpans; k++ {
		big.add([]lagSpan{{10 * k, 10*k + 5}})
	}
	if got, want := big.total(), int64(3*maxLagSpans*5); got != want {
		t.Errorf("disjoint spans beyond the bound: %d, want %d", got, want)
	}
	if len(big.spans) > maxLagSpans {
		t.Errorf("%d spans kept, bound %d", len(big.spans), maxLagSpans)
	}
	before := big.total()
	big.add([]lagSpan{{0, 10}})
	if got := big.total(); got < before {
		t.Errorf("an interval among retired spans lowered the union: %d < %d", got, before)
	}
}

// batchTrace is a trace of one thread reading at queue depth depth in batches: the
// depth reads of a batch submitted together, and the next batch gap after the batch
// completed.
func batchTrace(t testing.TB, depth, batches int, gap int64) []byte {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("q"), Type: trace.TypeFile, Mode: 0o644, Size: 1 << 20})
	fq := b.Open(1, "q", unix.O_RDONLY)
	at := b.Clock[1] + 1000
	const dur = 20000
	for range batches {
		for k := range depth {
			b.At(1, at+int64(k)).Ev(1, trace.OpRead, "q", dur, 0, func(e *trace.Event) {
				e.Handle, e.Offset, e.Size, e.Ret = fq, int64(k)*4096, 4096, 4096
			})
		}
		at += int64(depth) + dur + gap
	}
	b.At(1, at).Close(1, "q", fq)
	return b.Bytes()
}

// TestReplayLagUnion replays a plan whose ops are late together (a queue of 128 reads
// submitted at once, issued one after another by the thread's team; then the thread
// thinks): the summed lag counts each moment once per late op, the union once; the
// prediction's low end takes only the union off the span.
func TestReplayLagUnion(t *testing.T) {
	data := batchTrace(t, 128, 40, int64(2*time.Millisecond))
	_, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingThink})
	p := sum.Prediction
	t.Logf("span %v, think waited %v, lag summed %v, union %v, %d ops late; predicts %s",
		sum.ReplaySpan, sum.ThinkWait, sum.LagTotal, sum.LagUnion, sum.LagSamples, p.Line())
	if sum.Divergences != 0 || sum.MaxQueueDepth != 128 {
		t.Fatalf("%d divergences, depth %d", sum.Divergences, sum.MaxQueueDepth)
	}
	if sum.LagTotal < 2*sum.ReplaySpan {
		t.Errorf("summed lag %v, span %v: the plan was to make ops late together, their lags summing to more than the span", sum.LagTotal, sum.ReplaySpan)
	}
	if sum.LagUnion <= 0 || sum.LagUnion > sum.LagTotal || sum.LagUnion > sum.ReplaySpan {
		t.Errorf("lag union %v: want above 0, at most the summed lag %v and the span %v", sum.LagUnion, sum.LagTotal, sum.ReplaySpan)
	}
	est := int64(sum.ThinkEstimated) * int64(sum.RoundTrip) / 2
	slower := int64(float64(min(sum.ThinkWait, sum.ReplaySpan)) * ModelError.Think)
	want := int64(sum.ReplaySpan) - int64(sum.LagUnion) - est - slower - int64(float64(sum.ReplaySpan)*ModelError.Runtime)
	if p.RuntimeLowNs != max(want, 0) {
		t.Errorf("runtime low %v, want the span less the lag union and the other terms: %v", time.Duration(p.RuntimeLowNs), time.Duration(want))
	}
	if sum.LagTotal > sum.ReplaySpan && p.RuntimeLowNs == 0 && want > 0 {
		t.Errorf("the summed lag (%v) exceeds the span (%v) and the low end is 0", sum.LagTotal, sum.ReplaySpan)
	}
}
