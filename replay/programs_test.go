package replay

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/tracetest"
)

// Patterns of real programs that a replay got wrong: a shell redirection written by the
// command the shell forked, GNU cp's copy_file_range, and rm -rf of a name the next
// command creates. The cmd/iotap test TestReplayRecordedPrograms records the programs
// themselves.

// TestRedirectionWrittenByChild: `awk ... > out` in sh. The shell (tid 1) creates the file
// and dup2s it (flush), awk (tid 2) writes it through the inherited descriptor and exits
// (flush), the shell restores its stdout (flush, release) right after. awk's last write
// must be issued before the shell's close, although the planner holds it for merging.
func TestRedirectionWrittenByChild(t *testing.T) {
	b := tracetest.New(t)
	fh := b.Create(1, "out")
	b.Ev(1, trace.OpFlush, "out", 2000, 0, func(e *trace.Event) { e.Handle = fh })
	b.At(2, b.Clock[1]+50000)
	b.Ev(2, trace.OpGetattr, "out", 3000, 1000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644 })
	const piece = 4096
	var off int64
	for i := 0; i < 20; i++ {
		b.RW(2, trace.OpWrite, "out", fh, off, piece, piece)
		off += piece
	}
	b.RW(2, trace.OpWrite, "out", fh, off, 1000, 1000) // the tail, held for merging
	off += 1000
	b.Ev(2, trace.OpFlush, "out", 2000, 0, func(e *trace.Event) { e.Handle = fh })
	b.At(1, b.Clock[2]+20000) // within the fold window: nothing expires the held write
	b.Close(1, "out", fh)
	b.At(3, b.Clock[1]+20000)
	fr := b.Open(3, "out", unix.O_RDONLY)
	b.RW(3, trace.OpRead, "out", fr, 0, 1<<20, off)
	b.Close(3, "out", fr)
	data := b.Bytes()
	for _, timing := range []Timing{TimingAFAP, TimingThink} {
		t.Run(timing.String(), func(t *testing.T) {
			root, d := target(t, "")
			sum := replayOnto(t, data, d, nil, Options{Timing: timing})
			if sum.Divergences != 0 {
				t.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
			}
			if fi, err := os.Stat(filepath.Join(root, "out")); err != nil || fi.Size() != off {
				t.Fatalf("out: %v %v, want %d bytes", fi, err, off)
			}
		})
	}
}

// noCopy hides a backend's RangeCopier: replay must copy with ReadAt and WriteAt.
type noCopy struct{ Backend }

type plainFile struct{ File }

func (n noCopy) Open(ctx context.Context, name string, flags int, perm uint32) (File, error) {
	f, err := n.Backend.Open(ctx, name, flags, perm)
	if err != nil {
		return nil, err
	}
	return plainFile{f}, nil
}

