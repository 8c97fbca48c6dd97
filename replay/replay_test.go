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
)

const testMiB = 1 << 20

// workload writes a realistic FUSE-level trace: an archive extraction (tar), a
// database with a journal (sqlite-like), and a reader thread that lists and stats what
// the others made, over input files that existed before the trace began.
func workload(b *tb, nfiles int) {
	const tar, db, ls = 10, 11, 12
	// Pre-existing input: the layer saw it through a lookup (File record) ...
	b.w.AddFile(trace.File{Path: b.path("in/archive.tar"), Type: trace.TypeFile, Mode: 0o644, Size: 3 * testMiB})
	b.w.AddFile(trace.File{Path: b.path("in"), Type: trace.TypeDir, Mode: 0o755})
	// ... and a config file only ops refer to (no File record).
	b.at(tar, 1e9)
	fh := b.open(tar, "in/archive.tar", unix.O_RDONLY)
	b.ev(tar, trace.OpGetattr, "in/archive.tar", 2000, 1000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 3 * testMiB })
	for i := int64(0); i < 3; i++ { // 1 MiB reads into an unaligned buffer: 1048560 + 16
		b.rw(tar, trace.OpRead, "in/archive.tar", fh, i*testMiB, testMiB-16, testMiB-16)
		b.rw(tar, trace.OpRead, "in/archive.tar", fh, (i+1)*testMiB-16, 16, 16)
	}
	b.rw(tar, trace.OpRead, "in/archive.tar", fh, 3*testMiB, testMiB, 0) // EOF
	b.walk(tar, "out", syscall.ENOENT, 0, 0)
	b.ev(tar, trace.OpMkdir, "out", 20000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	for i := 0; i < nfiles; i++ {
		dir := fmt.Sprintf("out/d%d", i%4)
		if i < 4 {
			b.walk(tar, dir, syscall.ENOENT, 0, 0)
			b.ev(tar, trace.OpMkdir, dir, 20000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
		}
		name := fmt.Sprintf("%s/f%d", dir, i)
		w := b.create(tar, name)
		b.rw(tar, trace.OpWrite, name, w, 0, testMiB-16, testMiB-16)
		b.rw(tar, trace.OpWrite, name, w, testMiB-16, 16, 16)
		b.rw(tar, trace.OpWrite, name, w, testMiB, 1000, 1000)
		b.close(tar, name, w)
		b.walk(tar, name, 0, unix.S_IFREG|0o644, testMiB+1000)
		b.ev(tar, trace.OpSetattr, name, 4000, 1000, func(e *trace.Event) { e.Flags = 1; e.Mode = 0o640 })
		b.lookup(tar, name, 0, unix.S_IFREG|0o640, testMiB+1000)
		b.ev(tar, trace.OpSetattr, name, 4000, 1000, func(e *trace.Event) { e.Flags = 16 | 32 })
	}
	b.walk(tar, "out/link", syscall.ENOENT, 0, 0)
	b.ev(tar, trace.OpSymlink, "out/link", 9000, 1000, func(e *trace.Event) { e.Path2 = b.w.Raw("d0/f0") })
	b.close(tar, "in/archive.tar", fh)
	tarEnd := b.clock[tar]

	// The database thread, concurrently.
	b.at(db, 1e9+50000)
	d := b.createFlags(db, "app.db", unix.O_RDWR|unix.O_CREAT)
	for p := int64(0); p < 16; p++ {
		b.rw(db, trace.OpWrite, "app.db", d, p*4096, 4096, 4096)
	}
	b.ev(db, trace.OpFsync, "app.db", 50000, 1000, func(e *trace.Event) { e.Handle = d })
	j := b.create(db, "app.db-journal")
	b.rw(db, trace.OpWrite, "app.db-journal", j, 0, 512, 512)
	b.ev(db, trace.OpFsync, "app.db-journal", 50000, 1000, func(e *trace.Event) { e.Handle = j; e.Flags = 1 })
	for p := int64(0); p < 16; p += 3 {
		b.rw(db, trace.OpRead, "app.db", d, p*4096, 4096, 4096)
	}
	b.ev(db, trace.OpSetattr, "app.db", 4000, 1000, func(e *trace.Event) { e.Flags = 8; e.Offset = 8 * 4096 })
	b.close(db, "app.db-journal", j)
	b.walk(db, "app.db-journal", 0, unix.S_IFREG|0o644, 512)
	b.ev(db, trace.OpUnlink, "app.db-journal", 9000, 1000, nil)
	b.ev(db, trace.OpGetxattr, "app.db", 2000, 1000, func(e *trace.Event) { e.Size = 64; e.Errno = uint16(syscall.ENODATA) })
	b.lookup(db, "app.db-wal", syscall.ENOENT, 0, 0) // stat of a missing file
	b.walk(db, "app.tmp", syscall.ENOENT, 0, 0)
	t := b.create(db, "app.tmp")
	b.rw(db, trace.OpWrite, "app.tmp", t, 0, 100, 100)
	// The kernel sends the release of the handle from no thread (tid 0).
	b.ev(db, trace.OpFlush, "app.tmp", 2000, 500, func(e *trace.Event) { e.Handle = t })
	b.ev(0, trace.OpRelease, "app.tmp", 1000, 0, func(e *trace.Event) { e.Handle = t; e.Start = b.clock[db]; e.Tid, e.Pid = 0, 0 })
	b.walk(db, "app.tmp", 0, unix.S_IFREG|0o644, 100)
	b.lookup(db, "app.final", syscall.ENOENT, 0, 0)
	b.ev(db, trace.OpRename, "app.tmp", 9000, 1000, func(e *trace.Event) { e.Path2 = b.path("app.final") })
	b.close(db, "app.db", d)

	// The lister, after tar is done.
	b.at(ls, tarEnd+100000)
	b.walk(ls, "out", 0, unix.S_IFDIR|0o755, 4096)
	b.ev(ls, trace.OpOpendir, "out", 3000, 1000, func(e *trace.Event) { e.Handle = 9000 })
	b.ev(ls, trace.OpReaddir, "out", 5000, 1000, func(e *trace.Event) { e.Handle = 9000; e.Size = 4096; e.Ret = 200 })
	b.ev(ls, trace.OpReaddir, "out", 2000, 1000, func(e *trace.Event) { e.Handle = 9000; e.Offset = 6; e.Size = 4096 })
	b.ev(ls, trace.OpReleasedir, "out", 1000, 1000, func(e *trace.Event) { e.Handle = 9000 })
	for i := 0; i < nfiles; i++ {
		name := fmt.Sprintf("out/d%d/f%d", i%4, i)
		b.walk(ls, name, 0, unix.S_IFREG|0o640, testMiB+1000)
		b.ev(ls, trace.OpGetattr, name, 2000, 1000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o640; e.Ret = testMiB + 1000 })
	}
	b.walk(ls, "out/link", 0, unix.S_IFLNK|0o777, 5)
	b.ev(ls, trace.OpReadlink, "out/link", 2000, 1000, func(e *trace.Event) { e.Size = 4096; e.Ret = 5 })
	b.ev(ls, trace.OpStatfs, "", 2000, 1000, nil)
	b.walk(ls, "etc/app.conf", 0, unix.S_IFREG|0o644, 300) // pre-existing, never a File record
	c := b.fh + 1
	b.fh++
	b.ev(ls, trace.OpOpen, "etc/app.conf", 3000, 1000, func(e *trace.Event) { e.Handle = c; e.Flags = unix.O_RDONLY })
	b.rw(ls, trace.OpRead, "etc/app.conf", c, 0, 4096, 300)
	b.close(ls, "etc/app.conf", c)
	b.walk(ls, "missing/file", syscall.ENOENT, 0, 0)
	b.ev(ls, trace.OpForget, "-", 100, 0, nil)
}

