package replay

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/tracetest"
	"github.com/iotap/iotap/trace"
)

// roundTripTrace: one thread opens and stats n files, each a two-lookup path walk with
// rtt between the kernel's requests, and 1 ms of application time between calls.
func roundTripTrace(t testing.TB, fuse bool, n int, rtt int64) []byte {
	b := tracetest.New(t)
	if fuse {
		b = tracetest.NewFUSE(t)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("d/f%d", i)
		b.W.AddFile(trace.File{Path: b.Path(name), Type: trace.TypeFile, Mode: 0o644, Size: 10})
		b.Ev(1, trace.OpLookup, "d", 3000, rtt, func(e *trace.Event) { e.Mode = unix.S_IFDIR | 0o755 })
		b.Ev(1, trace.OpLookup, name, 3000, rtt, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
		b.Ev(1, trace.OpGetattr, name, 2000, int64(time.Millisecond), func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	return b.Bytes()
}

// TestRoundTripEstimate: the planner finds the recording layer's round trip in the gaps
// after path-walk lookups of a FUSE recording, and none in a trace that is not one.
func TestRoundTripEstimate(t *testing.T) {
	const rtt = 30_000
	st, err := DeriveState(tracetest.Reader(t, roundTripTrace(t, true, 50, rtt)), PlanOptions{})
	must(t, err)
	if d := st.RoundTrip - rtt; d < -rttBucket || d > rttBucket || st.RoundTripSamples < 50 {
		t.Errorf("round trip %v from %d samples, want %v", st.RoundTrip, st.RoundTripSamples, time.Duration(rtt))
	}
	st, err = DeriveState(tracetest.Reader(t, roundTripTrace(t, false, 50, rtt)), PlanOptions{})
	must(t, err)
	if st.RoundTrip != 0 {
		t.Errorf("round trip %v estimated for a trace not recorded through FUSE", st.RoundTrip)
	}
	st, err = DeriveState(tracetest.Reader(t, roundTripTrace(t, true, 3, rtt)), PlanOptions{})
	must(t, err)
	if st.RoundTrip != 0 {
		t.Errorf("round trip %v from only %d samples", st.RoundTrip, st.RoundTripSamples)
	}
}

func TestThinkAfter(t *testing.T) {
	op := &replayOp{Think: 200_000, Reqs: 3, FoldDur: 10_000}
	if got := thinkAfter(op, 30_000); got != 100_000 {
		t.Errorf("think %d, want 100000", got)
	}
	if got := thinkAfter(op, 0); got != 190_000 {
		t.Errorf("think without a round trip %d, want 190000", got)
	}
	if got := thinkAfter(op, 100_000); got != 0 {
		t.Errorf("think %d, want 0 (never negative)", got)
	}
}

// TestThinkRoundTrip: in think mode, the recorded gaps minus the folded lookups and one
// round trip per request are waited for, so a trace whose gaps are mostly round trips
// replays faster once they are taken out; a second thread that started after the first
// ended starts after it in the replay too, moved with it.
func TestThinkRoundTrip(t *testing.T) {
	const n, rtt = 100, 600_000 // 0.6 ms round trips: large against timer noise
	b := tracetest.NewFUSE(t)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d", i)
		b.W.AddFile(trace.File{Path: b.Path(name), Type: trace.TypeFile, Mode: 0o644, Size: 10})
		b.Ev(1, trace.OpLookup, name, 3000, rtt, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
		b.Ev(1, trace.OpGetattr, name, 2000, rtt+100_000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	end := b.Clock[1]
	b.At(2, end+int64(time.Millisecond))
	for i := 0; i < 10; i++ {
		b.Ev(2, trace.OpGetattr, "f0", 2000, rtt+100_000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	if st.RoundTrip < 550*time.Microsecond || st.RoundTrip > 650*time.Microsecond {
		t.Fatalf("estimated round trip %v, want about 600µs", st.RoundTrip)
	}
	var spans [2]time.Duration
	for i, o := range []Options{{Timing: TimingThink}, {Timing: TimingThink, RoundTrip: st.RoundTrip}} {
		_, d := target(t, "")
		must(t, Prepare(context.Background(), d, st, false))
		sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, o)
		must(t, err)
		if sum.Divergences != 0 {
			t.Fatalf("divergences: %v", sum.Examples)
		}
		spans[i] = sum.ReplaySpan
		t.Logf("round trip %v: span %v (recorded %v), think not waited for %v", o.RoundTrip, sum.ReplaySpan, sum.RecordedSpan, sum.ThinkCut)
		if i == 1 && (sum.RoundTrip != st.RoundTrip || sum.ThinkCut < time.Duration(2*n-1)*600*time.Microsecond) {
			t.Errorf("summary round trip %v, think cut %v", sum.RoundTrip, sum.ThinkCut)
		}
	}
	// Recorded: about 100 x 1.9 ms + 1 ms + 10 x 0.7 ms = 198 ms. Folding alone saves the
	// lookups' 0.6 ms; without the round trips each op waits about 0.1 ms.
	if spans[1] > spans[0]/2 {
		t.Errorf("span %v with round trips taken out, %v without: want less than half", spans[1], spans[0])
	}
}

// TestThinkWaitsForChild: a shell's op after a command ran is due after the command's
// last op completes in the replay (plus the recorded time between them), not after the
// recorded gap: the command here replays in a fraction of its recorded time once round
// trips are taken out, and so does the script.
func TestThinkWaitsForChild(t *testing.T) {
	const rtt = 500_000
	b := tracetest.NewFUSE(t)
	b.AddProcess(trace.Process{Tid: 1, Pid: 1, PPid: 0, Comm: "sh"})
	b.AddProcess(trace.Process{Tid: 2, Pid: 2, PPid: 1, Comm: "cmd"})
	b.W.AddFile(trace.File{Path: b.Path("f"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	stat := func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 }
	pid := func(p uint32) func(e *trace.Event) { return func(e *trace.Event) { stat(e); e.Pid = p } }
	// Path-walk gaps for the estimate: lookup, then getattr rtt later.
	b.Ev(1, trace.OpLookup, "f", 3000, rtt, pid(1))
	b.Ev(1, trace.OpGetattr, "f", 2000, 0, pid(1))
	start := b.Clock[1] + int64(time.Millisecond)
	b.At(2, start)
	for i := 0; i < 100; i++ {
		b.Ev(2, trace.OpLookup, "f", 3000, rtt, pid(2))
		b.Ev(2, trace.OpGetattr, "f", 2000, rtt+50_000, pid(2))
	}
	b.At(1, b.Clock[2]+int64(time.Millisecond)) // the shell resumes 1 ms after its command's last op
	b.Ev(1, trace.OpGetattr, "f", 2000, 0, pid(1))
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	_, d := target(t, "")
	must(t, Prepare(context.Background(), d, st, false))
	sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, Options{Timing: TimingThink, RoundTrip: st.RoundTrip})
	must(t, err)
	if sum.Divergences != 0 {
		t.Fatalf("divergences: %v", sum.Examples)
	}
	t.Logf("round trip %v: span %v, recorded %v", st.RoundTrip, sum.ReplaySpan, sum.RecordedSpan)
	// Recorded: about 1 + 100 x 1.05 + 1 ms = 107 ms. The command's ops are 50 µs apart
	// once round trips are out: about 5 ms, then 1 ms to the shell's op.
	if sum.ReplaySpan > sum.RecordedSpan/3 {
		t.Errorf("span %v of recorded %v: the shell waited for its recorded gap, not for its command", sum.ReplaySpan, sum.RecordedSpan)
	}
}

// TestPrepareHoles: a starting file whose holes the job found with lseek(SEEK_DATA) is
// prepared sparse with the same holes, so the replayed lseeks find data where the
// recorded ones did.
func TestPrepareHoles(t *testing.T) {
	const mib = 1 << 20
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("sparse"), Type: trace.TypeFile, Mode: 0o644, Size: 4 * mib})
	fh := b.Open(1, "sparse", unix.O_RDONLY)
	seek := func(off int64, whence uint32, ret int64, errno syscall.Errno) {
		b.Ev(1, trace.OpLseek, "sparse", 2000, 1000, func(e *trace.Event) {
			e.Handle, e.Offset, e.Flags, e.Ret, e.Errno = fh, off, whence, ret, uint16(errno)
		})
	}
	seek(0, unix.SEEK_DATA, mib, 0)
	seek(mib, unix.SEEK_HOLE, 2*mib, 0)
	b.RW(1, trace.OpRead, "sparse", fh, mib, 65536, 65536)
	seek(2*mib, unix.SEEK_DATA, 3*mib, 0)
	seek(3*mib, unix.SEEK_HOLE, 4*mib, 0)
	b.Close(1, "sparse", fh)
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	root, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 {
		t.Errorf("%d divergences: %v (state %+v)", sum.Divergences, sum.Examples, st.Entries)
	}
	var fst syscall.Stat_t
	must(t, syscall.Stat(root+"/sparse", &fst))
	if fst.Size != 4*mib || fst.Blocks*512 > 2*mib+64<<10 {
		t.Errorf("prepared file: size %d, %d bytes allocated; want 4 MiB with 2 MiB of holes", fst.Size, fst.Blocks*512)
	}
}

// TestThinkSpin: with ThinkSpin a thread's think time keeps a CPU busy (the replay's CPU
// time covers most of its span) and the timing is that of think mode.
func TestThinkSpin(t *testing.T) {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("f"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	for i := 0; i < 50; i++ {
		b.Ev(1, trace.OpGetattr, "f", 2000, 4_000_000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	data := b.Bytes()
	var cpus [2]time.Duration
	for i, spin := range []bool{false, true} {
		_, d := target(t, "")
		var r0, r1 syscall.Rusage
		must(t, syscall.Getrusage(syscall.RUSAGE_SELF, &r0))
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingThink, ThinkSpin: spin})
		must(t, syscall.Getrusage(syscall.RUSAGE_SELF, &r1))
		cpu := time.Duration(syscall.TimevalToNsec(r1.Utime) - syscall.TimevalToNsec(r0.Utime) +
			syscall.TimevalToNsec(r1.Stime) - syscall.TimevalToNsec(r0.Stime))
		t.Logf("spin %v: span %v (recorded %v), CPU %v", spin, sum.ReplaySpan, sum.RecordedSpan, cpu)
		if sum.ReplaySpan < sum.RecordedSpan*9/10 {
			t.Errorf("spin %v: span %v, recorded %v", spin, sum.ReplaySpan, sum.RecordedSpan)
		}
		cpus[i] = cpu
		if spin && cpus[1]-cpus[0] < sum.ReplaySpan/4 {
			// Sleeping still spins the last microseconds before each op (and more under the
			// race detector): compare the two.
			t.Errorf("spinning replay used %v of CPU, sleeping %v, in %v", cpus[1], cpus[0], sum.ReplaySpan)
		}
	}
}

// TestHandleReusedBeforeRelease: go-fuse frees a handle number when the release starts,
// and a create that started earlier can get it; the late release belongs to the old file
// (its path says so), not to the new holder of the number.
func TestHandleReusedBeforeRelease(t *testing.T) {
	b := tracetest.New(t)
	stat := func(fh uint64) func(e *trace.Event) {
		return func(e *trace.Event) { e.Handle, e.Flags, e.Mode = fh, unix.O_WRONLY|unix.O_CREAT, unix.S_IFREG|0o644 }
	}
	b.At(1, 1_000_000).Ev(1, trace.OpCreate, "a", 10_000, 0, stat(3))
	b.At(1, 1_020_000).Ev(1, trace.OpWrite, "a", 10_000, 0, func(e *trace.Event) { e.Handle, e.Size, e.Ret = 3, 100, 100 })
	b.At(1, 1_040_000).Ev(1, trace.OpFlush, "a", 2_000, 0, func(e *trace.Event) { e.Handle = 3 })
	b.At(1, 1_050_000).Ev(1, trace.OpCreate, "b", 300_000, 0, stat(3)) // gets 3 at its end
	b.At(1, 1_100_000).Ev(1, trace.OpRelease, "a", 5_000, 0, func(e *trace.Event) { e.Handle = 3 })
	b.At(1, 1_400_000).Ev(1, trace.OpWrite, "b", 10_000, 0, func(e *trace.Event) { e.Handle, e.Size, e.Ret = 3, 200, 200 })
	b.At(1, 1_420_000).Ev(1, trace.OpFlush, "b", 2_000, 0, func(e *trace.Event) { e.Handle = 3 })
	b.At(1, 1_430_000).Ev(1, trace.OpRelease, "b", 2_000, 0, func(e *trace.Event) { e.Handle = 3 })
	data := b.Bytes()
	root, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ImplicitOpens != 0 {
		t.Errorf("%d divergences, %d implicit opens: %v", sum.Divergences, sum.ImplicitOpens, sum.Examples)
	}
	for name, size := range map[string]int64{"a": 100, "b": 200} {
		var st syscall.Stat_t
		if err := syscall.Stat(root+"/"+name, &st); err != nil || st.Size != size {
			t.Errorf("%s: size %d (%v), want %d", name, st.Size, err, size)
		}
	}
}

// TestHandleReusedSameName: the same, with the old file deleted and the new one created
// under the same name (sqlite's journal): node ids tell the two incarnations apart.
func TestHandleReusedSameName(t *testing.T) {
	b := tracetest.New(t)
	create := func(node uint64) func(e *trace.Event) {
		return func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode, e.Node, e.Node2 = 1, unix.O_WRONLY|unix.O_CREAT, unix.S_IFREG|0o644, 1, node
		}
	}
	on := func(node uint64, f func(e *trace.Event)) func(e *trace.Event) {
		return func(e *trace.Event) { e.Handle, e.Node = 1, node; f(e) }
	}
	nop := func(*trace.Event) {}
	b.At(1, 1_000_000).Ev(1, trace.OpCreate, "j", 10_000, 0, create(10))
	b.At(1, 1_020_000).Ev(1, trace.OpWrite, "j", 10_000, 0, on(10, func(e *trace.Event) { e.Size, e.Ret = 100, 100 }))
	b.At(1, 1_040_000).Ev(1, trace.OpFlush, "j", 2_000, 0, on(10, nop))
	b.At(1, 1_045_000).Ev(1, trace.OpUnlink, "j", 2_000, 0, func(e *trace.Event) { e.Node = 1 })
	b.At(1, 1_050_000).Ev(1, trace.OpCreate, "j", 300_000, 0, create(11))
	b.At(1, 1_100_000).Ev(1, trace.OpRelease, "j", 5_000, 0, on(10, nop))
	b.At(1, 1_400_000).Ev(1, trace.OpWrite, "j", 10_000, 0, on(11, func(e *trace.Event) { e.Size, e.Ret = 200, 200 }))
	b.At(1, 1_420_000).Ev(1, trace.OpFlush, "j", 2_000, 0, on(11, nop))
	b.At(1, 1_430_000).Ev(1, trace.OpRelease, "j", 2_000, 0, on(11, nop))
	data := b.Bytes()
	root, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ImplicitOpens != 0 {
		t.Errorf("%d divergences, %d implicit opens: %v", sum.Divergences, sum.ImplicitOpens, sum.Examples)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(root+"/j", &st); err != nil || st.Size != 200 {
		t.Errorf("j: size %d (%v), want 200", st.Size, err)
	}
}