// TestCopyFileRange: `cp src dst` with GNU cp, which copies with copy_file_range; the
// source either made by the job or there before it (starting state).
func TestCopyFileRange(t *testing.T) {
	const size = 300000
	build := func(t *testing.T, preexisting bool) []byte {
		b := tracetest.New(t)
		if !preexisting {
			fw := b.Create(1, "src")
			for off := int64(0); off < size; off += 100000 {
				b.RW(1, trace.OpWrite, "src", fw, off, 100000, 100000)
			}
			b.Close(1, "src", fw)
		}
		b.At(2, b.Clock[1]+100000)
		b.Ev(2, trace.OpLookup, "src", 3000, 1000, func(e *trace.Event) { e.Mode, e.Ret = unix.S_IFREG|0o644, size })
		b.FH++
		in := b.FH
		b.Ev(2, trace.OpOpen, "src", 5000, 1000, func(e *trace.Event) { e.Handle, e.Flags = in, unix.O_RDONLY })
		out := b.Create(2, "dst")
		b.Ev(2, trace.OpIoctl, "dst", 2000, 1000, func(e *trace.Event) { e.Handle, e.Errno = out, uint16(syscall.EOPNOTSUPP) }) // FICLONE
		b.Ev(2, trace.OpCopyFileRange, "src", 200000, 1000, func(e *trace.Event) {
			e.Path2, e.Handle, e.Handle2, e.Size, e.Ret = b.Path("dst"), in, out, 1<<30, size
		})
		b.Ev(2, trace.OpCopyFileRange, "src", 2000, 1000, func(e *trace.Event) { // cp's last call: end of file
			e.Path2, e.Handle, e.Handle2, e.Offset, e.Offset2, e.Size, e.Ret = b.Path("dst"), in, out, size, size, 1<<30, 0
		})
		b.Close(2, "dst", out)
		b.Close(2, "src", in)
		b.At(3, b.Clock[2]+100000)
		fr := b.Open(3, "dst", unix.O_RDONLY)
		b.RW(3, trace.OpRead, "dst", fr, 0, 1<<20, size)
		b.Close(3, "dst", fr)
		return b.Bytes()
	}
	type backendFn func(d *Dir) Backend
	var copies atomic.Int32
	for _, tc := range []struct {
		name        string
		preexisting bool
		backend     backendFn
	}{
		{"copy_file_range", false, func(d *Dir) Backend { return d }},
		{"source in the starting state", true, func(d *Dir) Backend { return d }},
		{"decorated backend", false, func(d *Dir) Backend {
			return Decorate(d, func(ctx context.Context, c Call, next func(context.Context) error) error {
				if c.Method == "File.CopyRange" {
					copies.Add(1)
				}
				return next(ctx)
			})
		}},
		{"backend without copy: read and write", false, func(d *Dir) Backend { return noCopy{d} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := build(t, tc.preexisting)
			root, d := target(t, "")
			sum := replayOnto(t, data, tc.backend(d), nil, Options{Timing: TimingAFAP})
			if sum.Divergences != 0 {
				t.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
			}
			for _, o := range sum.Ops {
				if o.Op == trace.OpCopyFileRange && (o.Replayed != 2 || o.Skipped != 0) {
					t.Errorf("copy_file_range replayed %d, skipped %d; want 2, 0", o.Replayed, o.Skipped)
				}
			}
			if sum.ReplayedRead != sum.RecordedRead || sum.ReplayedWrite != sum.RecordedWrite {
				t.Errorf("bytes read %d of %d, written %d of %d", sum.ReplayedRead, sum.RecordedRead, sum.ReplayedWrite, sum.RecordedWrite)
			}
			if fi, err := os.Stat(filepath.Join(root, "dst")); err != nil || fi.Size() != size {
				t.Fatalf("dst: %v %v, want %d bytes", fi, err, size)
			}
		})
	}
	if copies.Load() != 2 {
		t.Errorf("the decorated backend's File.CopyRange ran %d times, want 2", copies.Load())
	}
}

