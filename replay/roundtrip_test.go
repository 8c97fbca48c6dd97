package replay

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
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
//
// The schedule is checked on the engine's own accounting, which no scheduler delay
// changes: the think time it planned (ThinkWait) against the trace's, and the span against
// that plan: never shorter, and no longer than the plan plus the measured issue lag and
// call time (what a loaded machine adds).
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
	// Thread 1: 99 getattrs each after a 0.7 ms gap, its folded 3 µs lookup and a 0.6 ms
	// gap (1.303 ms, two requests); thread 2: 9 getattrs after 0.7 ms gaps (one request).
	// Without round trips each waits what is left after the round trips: about 0.1 ms.
	rttOut := st.RoundTrip.Nanoseconds()
	want := [2]time.Duration{
		99*1300*time.Microsecond + 9*700*time.Microsecond,
		time.Duration(99*(1_300_000-2*rttOut) + 9*(700_000-rttOut)),
	}
	for i, o := range []Options{{Timing: TimingThink}, {Timing: TimingThink, RoundTrip: st.RoundTrip}} {
		_, d := target(t, "")
		must(t, Prepare(context.Background(), d, st, false))
		sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, o)
		must(t, err)
		if sum.Divergences != 0 {
			t.Fatalf("divergences: %v", sum.Examples)
		}
		t.Logf("round trip %v: span %v (recorded %v), think waited %v, not waited %v, lag %v, calls %v",
			o.RoundTrip, sum.ReplaySpan, sum.RecordedSpan, sum.ThinkWait, sum.ThinkCut, sum.LagTotal, sum.ReplayIO)
		if d := sum.ThinkWait - want[i]; d < -want[i]/20-time.Millisecond || d > want[i]/20+time.Millisecond {
			t.Errorf("round trip %v: think time waited %v, want %v", o.RoundTrip, sum.ThinkWait, want[i])
		}
		if i == 1 && (sum.RoundTrip != st.RoundTrip || sum.ThinkCut < time.Duration(2*n-1)*600*time.Microsecond) {
			t.Errorf("summary round trip %v, think cut %v", sum.RoundTrip, sum.ThinkCut)
		}
		checkSchedule(t, sum, 2*time.Millisecond)
	}
}

