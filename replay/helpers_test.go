package replay

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// tb builds a synthetic trace in memory with trace.Writer, the way the recording layer
// would: FUSE requests with their kernel-generated lookups, flushes and releases.
type tb struct {
	t     testing.TB
	buf   bytes.Buffer
	w     *trace.Writer
	ids   map[string]uint32
	clock map[uint32]int64
	fh    uint64
	procs map[uint32]bool
}

func newTB(t testing.TB) *tb {
	return newTBHeader(t, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: "ext4"}})
}

// newTBFUSE builds a trace that says it was recorded through the FUSE layer (cache=none).
func newTBFUSE(t testing.TB) *tb {
	return newTBHeader(t, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: "ext4"},
		FUSE: trace.FUSEOptions{Cache: "none"}})
}

func newTBHeader(t testing.TB, h trace.Header) *tb {
	b := &tb{t: t, ids: map[string]uint32{"": trace.RootPath}, clock: map[uint32]int64{}, procs: map[uint32]bool{}}
	w, err := trace.NewWriter(&b.buf, h, trace.WriterOptions{BufferEvents: 1 << 20, ChunkEvents: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b.w = w
	return b
}

func (b *tb) path(name string) uint32 {
	if id, ok := b.ids[name]; ok {
		return id
	}
	dir, base := splitName(name)
	id := b.w.Path(b.path(dir), base)
	b.ids[name] = id
	return id
}

// ev appends an event starting at the builder's clock and advances the clock by dur plus
// gap.
func (b *tb) ev(tid uint32, op trace.Op, name string, dur, gap int64, mod func(e *trace.Event)) *tb {
	if !b.procs[tid] {
		b.procs[tid] = true
		b.w.AddProcess(trace.Process{Tid: tid, Pid: 100, Comm: "job"})
	}
	if b.clock[tid] == 0 {
		b.clock[tid] = 1e9
	}
	e := trace.Event{Start: b.clock[tid], Dur: dur, Op: op, Tid: tid, Pid: 100}
	if name != "-" {
		e.Path = b.path(name)
	}
	if mod != nil {
		mod(&e)
	}
	b.w.Append(&e)
	b.clock[tid] += dur + gap
	return b
}

func (b *tb) lookup(tid uint32, name string, errno syscall.Errno, mode uint32, size int64) *tb {
	return b.ev(tid, trace.OpLookup, name, 3000, 1000, func(e *trace.Event) {
		e.Errno, e.Mode, e.Ret = uint16(errno), mode, size
	})
}

// walk adds the lookups of each component of name, as the kernel does with a 0 s entry
// timeout.
func (b *tb) walk(tid uint32, name string, last syscall.Errno, mode uint32, size int64) *tb {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		b.lookup(tid, strings.Join(parts[:i], "/"), 0, unix.S_IFDIR|0o755, 4096)
	}
	return b.lookup(tid, name, last, mode, size)
}

// open returns a new handle after walk + open.
func (b *tb) open(tid uint32, name string, flags uint32) uint64 {
	b.walk(tid, name, 0, unix.S_IFREG|0o644, 0)
	b.fh++
	fh := b.fh
	b.ev(tid, trace.OpOpen, name, 5000, 2000, func(e *trace.Event) { e.Handle, e.Flags = fh, flags })
	return fh
}

func (b *tb) create(tid uint32, name string) uint64 {
	return b.createFlags(tid, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)
}

func (b *tb) createFlags(tid uint32, name string, flags uint32) uint64 {
	b.walk(tid, name, syscall.ENOENT, 0, 0)
	b.fh++
	fh := b.fh
	b.ev(tid, trace.OpCreate, name, 8000, 2000, func(e *trace.Event) {
		e.Handle, e.Flags, e.Mode = fh, flags, unix.S_IFREG|0o644
	})
	return fh
}

func (b *tb) rw(tid uint32, op trace.Op, name string, fh uint64, off int64, size uint32, ret int64) *tb {
	return b.ev(tid, op, name, 10000, 1000, func(e *trace.Event) {
		e.Handle, e.Offset, e.Size, e.Ret = fh, off, size, ret
	})
}

func (b *tb) close(tid uint32, name string, fh uint64) *tb {
	b.ev(tid, trace.OpFlush, name, 2000, 500, func(e *trace.Event) { e.Handle = fh })
	return b.ev(tid, trace.OpRelease, name, 1000, 1000, func(e *trace.Event) { e.Handle = fh })
}

// at sets thread tid's clock (ns since the trace origin).
func (b *tb) at(tid uint32, t int64) *tb {
	b.clock[tid] = t
	return b
}

// reader closes the writer and opens the trace for reading.
func (b *tb) bytes() []byte {
	if b.w != nil {
		if err := b.w.Close(); err != nil {
			b.t.Fatal(err)
		}
		b.w = nil
	}
	return b.buf.Bytes()
}

func readerOf(t testing.TB, data []byte) *trace.Reader {
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// target returns an empty directory and its backend.
func target(t testing.TB, base string) (string, *Dir) {
	dir := t.TempDir()
	if base != "" {
		d, err := os.MkdirTemp(base, "iotap-replay-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		dir = d
	}
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return root, d
}

// replayOnto derives the starting state, prepares it on b, and replays.
func replayOnto(t testing.TB, data []byte, b Backend, sink Sink, o Options) *Summary {
	t.Helper()
	return replaySource(t, func() Source { return readerOf(t, data) }, b, sink, o)
}

// replaySource is replayOnto for a trace that open returns (twice: to derive the
// starting state, and to replay).
func replaySource(t testing.TB, open func() Source, b Backend, sink Sink, o Options) *Summary {
	t.Helper()
	st, err := DeriveState(open(), o.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := Prepare(context.Background(), b, st, o.FillRandom); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), open(), b, sink, o)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// version1 reads a trace as a format-version-1 file of the same events reads: the
// header says version 1 and no event has an Offset2 (copy_file_range's output offset).
type version1 struct {
	*trace.Reader
	h trace.Header
}

func asVersion1(r *trace.Reader) *version1 {
	v := &version1{Reader: r, h: *r.Header()}
	v.h.Version = trace.Version1
	return v
}

func (v *version1) Header() *trace.Header { return &v.h }

func (v *version1) Next() (*trace.Event, error) {
	e, err := v.Reader.Next()
	if e != nil {
		e.Offset2 = 0
	}
	return e, err
}
