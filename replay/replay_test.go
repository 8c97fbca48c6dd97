package replay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/tracetest"
)

const testMiB = 1 << 20

// TestAA replays a realistic trace onto two fresh directories: op counts and bytes
// match the trace exactly, with no divergence, and the replay traces agree.
func TestAA(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 24)
	data := b.Bytes()
	var outs [][]byte
	for _, timing := range []Timing{TimingThink, TimingAFAP} {
		for run := 0; run < 2; run++ {
			_, d := target(t, "")
			var out bytes.Buffer
			w, err := trace.NewWriter(&out, trace.Header{Kind: "replay", Target: d.Target()}, trace.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sum := replayOnto(t, data, d, w, Options{Timing: timing})
			must(t, w.Close())
			var sb bytes.Buffer
			sum.Print(&sb)
			t.Logf("%s run %d:\n%s", timing, run, sb.String())
			if sum.Divergences != 0 || sum.ReplayedOps != sum.RecordedOps || sum.SkippedOps != 0 {
				t.Fatalf("run %d: %d of %d ops replayed, %d divergences: %v", run, sum.ReplayedOps, sum.RecordedOps, sum.Divergences, sum.Examples)
			}
			if sum.ReplayedRead != sum.RecordedRead || sum.ReplayedWrite != sum.RecordedWrite {
				t.Fatalf("bytes: read %d/%d written %d/%d", sum.ReplayedRead, sum.RecordedRead, sum.ReplayedWrite, sum.RecordedWrite)
			}
			if sum.Fold.Merged != 3+24 {
				t.Fatalf("merged %d split reads/writes, want %d", sum.Fold.Merged, 3+24)
			}
			if sum.ImplicitOpens != 0 || sum.Escapes != 0 {
				t.Fatalf("implicit opens %d, escapes %d", sum.ImplicitOpens, sum.Escapes)
			}
			// The replay trace holds one event per replayed op, with the same op codes.
			counts := countOps(t, out.Bytes())
			for _, o := range sum.Ops {
				if counts[o.Op] != o.Replayed {
					t.Fatalf("replay trace has %d %s events, summary says %d", counts[o.Op], o.Op, o.Replayed)
				}
			}
			outs = append(outs, out.Bytes())
		}
	}
	a, c := countOps(t, outs[0]), countOps(t, outs[1])
	if a != c {
		t.Fatalf("two replays differ: %v vs %v", a, c)
	}
}

func countOps(t testing.TB, data []byte) [trace.NumOps]uint64 {
	r := tracetest.Reader(t, data)
	var n [trace.NumOps]uint64
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n[ev.Op]++
	}
	return n
}

// TestPreexisting checks the starting state derived from a trace that uses files it
// never creates.
func TestPreexisting(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 4)
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range st.Entries {
		got[e.Name] = e
	}
	want := map[string]Entry{
		"in":             {Name: "in", Type: trace.TypeDir, Mode: 0o755},
		"in/archive.tar": {Name: "in/archive.tar", Type: trace.TypeFile, Mode: 0o644, Size: 3 * testMiB},
		"etc":            {Name: "etc", Type: trace.TypeDir},
		"etc/app.conf":   {Name: "etc/app.conf", Type: trace.TypeFile, Size: 300},
	}
	if len(got) != len(want) {
		t.Fatalf("state = %+v, want %+v", st.Entries, want)
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s: got %+v, want %+v", k, got[k], w)
		}
	}
	problems, n, err := Check(tracetest.Reader(t, data), st, PlanOptions{})
	if err != nil || n != 0 {
		t.Fatalf("dry run: %d problems %v %v", n, problems, err)
	}
	// Without the starting state, the dry run finds the ops that cannot succeed.
	problems, n, err = Check(tracetest.Reader(t, data), &State{}, PlanOptions{})
	if err != nil || n == 0 {
		t.Fatalf("dry run on an empty state found nothing (%v)", err)
	}
	t.Logf("%d problems on an empty state, first: %v", n, problems[0])
}

