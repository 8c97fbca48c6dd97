package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// allocatedBy returns the bytes the heap allocated while f ran.
func allocatedBy(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	a := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - a
}

// replayAllocs derives, prepares and replays data onto a new directory, returning the
// summary, the bytes the replay (not the preparation) allocated, and the root.
func replayAllocs(t *testing.T, data []byte, o Options) (*Summary, uint64, string) {
	t.Helper()
	root, d := target(t, "")
	st, err := DeriveState(tracetest.Reader(t, data), o.Plan)
	must(t, err)
	must(t, Prepare(context.Background(), d, st, false))
	var sum *Summary
	alloc := allocatedBy(func() {
		sum, err = Run(context.Background(), tracetest.Reader(t, data), d, nil, o)
	})
	must(t, err)
	return sum, alloc, root
}

// TestHugeReadsBounded: reads that ask for 4 GiB − 1 (more than one system call moves)
// and 9 MiB of an 8 KiB file are replayed through a read buffer of at most 4 MiB, the
// first clamped and counted; the replay allocates tens of MiB, not the 4 GiB asked for.
func TestHugeReadsBounded(t *testing.T) {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("big"), Type: trace.TypeFile, Mode: 0o644, Size: 8192})
	fh := b.Open(1, "big", unix.O_RDONLY)
	b.RW(1, trace.OpRead, "big", fh, 0, 1<<32-1, 8192)
	b.RW(1, trace.OpRead, "big", fh, 0, 9<<20, 8192)
	b.Close(1, "big", fh)
	for _, tm := range []Timing{TimingAFAP, TimingThink} {
		sum, alloc, _ := replayAllocs(t, b.Bytes(), Options{Timing: tm})
		if sum.Divergences != 0 || sum.ReplayedRead != 2*8192 {
			t.Fatalf("%s: %d divergences, read %d bytes (want %d): %v", tm, sum.Divergences, sum.ReplayedRead, 2*8192, sum.Examples)
		}
		if sum.Clamped != 1 {
			t.Errorf("%s: %d ops clamped, want 1 (the read of 4 GiB − 1)", tm, sum.Clamped)
		}
		if alloc > 64<<20 {
			t.Errorf("%s: the replay allocated %d MiB", tm, alloc>>20)
		}
	}
}

// TestLargeWritesInPieces: a 9 MiB write (a system call the layer saw as many requests)
// is replayed in 4 MiB pieces from the shared write data: the file holds every byte, and
// the replay allocates far less than the write's size over again.
func TestLargeWritesInPieces(t *testing.T) {
	const size = 9<<20 + 5
	b := tracetest.New(t)
	fh := b.Create(1, "out")
	b.RW(1, trace.OpWrite, "out", fh, 3, size, size)
	// The same write on a handle open for reading only fails at once (EBADF), whatever
	// its size: 4 GiB − 1 allocates nothing.
	b.W.AddFile(trace.File{Path: b.Path("in"), Type: trace.TypeFile, Mode: 0o644, Size: 10})
	ro := b.Open(1, "in", unix.O_RDONLY)
	b.Ev(1, trace.OpWrite, "in", 1000, 1000, func(e *trace.Event) {
		e.Handle, e.Size, e.Errno = ro, 1<<32-1, uint16(syscall.EBADF)
	})
	b.Close(1, "in", ro)
	b.Close(1, "out", fh)
	sum, alloc, root := replayAllocs(t, b.Bytes(), Options{Timing: TimingAFAP})
	if sum.Divergences != 0 || sum.ReplayedWrite != size {
		t.Fatalf("%d divergences, wrote %d bytes (want %d): %v", sum.Divergences, sum.ReplayedWrite, size, sum.Examples)
	}
	fi, err := os.Stat(filepath.Join(root, "out"))
	must(t, err)
	if fi.Size() != size+3 {
		t.Errorf("out is %d bytes, want %d", fi.Size(), size+3)
	}
	if sum.Clamped != 1 {
		t.Errorf("%d ops clamped, want 1", sum.Clamped)
	}
	if alloc > 32<<20 {
		t.Errorf("the replay allocated %d MiB", alloc>>20)
	}
}