// TestAA replays a realistic trace onto two fresh directories: op counts and bytes
// match the trace exactly, with no divergence, and the replay traces agree.
func TestAA(t *testing.T) {
	b := newTB(t)
	workload(b, 24)
	data := b.bytes()
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
	r := readerOf(t, data)
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
	b := newTB(t)
	workload(b, 4)
	data := b.bytes()
	st, err := DeriveState(readerOf(t, data), PlanOptions{})
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
	problems, n, err := Check(readerOf(t, data), st, PlanOptions{})
	if err != nil || n != 0 {
		t.Fatalf("dry run: %d problems %v %v", n, problems, err)
	}
	// Without the starting state, the dry run finds the ops that cannot succeed.
	problems, n, err = Check(readerOf(t, data), &State{}, PlanOptions{})
	if err != nil || n == 0 {
		t.Fatalf("dry run on an empty state found nothing (%v)", err)
	}
	t.Logf("%d problems on an empty state, first: %v", n, problems[0])
}

// TestOrdering runs threads whose ops depend on each other through shared files many
// times in afap mode: a reader must never open a file before its writer created it, an
// unlinker never remove it before the reader is done.
func TestOrdering(t *testing.T) {
	b := newTB(t)
	const n = 200
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("f%d", i)
		t0 := int64(1e9 + i*100000)
		b.at(1, t0)
		w := b.create(1, name)
		b.rw(1, trace.OpWrite, name, w, 0, 100, 100)
		b.close(1, name, w)
		b.at(2, b.clock[1]+1000) // the reader starts after the writer's close
		r := b.open(2, name, unix.O_RDONLY)
		b.rw(2, trace.OpRead, name, r, 0, 4096, 100)
		b.ev(2, trace.OpFlush, name, 1000, 0, func(e *trace.Event) { e.Handle = r })
		b.ev(0, trace.OpRelease, name, 1000, 0, func(e *trace.Event) { e.Handle = r; e.Start = b.clock[2] })
		b.at(3, b.clock[2]+2000)
		b.lookup(3, name, 0, unix.S_IFREG|0o644, 100)
		b.ev(3, trace.OpUnlink, name, 3000, 0, nil)
		// A directory listing in a fourth thread that must see f<i> gone.
		b.at(4, b.clock[3]+1000)
		b.lookup(4, name, syscall.ENOENT, 0, 0)
	}
	data := b.bytes()
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
	b := newTB(t)
	workload(b, 2)
	data := b.bytes()
	p := newPlanner(readerOf(t, data), PlanOptions{})
	kinds := map[Kind]int{}
	for {
		op, err := p.next()
		if err == io.EOF {
			break
		}
		must(t, err)
		kinds[op.Kind]++
		if op.Kind == KClose && op.Worker == 0 {
			t.Fatalf("close of handle %d scheduled on the kernel's tid 0", op.Handle)
		}
	}
	// Standalone lookups of missing names become lstat; walk lookups disappear.
	// workload(2): stats: getattr(1) + 2 getattr (ls) + app.db-wal + missing/file + out/link? (folded into readlink)
	if kinds[KStat] != 2+2 || kinds[KFstat] != 1 {
		t.Errorf("lstat count = %d, want 4, fstat %d, want 1 (%v)", kinds[KStat], kinds[KFstat], kinds)
	}
	if kinds[KRead] != 3+1+6+1 {
		t.Errorf("pread count = %d, want 11", kinds[KRead])
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
	b := newTB(t)
	workload(b, 8)
	data := b.bytes()
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
	b := newTB(t)
	for i := 0; i < 50; i++ {
		fh := b.open(1, fmt.Sprintf("in/f%d", i), unix.O_RDONLY)
		b.rw(1, trace.OpRead, fmt.Sprintf("in/f%d", i), fh, 0, 4096, 100)
		b.close(1, fmt.Sprintf("in/f%d", i), fh)
	}
	data := b.bytes()
	for _, pol := range []DivergePolicy{DivergeIgnore, DivergeWarn, DivergeAbort} {
		_, d := target(t, "")
		sum, err := Run(t.Context(), readerOf(t, data), d, nil, Options{Timing: TimingAFAP, OnDiverge: pol})
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
	b := newTB(t)
	b.walk(1, "a/b/c", syscall.ENOENT, 0, 0) // lookups a, a/b, a/b/c: a walk from the root
	b.ev(1, trace.OpMkdir, "a/b/c", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	b.lookup(1, "a/b/c/d", syscall.ENOENT, 0, 0) // only the last component: from a/b/c
	b.ev(1, trace.OpMkdir, "a/b/c/d", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	b.ev(1, trace.OpMkdir, "a/b/c/e", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 }) // no lookup
	p := newPlanner(readerOf(t, b.bytes()), PlanOptions{})
	want := map[string]string{"a/b/c": "", "a/b/c/d": "a/b/c", "a/b/c/e": "a/b/c"}
	for {
		op, err := p.next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if w, ok := want[op.Name]; ok && op.Walk != w {
			t.Errorf("%s %q: walk from %q, want %q", op.Kind, op.Name, op.Walk, w)
		}
	}
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
	b := newTB(t)
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("x%d", i)
		base := int64(1e9 + i*10e6)
		b.at(1, base)
		b.lookup(1, name, syscall.ENOENT, 0, 0)
		b.at(2, base+3e6) // 3 ms later, beyond the fold window
		fh := b.create(2, name)
		b.close(2, name, fh)
	}
	b.at(1, 5e9)
	b.ev(1, trace.OpGetattr, "x0", 1000, 0, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644 })
	data := b.bytes()
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
	b := newTB(t)
	b.walk(1, "lib/link", 0, unix.S_IFLNK|0o777, 11)
	b.ev(1, trace.OpReadlink, "lib/link", 2000, 1000, func(e *trace.Event) { e.Size = 4096; e.Ret = 11 })
	data := b.bytes()
	_, d := target(t, "")
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ReplayedOps != 1 {
		t.Fatalf("%d ops, divergences %v", sum.ReplayedOps, sum.Examples)
	}
}