// TestNameRecreatedByAnotherThread: `rm -rf d && mkdir d`: rm's lookups of the missing
// name, held for folding, must be issued before mkdir (another process) creates it.
func TestNameRecreatedByAnotherThread(t *testing.T) {
	b := tracetest.New(t)
	b.Lookup(1, "d", syscall.ENOENT, 0, 0)
	b.Lookup(1, "d", syscall.ENOENT, 0, 0)
	b.At(2, b.Clock[1]+500000) // within the fold window of rm's lookups
	b.Lookup(2, "d", syscall.ENOENT, 0, 0)
	b.Ev(2, trace.OpMkdir, "d", 50000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	data := b.Bytes()
	for run := 0; run < 20; run++ {
		_, d := target(t, "")
		sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
		if sum.Divergences != 0 {
			t.Fatalf("run %d: %d divergences: %v", run, sum.Divergences, sum.Examples)
		}
	}
}

// xattrAnswer answers every Getxattr with one errno, as a storage with (ENODATA) or
// without (ENOTSUP, s3fs) extended attributes does.
type xattrAnswer struct {
	Backend
	errno syscall.Errno
}

func (x xattrAnswer) Getxattr(ctx context.Context, name, attr string, buf []byte) (int, error) {
	return 0, x.errno
}

// TestBackendDifferences: ENOTSUP or ENOSYS on one side only (the recorded storage or the
// target) is a difference of the backends, counted apart, not a divergence; another
// errno mismatch still diverges.
func TestBackendDifferences(t *testing.T) {
	for _, tc := range []struct {
		name             string
		recorded, target syscall.Errno
		unsupported      uint64
		diverged         uint64
	}{
		{"target without xattrs", syscall.ENODATA, syscall.ENOTSUP, 1, 0},
		{"recorded without xattrs", syscall.ENOTSUP, syscall.ENODATA, 1, 0},
		{"target without the call", syscall.ENODATA, syscall.ENOSYS, 1, 0},
		{"other errno", syscall.ENODATA, syscall.EACCES, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tracetest.New(t)
			fh := b.Create(1, "f")
			b.Close(1, "f", fh)
			b.Ev(1, trace.OpGetxattr, "f", 3000, 1000, func(e *trace.Event) { e.Size, e.Errno = 64, uint16(tc.recorded) })
			_, d := target(t, "")
			sum := replayOnto(t, b.Bytes(), xattrAnswer{d, tc.target}, nil, Options{Timing: TimingAFAP})
			if sum.BackendDifferences != tc.unsupported || sum.Divergences != tc.diverged {
				t.Errorf("backend differences %d, divergences %d; want %d, %d (%v %v)", sum.BackendDifferences,
					sum.Divergences, tc.unsupported, tc.diverged, sum.BackendExamples, sum.Examples)
			}
		})
	}
}