// checkSchedule checks that a replay of threads that ran one after another (their spans
// add up) kept the schedule it planned: its span is at least the think time it waited,
// and at most that plus the issue lag, the calls' own time and extra (recorded time it
// waited that ThinkWait does not count: threads' first ops), with a margin for the
// replayer's bookkeeping.
func checkSchedule(t *testing.T, sum *Summary, extra time.Duration) {
	t.Helper()
	if sum.ReplaySpan < sum.ThinkWait {
		t.Errorf("span %v shorter than the think time waited, %v", sum.ReplaySpan, sum.ThinkWait)
	}
	budget := sum.ThinkWait + sum.LagTotal + sum.ReplayIO + extra
	if sum.ReplaySpan > budget+budget/10+5*time.Millisecond {
		t.Errorf("span %v beyond the schedule: think %v + lag %v + calls %v + %v",
			sum.ReplaySpan, sum.ThinkWait, sum.LagTotal, sum.ReplayIO, extra)
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
	t.Logf("round trip %v: span %v, recorded %v, think waited %v, lag %v, calls %v",
		st.RoundTrip, sum.ReplaySpan, sum.RecordedSpan, sum.ThinkWait, sum.LagTotal, sum.ReplayIO)
	// Recorded: about 1 + 100 x 1.05 + 1.5 ms = 107 ms. The command's ops are 50 µs apart
	// once round trips are out (1.053 ms less the folded lookup and two round trips): 99
	// of them; then 1.55 ms less a round trip from the command's last op to the shell's.
	// Had the shell waited for its recorded gap, the plan would hold another 105 ms.
	r := st.RoundTrip
	want := 99*(1053*time.Microsecond-3*time.Microsecond-2*r) + 1550*time.Microsecond - r
	if d := sum.ThinkWait - want; d < -want/20 || d > want/20 {
		t.Errorf("think time waited %v, want %v: the shell waited for its recorded gap, not for its command", sum.ThinkWait, want)
	}
	// The command's first op is due at its recorded offset, 1.5 ms after the shell's.
	checkSchedule(t, sum, 2*time.Millisecond)
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

// TestThinkSpin: with ThinkSpin a thread's think time keeps a CPU busy and the timing is
// that of think mode. How much CPU a spinning thread gets depends on the machine's load;
// that it stays runnable does not: the replaying thread's runnable time (on a CPU or
// waiting for one, from schedstat) covers the think time when it spins, and it is blocked
// for most of it when it sleeps.
func TestThinkSpin(t *testing.T) {
	if _, err := runnableTimes(); err != nil {
		t.Skipf("no per-thread scheduler statistics: %v", err)
	}
	const ops, gap = 20, 20 * time.Millisecond
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("f"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	for i := 0; i < ops; i++ {
		b.Ev(1, trace.OpGetattr, "f", 2000, int64(gap), func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 })
	}
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	for _, spin := range []bool{false, true} {
		_, d := target(t, "")
		must(t, Prepare(context.Background(), d, st, false))
		src := tracetest.Reader(t, data)
		r0, err := runnableTimes()
		must(t, err)
		sum, err := Run(context.Background(), src, d, nil, Options{Timing: TimingThink, ThinkSpin: spin})
		must(t, err)
		r1, err := runnableTimes()
		must(t, err)
		// The busiest thread of the run: the worker (it is locked to its thread).
		var run time.Duration
		for tid, v := range r1 {
			run = max(run, v-r0[tid])
		}
		t.Logf("spin %v: span %v (recorded %v), think waited %v, busiest thread runnable %v", spin, sum.ReplaySpan, sum.RecordedSpan, sum.ThinkWait, run)
		want := (ops - 1) * gap
		if d := sum.ThinkWait - want; d < -want/100 || d > want/100 {
			t.Errorf("spin %v: think time waited %v, want %v", spin, sum.ThinkWait, want)
		}
		checkSchedule(t, sum, 0)
		// The summary states the replayer's own CPU beside the prediction: spinning
		// through 380 ms takes CPU time, whatever share of a CPU the machine gave it.
		var text strings.Builder
		sum.Print(&text)
		if spin && (sum.ReplayerCPU <= 0 || sum.ReplayerCPUShare <= 0 || sum.CPUs < 1 ||
			!strings.Contains(text.String(), "% of one CPU over the replay")) {
			t.Errorf("replayer CPU %v (share %.2f of %d CPUs) not stated:\n%s", sum.ReplayerCPU, sum.ReplayerCPUShare, sum.CPUs, text.String())
		}
		if spin && run < sum.ThinkWait*8/10 {
			t.Errorf("spinning replay: a thread runnable %v at most, think time %v", run, sum.ThinkWait)
		}
		// A sleeping worker is off the run queue while it sleeps: all of its think time
		// but the spin margin before each due time (at most 2 ms). What a loaded machine
		// adds (waiting for a CPU after each wake-up) is runnable time, and lag, not
		// blocked time.
		if blocked := sum.ReplaySpan - run; !spin && blocked < sum.ThinkWait/2 {
			t.Errorf("sleeping replay: the busiest thread blocked %v of a %v span, think time %v", blocked, sum.ReplaySpan, sum.ThinkWait)
		}
	}
}

// runnableTimes returns, per thread of this process, the time it ran or waited to run
// (/proc/self/task/*/schedstat: time on a CPU, time on a run queue).
func runnableTimes() (map[string]time.Duration, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	m := make(map[string]time.Duration, len(tasks))
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/schedstat")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return nil, err
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(b), &run, &wait); err != nil {
			return nil, fmt.Errorf("schedstat %q: %w", b, err)
		}
		m[task.Name()] = time.Duration(run + wait)
	}
	return m, nil
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

// TestContended: a round trip that more than doubled while the job ran is named; one that
// held, a small rise, or no measurement is not.
func TestContended(t *testing.T) {
	for _, tc := range []struct {
		start, run time.Duration
		want       bool
	}{
		{14 * time.Microsecond, 75 * time.Microsecond, true},
		{50 * time.Microsecond, 56 * time.Microsecond, false},
		{5 * time.Microsecond, 15 * time.Microsecond, false}, // tripled, but by 10 µs
		{0, 75 * time.Microsecond, false},
		{14 * time.Microsecond, 0, false},
	} {
		st := &State{Measured: trace.RoundTrip{Start: tc.start, Run: tc.run, Samples: 3}}
		note := st.Contended()
		if (note != "") != tc.want {
			t.Errorf("start %v, run %v: note %q, want one: %v", tc.start, tc.run, note, tc.want)
		}
		if tc.want && (!strings.Contains(note, tc.start.String()) || !strings.Contains(note, tc.run.String())) {
			t.Errorf("note does not name both round trips: %q", note)
		}
	}
}

// TestThinkMeasuredByKernel: with the kernel's view of a recording (trace.Event's call
// times), think mode waits the application's time between a call's return and its next
// call's entry, whatever the FUSE legs around them were; the parts of one system call
// (the kernel's privilege probe before a chown) follow each other at once however long
// the server took to take the second (two getattrs of one call here); and the time the thread waited for a CPU is left
// out unless asked for.
func TestThinkMeasuredByKernel(t *testing.T) {
	const (
		n        = 40
		think    = 2 * int64(time.Millisecond)  // the application's own time between calls
		runDelay = int64(time.Millisecond)      // of which waiting for a CPU
		leg      = 3 * int64(time.Millisecond)  // FUSE's legs around each request, large
		stall    = 20 * int64(time.Millisecond) // the server's delay before the second part of a call
	)
	b := tracetest.NewFUSE(t)
	b.W.AddFile(trace.File{Path: b.Path("f"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	attrs := func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 }
	var unique uint64
	prevEnd := int64(0)
	b.At(1, int64(time.Second)) // the first call's entry lies after the origin
	call := func(parts int, gapInside int64) {
		start := b.Clock[1] - leg // the call's entry
		for p := 0; p < parts; p++ {
			unique += 2
			op := trace.OpGetattr
			last := p == parts-1
			gap := gapInside
			if last {
				gap = 2*leg + think
			}
			b.Ev(1, op, "f", 5000, gap, func(e *trace.Event) {
				attrs(e)
				e.Unique = unique
				e.Queued, e.Done = e.Start-leg/2, e.End()+leg/2
				e.CallStart, e.CallNr = start, 4
				if prevEnd != 0 {
					e.RunDelay = runDelay + 1
				}
				if last {
					e.CallEnd = e.Done + leg/2
					prevEnd = e.CallEnd
				}
			})
		}
	}
	for i := 0; i < n; i++ {
		if i == n/2 {
			call(2, stall)
			continue
		}
		call(1, 0)
	}
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	for _, o := range []Options{{Timing: TimingThink}, {Timing: TimingThink, KeepRunDelay: true}} {
		_, d := target(t, "")
		must(t, Prepare(context.Background(), d, st, false))
		sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, o)
		must(t, err)
		if sum.Divergences != 0 {
			t.Fatalf("divergences: %v", sum.Examples)
		}
		// n calls, the first without a think time before it; the split call's second
		// part is no call of its own.
		perCall := think
		if !o.KeepRunDelay {
			perCall -= runDelay
		}
		want := time.Duration((n - 1) * perCall)
		t.Logf("keep run delay %v: span %v (recorded %v), think waited %v (measured %d, estimated %d, run delay cut %v), lag %v, calls %v",
			o.KeepRunDelay, sum.ReplaySpan, sum.RecordedSpan, sum.ThinkWait, sum.ThinkMeasured, sum.ThinkEstimated, sum.RunDelayCut, sum.LagTotal, sum.ReplayIO)
		if sum.ThinkWait != want {
			t.Errorf("think waited %v, want %v", sum.ThinkWait, want)
		}
		if sum.ThinkMeasured != n || sum.ThinkEstimated != 0 {
			t.Errorf("think times measured %d, estimated %d; want %d, 0", sum.ThinkMeasured, sum.ThinkEstimated, n)
		}
		if wantCut := time.Duration((n - 1) * runDelay); !o.KeepRunDelay && sum.RunDelayCut != wantCut {
			t.Errorf("run delay cut %v, want %v", sum.RunDelayCut, wantCut)
		}
		checkSchedule(t, sum, 2*time.Millisecond)
	}
}

// TestThinkWaitsForWaker: a thread that waited for another (pthread_join: the kernel saw
// the other thread wake it) is due after that thread's last op before the wake-up
// completes in the replay, plus the recorded time from it, not after its recorded gap:
// here the other thread's ops take 2 ms each in the recording (FUSE round trips) and
// replay much faster, and so does the waiting thread.
func TestThinkWaitsForWaker(t *testing.T) {
	const (
		n     = 50
		slow  = 2 * int64(time.Millisecond) // recorded time per op of the worker thread
		after = 300 * int64(time.Microsecond)
	)
	b := tracetest.NewFUSE(t)
	b.W.AddFile(trace.File{Path: b.Path("f"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	attrs := func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 10 }
	var unique uint64
	stamp := func(e *trace.Event) {
		attrs(e)
		unique += 2
		e.Unique = unique
		e.Queued, e.Done = e.Start-1000, e.End()+1000
		e.CallStart, e.CallEnd = e.Queued-1000, e.Done+1000
	}
	// Thread 1 stats once, then blocks while thread 2 works.
	b.Ev(1, trace.OpGetattr, "f", 5000, 0, stamp)
	b.At(2, b.Clock[1]+int64(time.Millisecond))
	for i := 0; i < n; i++ {
		b.Ev(2, trace.OpGetattr, "f", slow, 0, stamp)
	}
	lastEnd := b.Clock[2] + 2000 // the worker's last call returned
	wake := lastEnd + 50_000     // then it exited and woke thread 1
	b.At(1, wake+after+2000)
	b.Ev(1, trace.OpGetattr, "f", 5000, 0, func(e *trace.Event) {
		stamp(e)
		e.WokenAt, e.Waker = wake, 2
	})
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	_, d := target(t, "")
	must(t, Prepare(context.Background(), d, st, false))
	sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, Options{Timing: TimingThink})
	must(t, err)
	if sum.Divergences != 0 {
		t.Fatalf("divergences: %v", sum.Examples)
	}
	recorded := time.Duration(n * slow)
	t.Logf("span %v (recorded %v), woken ops %d, think waited %v, lag %v, calls %v", sum.ReplaySpan, sum.RecordedSpan, sum.WokenOps, sum.ThinkWait, sum.LagTotal, sum.ReplayIO)
	if sum.WokenOps != 1 {
		t.Errorf("%d ops waited for their waker, want 1", sum.WokenOps)
	}
	// Thread 2's ops take microseconds here: the whole replay is far shorter than the
	// recorded wait of thread 1.
	if sum.ReplaySpan > recorded/2 {
		t.Errorf("span %v: thread 1 waited its recorded gap (%v), not for thread 2", sum.ReplaySpan, recorded)
	}
}