// TestOrdering runs threads whose ops depend on each other through shared files many
// times in afap mode: a reader must never open a file before its writer created it, an
// unlinker never remove it before the reader is done.
func TestOrdering(t *testing.T) {
	b := tracetest.New(t)
	const n = 200
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d", i)
		t0 := int64(1e9 + i*100000)
		b.At(1, t0)
		w := b.Create(1, name)
		b.RW(1, trace.OpWrite, name, w, 0, 100, 100)
		b.Close(1, name, w)
		b.At(2, b.Clock[1]+1000) // the reader starts after the writer's close
		r := b.Open(2, name, unix.O_RDONLY)
		b.RW(2, trace.OpRead, name, r, 0, 4096, 100)
		b.Ev(2, trace.OpFlush, name, 1000, 0, func(e *trace.Event) { e.Handle = r })
		b.Ev(0, trace.OpRelease, name, 1000, 0, func(e *trace.Event) { e.Handle = r; e.Start = b.Clock[2] })
		b.At(3, b.Clock[2]+2000)
		b.Lookup(3, name, 0, unix.S_IFREG|0o644, 100)
		b.Ev(3, trace.OpUnlink, name, 3000, 0, nil)
		// A directory listing in a fourth thread that must see f<i> gone.
		b.At(4, b.Clock[3]+1000)
		b.Lookup(4, name, syscall.ENOENT, 0, 0)
	}
	data := b.Bytes()
	for run := 0; run < 20; run++ {
		_, d := target(t, "")
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP, OnDiverge: DivergeAbort})
		if sum.Divergences != 0 || sum.ReplayedOps != sum.RecordedOps {
			t.Fatalf("run %d: %d divergences: %v", run, sum.Divergences, sum.Examples)
		}
		if sum.Threads != 4 {
			t.Fatalf("threads = %d", sum.Threads)
		}
	}
}

// TestFolding checks the mapping of kernel traffic to system calls.
func TestFolding(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 2)
	data := b.Bytes()
	kinds := map[fold.Kind]int{}
	p := planEach(t, data, func(op *replayOp) {
		kinds[op.Kind]++
		if op.Kind == fold.Close && op.Worker == 0 {
			t.Fatalf("close of handle %d scheduled on the kernel's tid 0", op.Handle)
		}
	})
	// Standalone lookups of missing names become lstat; walk lookups disappear.
	// workload(2): stats: getattr(1) + 2 getattr (ls) + app.db-wal + missing/file + out/link? (folded into readlink)
	if kinds[fold.Stat] != 2+2 || kinds[fold.Fstat] != 1 {
		t.Errorf("lstat count = %d, want 4, fstat %d, want 1 (%v)", kinds[fold.Stat], kinds[fold.Fstat], kinds)
	}
	if kinds[fold.Read] != 3+1+6+1 {
		t.Errorf("pread count = %d, want 11", kinds[fold.Read])
	}
	if p.Stats.Folded[trace.OpRelease] == 0 || p.Stats.Folded[trace.OpLookup] == 0 || p.Stats.Folded[trace.OpForget] != 1 {
		t.Errorf("folded: %v", p.Stats.Folded)
	}
}

func TestPrepareRefusesNothingOutside(t *testing.T) {
	root, d := target(t, "")
	st := &State{Entries: []Entry{{Name: "a", Type: trace.TypeDir}, {Name: "a/b", Type: trace.TypeFile, Size: 5000}}}
	must(t, Prepare(t.Context(), d, st, true))
	fi, err := os.Stat(filepath.Join(root, "a/b"))
	if err != nil || fi.Size() != 5000 {
		t.Fatalf("prepared file: %v %v", fi, err)
	}
}