// TestCopyFileRangeOutputPosition: `cat a b > c` with GNU cat copies each input with
// copy_file_range at the output's file position. A version-2 trace records the output
// offsets (0, then the end of a); a version-1 trace has only the input offsets (0 both
// times), so the output offset comes from where the handle's last copy ended.
func TestCopyFileRangeOutputPosition(t *testing.T) {
	b := tracetest.New(t)
	sizes := map[string]int64{"a": 100000, "b": 50000}
	for _, n := range []string{"a", "b"} {
		fw := b.Create(1, n)
		b.RW(1, trace.OpWrite, n, fw, 0, uint32(sizes[n]), sizes[n])
		b.Close(1, n, fw)
	}
	b.At(2, b.Clock[1]+100000)
	out := b.Create(2, "c")
	var pos int64
	for _, n := range []string{"a", "b"} {
		in := b.Open(2, n, unix.O_RDONLY)
		b.Ev(2, trace.OpCopyFileRange, n, 50000, 1000, func(e *trace.Event) {
			e.Path2, e.Handle, e.Handle2, e.Offset2, e.Size, e.Ret = b.Path("c"), in, out, pos, 1<<30, sizes[n]
		})
		pos += sizes[n]
		b.Close(2, n, in)
	}
	b.Close(2, "c", out)
	data := b.Bytes()
	for _, tc := range []struct {
		name string
		open func() Source
	}{
		{"version 2", func() Source { return tracetest.Reader(t, data) }},
		{"version 1", func() Source { return asVersion1(tracetest.Reader(t, data)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, d := target(t, "")
			sum := replaySource(t, tc.open, d, nil, Options{Timing: TimingAFAP})
			if sum.Divergences != 0 {
				t.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
			}
			if fi, err := os.Stat(filepath.Join(root, "c")); err != nil || fi.Size() != 150000 {
				t.Fatalf("c: %v %v, want 150000 bytes", fi, err)
			}
		})
	}
}

// TestCopyFileRangeOutputOffset: a copy_file_range with an explicit output offset
// (copy_file_range(in, &off_in, out, &off_out, ...)) that is not where the output
// handle's last write ended. A version-2 trace records the offset and the copy lands
// there; the read of the copied range after it finds the bytes. The same trace read as
// version 1 copies to the handle's position instead.
func TestCopyFileRangeOutputOffset(t *testing.T) {
	const (
		asize      = 100000
		head       = 1000 // bytes written to c before the copy: its handle's position
		count      = 50000
		offIn      = 10000
		offOut     = 200000
		wantSize   = offOut + count
		wantSizeV1 = head + count
	)
	b := tracetest.New(t)
	fa := b.Create(1, "a")
	b.RW(1, trace.OpWrite, "a", fa, 0, asize, asize)
	b.Close(1, "a", fa)
	b.At(2, b.Clock[1]+100000)
	out := b.CreateFlags(2, "c", unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC)
	b.RW(2, trace.OpWrite, "c", out, 0, head, head)
	in := b.Open(2, "a", unix.O_RDONLY)
	b.Ev(2, trace.OpCopyFileRange, "a", 50000, 1000, func(e *trace.Event) {
		e.Path2, e.Handle, e.Handle2, e.Offset, e.Offset2, e.Size, e.Ret = b.Path("c"), in, out, offIn, offOut, count, count
	})
	b.Close(2, "a", in)
	b.RW(2, trace.OpRead, "c", out, offOut, 1<<20, count)
	b.Close(2, "c", out)
	data := b.Bytes()

	t.Run("plan", func(t *testing.T) {
		var copies int
		planEach(t, data, func(op *replayOp) {
			if op.Kind == fold.Copy {
				copies++
				if op.Offset != offIn || op.Offset2 != offOut || op.Size != count {
					t.Errorf("copy op offset %d, offset2 %d, size %d; want %d, %d, %d", op.Offset, op.Offset2, op.Size, offIn, offOut, count)
				}
			}
		})
		if copies != 1 {
			t.Errorf("%d copy ops, want 1", copies)
		}
	})
	t.Run("version 2", func(t *testing.T) {
		root, d := target(t, "")
		var rt bytes.Buffer
		sink, err := trace.NewWriter(&rt, trace.Header{Kind: "replay"}, trace.WriterOptions{})
		must(t, err)
		sum := replayOnto(t, data, d, sink, Options{Timing: TimingAFAP})
		must(t, sink.Close())
		if sum.Divergences != 0 {
			t.Fatalf("%d divergences: %v", sum.Divergences, sum.Examples)
		}
		c, err := os.ReadFile(filepath.Join(root, "c"))
		if err != nil || len(c) != wantSize {
			t.Fatalf("c: %d bytes, %v; want %d", len(c), err, wantSize)
		}
		a, err := os.ReadFile(filepath.Join(root, "a"))
		if err != nil || !bytes.Equal(c[offOut:], a[offIn:offIn+count]) {
			t.Errorf("c[%d:] is not a[%d:%d] (%v)", offOut, offIn, offIn+count, err)
		}
		var got []int64
		r := tracetest.Reader(t, rt.Bytes())
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			must(t, err)
			if e.Op == trace.OpCopyFileRange {
				got = append(got, e.Offset2)
			}
		}
		if len(got) != 1 || got[0] != offOut {
			t.Errorf("replay trace copy_file_range output offsets %v, want [%d]", got, offOut)
		}
	})
	t.Run("version 1", func(t *testing.T) {
		root, d := target(t, "")
		sum := replaySource(t, func() Source { return asVersion1(tracetest.Reader(t, data)) }, d, nil, Options{Timing: TimingAFAP})
		if fi, err := os.Stat(filepath.Join(root, "c")); err != nil || fi.Size() != wantSizeV1 {
			t.Fatalf("c: %v %v, want %d bytes", fi, err, wantSizeV1)
		}
		if sum.Divergences == 0 {
			t.Error("the read of the copied range at its recorded offset did not diverge")
		}
	})
}