// TestDirectoryEntryCount: a pre-existing directory listed in full gets placeholder
// entries for the names the trace never shows.
func TestDirectoryEntryCount(t *testing.T) {
	b := newTB(t)
	b.w.AddFile(trace.File{Path: b.path("data"), Type: trace.TypeDir, Mode: 0o755})
	b.w.AddFile(trace.File{Path: b.path("data/s01"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	b.w.AddFile(trace.File{Path: b.path("data/s02"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	// "." ".." and 12 three-letter names: 14 fuse_dirents of 32 bytes (24+3 -> 32, 24+1 ->
	// 32, 24+2 -> 32).
	b.walk(1, "data", 0, unix.S_IFDIR|0o755, 4096)
	b.ev(1, trace.OpOpendir, "data", 3000, 1000, func(e *trace.Event) { e.Handle = 77 })
	b.ev(1, trace.OpReaddir, "data", 5000, 1000, func(e *trace.Event) { e.Handle = 77; e.Size = 4096; e.Ret = 14 * 32 })
	b.ev(1, trace.OpReaddir, "data", 2000, 1000, func(e *trace.Event) { e.Handle = 77; e.Offset = 14; e.Size = 4096 })
	b.ev(1, trace.OpReleasedir, "data", 1000, 1000, func(e *trace.Event) { e.Handle = 77 })
	st, err := DeriveState(readerOf(t, b.bytes()), PlanOptions{})
	must(t, err)
	var fill int
	for _, e := range st.Entries {
		if parentOf(e.Name) == "data" && e.Name != "data/s01" && e.Name != "data/s02" {
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
	b := newTB(t)
	for i := 0; i < 300; i++ {
		a, c := fmt.Sprintf("a%d", i), fmt.Sprintf("c%d", i)
		t0 := int64(1e9 + i*100000)
		b.at(1, t0)
		fa := b.create(1, a)
		b.rw(1, trace.OpWrite, a, fa, 0, 10, 10)
		rel := b.clock[1]
		b.ev(1, trace.OpRelease, a, 50000, 0, func(e *trace.Event) { e.Handle = fa })
		b.at(2, rel+1000) // inside the release's 50 µs
		b.fh++
		fc := b.fh
		b.ev(2, trace.OpCreate, c, 1000, 0, func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode = fc, unix.O_WRONLY|unix.O_CREAT, 0o644
		})
		b.rw(2, trace.OpWrite, c, fc, 0, 10, 10)
		b.ev(2, trace.OpRelease, c, 1000, 0, func(e *trace.Event) { e.Handle = fc })
	}
	data := b.bytes()
	for run := 0; run < 10; run++ {
		_, d := target(t, "")
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
		if sum.Divergences != 0 {
			t.Fatalf("run %d: %d divergences: %v", run, sum.Divergences, sum.Examples)
		}
	}
}