// cappedDir is a Dir whose files fail writes with ENOSPC once 64 MiB were written in
// all: a test that would otherwise fill the disk fails fast.
type cappedDir struct {
	*Dir
	written int64
}

func (c *cappedDir) Open(ctx context.Context, name string, flags int, perm uint32) (File, error) {
	f, err := c.Dir.Open(ctx, name, flags, perm)
	if err != nil {
		return nil, err
	}
	return cappedFile{File: f, c: c}, nil
}

type cappedFile struct {
	File
	c *cappedDir
}

func (f cappedFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.c.written += int64(len(p)); f.c.written > 64<<20 {
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(ctx, p, off)
}

// TestPrepareRefusesWhatDoesNotFit: a starting state of a 1 PiB file (a File record says
// so) is refused before anything is created, with an error that names what it needs and
// what the target has free; one that fits is made.
func TestPrepareRefusesWhatDoesNotFit(t *testing.T) {
	root, dir := target(t, "")
	d := &cappedDir{Dir: dir}
	st := &State{Entries: []Entry{{Name: "a", Type: trace.TypeDir}, {Name: "a/huge", Type: trace.TypeFile, Size: 1 << 50}},
		Files: 1, Dirs: 1, Bytes: 1 << 50}
	err := PrepareTarget(context.Background(), d, st, false)
	var ns *NoSpaceError
	if !errors.As(err, &ns) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v, want a *NoSpaceError wrapping ENOSPC", err)
	}
	if !strings.Contains(err.Error(), "needs 1.00PiB") || !strings.Contains(err.Error(), "free") {
		t.Errorf("err = %q: want what the state needs and what is free", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("the target holds %d entries after the refusal", len(ents))
	}
	st.Entries[1].Size, st.Bytes = 1<<20, 1<<20
	must(t, PrepareTarget(context.Background(), d, st, false))
	if fi, err := os.Stat(filepath.Join(root, "a/huge")); err != nil || fi.Size() != 1<<20 {
		t.Fatalf("a/huge: %v, %v", fi, err)
	}
}

// TestStateNeed checks Need against sums done by hand: files rounded up to whole blocks
// less their holes (overlapping, and one to the end of the file), a block per directory
// and per symlink whose target is longer than 60 bytes, an inode per entry.
func TestStateNeed(t *testing.T) {
	st := &State{Entries: []Entry{
		{Name: "d", Type: trace.TypeDir},
		{Name: "d/empty", Type: trace.TypeFile},
		{Name: "d/one", Type: trace.TypeFile, Size: 1},
		{Name: "d/holes", Type: trace.TypeFile, Size: 100_000, Holes: []Hole{{Off: 0, End: 10_000}, {Off: 5_000, End: 20_000}, {Off: 90_000, End: -1}}},
		{Name: "d/short", Type: trace.TypeSymlink, Target: "x"},
		{Name: "d/long", Type: trace.TypeSymlink, Target: strings.Repeat("y", 61)},
	}}
	// holes: [0,20000) and [90000,100000): 70,000 bytes of data, 18 blocks of 4096.
	want := uint64(4096 + 0 + 4096 + 18*4096 + 0 + 4096)
	if b, n := st.Need(4096); b != want || n != 6 {
		t.Errorf("Need(4096) = %d bytes, %d inodes; want %d, 6", b, n, want)
	}
}

// TestCheckSaysClamped: the dry run lists the reads and writes a replay clamps.
func TestCheckSaysClamped(t *testing.T) {
	b := tracetest.New(t)
	b.W.AddFile(trace.File{Path: b.Path("big"), Type: trace.TypeFile, Mode: 0o644, Size: 8192})
	fh := b.Open(1, "big", unix.O_RDONLY)
	b.RW(1, trace.OpRead, "big", fh, 0, 1<<32-1, 8192)
	b.RW(1, trace.OpRead, "big", fh, 0, 1<<31-4096, 8192)
	b.Close(1, "big", fh)
	data := b.Bytes()
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	probs, n, err := Check(tracetest.Reader(t, data), st, PlanOptions{})
	must(t, err)
	if n != 1 || len(probs) != 1 || !strings.Contains(probs[0].What, "1 reads, writes or copies ask for more bytes") {
		t.Fatalf("%d problems: %v", n, probs)
	}
}