// TestDecoratedReplay replays through a decorated backend: decorators change nothing the
// replay checks.
func TestDecoratedReplay(t *testing.T) {
	b := tracetest.New(t)
	tracetest.Workload(b, 8)
	data := b.Bytes()
	_, d := target(t, "")
	dec := Decorate(d, Chain(Retry(3, 0), Limit(0, 2)))
	sum := replayOnto(t, data, dec, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ReplayedOps != sum.RecordedOps {
		t.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
	}
}

// TestDivergencePolicies replays a trace onto a target that lacks its starting state:
// warn and ignore count the divergences, abort stops with ErrDiverged.
func TestDivergencePolicies(t *testing.T) {
	b := tracetest.New(t)
	for i := 0; i < 50; i++ {
		fh := b.Open(1, fmt.Sprintf("in/f%d", i), unix.O_RDONLY)
		b.RW(1, trace.OpRead, fmt.Sprintf("in/f%d", i), fh, 0, 4096, 100)
		b.Close(1, fmt.Sprintf("in/f%d", i), fh)
	}
	data := b.Bytes()
	for _, pol := range []DivergePolicy{DivergeIgnore, DivergeWarn, DivergeAbort} {
		_, d := target(t, "")
		sum, err := Run(t.Context(), tracetest.Reader(t, data), d, nil, Options{Timing: TimingAFAP, OnDiverge: pol})
		switch pol {
		case DivergeAbort:
			if !errors.Is(err, ErrDiverged) {
				t.Fatalf("abort: err = %v", err)
			}
		default:
			if err != nil || sum.Divergences != 150 || sum.Ops[0].Diverged == 0 {
				t.Fatalf("policy %d: err %v, %d divergences", pol, err, sum.Divergences)
			}
		}
	}
}

// TestWalkStart checks where replayed calls start their path walk: at the shallowest
// lookup folded into them, else at their parent.
func TestWalkStart(t *testing.T) {
	b := tracetest.New(t)
	b.Walk(1, "a/b/c", syscall.ENOENT, 0, 0) // lookups a, a/b, a/b/c: a walk from the root
	b.Ev(1, trace.OpMkdir, "a/b/c", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	b.Lookup(1, "a/b/c/d", syscall.ENOENT, 0, 0) // only the last component: from a/b/c
	b.Ev(1, trace.OpMkdir, "a/b/c/d", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	b.Ev(1, trace.OpMkdir, "a/b/c/e", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 }) // no lookup
	want := map[string]string{"a/b/c": "", "a/b/c/d": "a/b/c", "a/b/c/e": "a/b/c"}
	planEach(t, b.Bytes(), func(op *replayOp) {
		if w, ok := want[op.Name]; ok && op.Walk != w {
			t.Errorf("%s %q: walk from %q, want %q", op.Kind, op.Name, op.Walk, w)
		}
	})
}

// TestTimingModes checks that original timing keeps recorded start offsets against one
// origin (no drift over a second of trace) and think timing keeps think times.
func TestTimingModes(t *testing.T) {
	if testing.Short() {
		t.Skip("takes seconds")
	}
	data := statTrace(t, 3, 1000, 1000) // 1000 ops at 1 kHz over 3 threads: 1 s
	tests := []struct {
		name   string
		timing Timing
		speed  float64
		want   time.Duration
	}{
		{"original", TimingOriginal, 1, 999 * time.Millisecond},
		{"original x2", TimingOriginal, 2, 500 * time.Millisecond},
		{"think", TimingThink, 1, 999 * time.Millisecond},
		{"afap", TimingAFAP, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, d := target(t, "")
			sum := replayOnto(t, data, d, nil, Options{Timing: tt.timing, Speed: tt.speed})
			if sum.Divergences != 0 {
				t.Fatalf("divergences: %v", sum.Examples)
			}
			got := sum.ReplaySpan
			t.Logf("span %v (recorded %v), lag p50 %v p99 %v max %v", got, sum.RecordedSpan, sum.LagP50, sum.LagP99, sum.LagMax)
			if tt.timing == TimingAFAP {
				if got > 500*time.Millisecond {
					t.Fatalf("afap took %v", got)
				}
				return
			}
			// Anchored (original): the run ends late by at most the last op's lag, never by
			// an accumulation. Closed loop (think): lateness accumulates along each thread,
			// by at most the summed lag and the extra op time.
			slack := sum.LagMax + 10*time.Millisecond
			if tt.timing == TimingThink {
				slack = sum.LagTotal + max(sum.ReplayIO-sum.RecordedIO, 0) + 10*time.Millisecond
			}
			if d := got - tt.want; d < -10*time.Millisecond || d > slack {
				t.Fatalf("span %v, want %v (-10ms/+%v)", got, tt.want, slack)
			}
		})
	}
}

// TestQuietThreadLookup: a thread stats a missing name and then stays quiet while another
// thread creates it; the stat must still run before the create.
func TestQuietThreadLookup(t *testing.T) {
	b := tracetest.New(t)
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("x%d", i)
		base := int64(1e9 + i*10e6)
		b.At(1, base)
		b.Lookup(1, name, syscall.ENOENT, 0, 0)
		b.At(2, base+3e6) // 3 ms later, beyond the fold window
		fh := b.Create(2, name)
		b.Close(2, name, fh)
	}
	b.At(1, 5e9)
	b.Ev(1, trace.OpGetattr, "x0", 1000, 0, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644 })
	data := b.Bytes()
	for run := 0; run < 10; run++ {
		_, d := target(t, "")
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP, OnDiverge: DivergeAbort})
		if sum.Divergences != 0 {
			t.Fatalf("run %d: %v", run, sum.Examples)
		}
	}
}

// TestPreexistingSymlink: a symlink the trace only reads gets a placeholder target of the
// recorded length.
func TestPreexistingSymlink(t *testing.T) {
	b := tracetest.New(t)
	b.Walk(1, "lib/link", 0, unix.S_IFLNK|0o777, 11)
	b.Ev(1, trace.OpReadlink, "lib/link", 2000, 1000, func(e *trace.Event) { e.Size = 4096; e.Ret = 11 })
	data := b.Bytes()
	_, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ReplayedOps != 1 {
		t.Fatalf("%d ops, divergences %v", sum.ReplayedOps, sum.Examples)
	}
}

// TestDirectoryEntryCount: a pre-existing directory listed in full gets placeholder
// entries for the names the trace never shows.
func TestDirectoryEntryCount(t *testing.T) {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("data"), Type: trace.TypeDir, Mode: 0o755})
	b.W.AddFile(trace.File{Path: b.Path("data/s01"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	b.W.AddFile(trace.File{Path: b.Path("data/s02"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	// "." ".." and 12 three-letter names: 14 fuse_dirents of 32 bytes (24+3 -> 32, 24+1 ->
	// 32, 24+2 -> 32).
	b.Walk(1, "data", 0, unix.S_IFDIR|0o755, 4096)
	b.Ev(1, trace.OpOpendir, "data", 3000, 1000, func(e *trace.Event) { e.Handle = 77 })
	b.Ev(1, trace.OpReaddir, "data", 5000, 1000, func(e *trace.Event) { e.Handle = 77; e.Size = 4096; e.Ret = 14 * 32 })
	b.Ev(1, trace.OpReaddir, "data", 2000, 1000, func(e *trace.Event) { e.Handle = 77; e.Offset = 14; e.Size = 4096 })
	b.Ev(1, trace.OpReleasedir, "data", 1000, 1000, func(e *trace.Event) { e.Handle = 77 })
	st, err := DeriveState(tracetest.Reader(t, b.Bytes()), PlanOptions{})
	must(t, err)
	var fill int
	for _, e := range st.Entries {
		if fold.Parent(e.Name) == "data" && e.Name != "data/s01" && e.Name != "data/s02" {
			fill++
		}
	}
	if fill != 10 {
		t.Fatalf("%d placeholder entries, want 10: %+v", fill, st.Entries)
	}
}

// TestSlotReuse: a handle's open-file slot is reused by another thread's open that began
// while the first handle's release was still running in the recording; the new open
// must still wait for that close, or the close would hit the new file.
func TestSlotReuse(t *testing.T) {
	b := tracetest.New(t)
	for i := 0; i < 300; i++ {
		a, c := fmt.Sprintf("a%d", i), fmt.Sprintf("c%d", i)
		t0 := int64(1e9 + i*100000)
		b.At(1, t0)
		fa := b.Create(1, a)
		b.RW(1, trace.OpWrite, a, fa, 0, 10, 10)
		rel := b.Clock[1]
		b.Ev(1, trace.OpRelease, a, 50000, 0, func(e *trace.Event) { e.Handle = fa })
		b.At(2, rel+1000) // inside the release's 50 µs
		b.FH++
		fc := b.FH
		b.Ev(2, trace.OpCreate, c, 1000, 0, func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode = fc, unix.O_WRONLY|unix.O_CREAT, 0o644
		})
		b.RW(2, trace.OpWrite, c, fc, 0, 10, 10)
		b.Ev(2, trace.OpRelease, c, 1000, 0, func(e *trace.Event) { e.Handle = fc })
	}
	data := b.Bytes()
	for run := 0; run < 10; run++ {
		_, d := target(t, "")
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
		if sum.Divergences != 0 {
			t.Fatalf("run %d: %d divergences: %v", run, sum.Divergences, sum.Examples)
		}
	}
}
