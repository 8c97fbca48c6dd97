// Package tracetest builds synthetic traces in memory for tests: FUSE requests with the
// lookups, flushes and releases the kernel adds around them, written with trace.Writer as
// the recording layer writes them.
package tracetest

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/iotap/iotap/trace"
	"golang.org/x/sys/unix"
)

// Builder builds a synthetic trace in memory with trace.Writer, the way the recording layer
// would: FUSE requests with their kernel-generated lookups, flushes and releases.
type Builder struct {
	t     testing.TB
	buf   bytes.Buffer
	W     *trace.Writer
	ids   map[string]uint32
	Clock map[uint32]int64
	FH    uint64
	procs map[uint32]bool
}

// New starts a trace recorded on an ext4 directory /traced.
func New(t testing.TB) *Builder {
	return NewWithHeader(t, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: "ext4"}})
}

// NewFUSE builds a trace that says it was recorded through the FUSE layer (cache=none).
func NewFUSE(t testing.TB) *Builder {
	return NewWithHeader(t, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: "ext4"},
		FUSE: trace.FUSEOptions{Cache: "none"}})
}

// NewWithHeader starts a trace with header h.
func NewWithHeader(t testing.TB, h trace.Header) *Builder {
	b := &Builder{t: t, ids: map[string]uint32{"": trace.RootPath}, Clock: map[uint32]int64{}, procs: map[uint32]bool{}}
	w, err := trace.NewWriter(&b.buf, h, trace.WriterOptions{BufferEvents: 1 << 20, ChunkEvents: 4096})
	if err != nil {
		t.Fatal(err)
	}
	b.W = w
	return b
}

// Path returns the path id of name, adding it (and its parents) to the trace's path table.
func (b *Builder) Path(name string) uint32 {
	if id, ok := b.ids[name]; ok {
		return id
	}
	dir, base := "", name
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir, base = name[:i], name[i+1:]
	}
	id := b.W.Path(b.Path(dir), base)
	b.ids[name] = id
	return id
}

// AddProcess adds the process record of a thread (its pid, parent and comm); a thread
// without one gets pid 100, comm "job" at its first event.
func (b *Builder) AddProcess(p trace.Process) {
	b.procs[p.Tid] = true
	b.W.AddProcess(p)
}

// Ev appends an event starting at the builder's clock and advances the clock by dur plus
// gap.
func (b *Builder) Ev(tid uint32, op trace.Op, name string, dur, gap int64, mod func(e *trace.Event)) *Builder {
	if !b.procs[tid] {
		b.procs[tid] = true
		b.W.AddProcess(trace.Process{Tid: tid, Pid: 100, Comm: "job"})
	}
	if b.Clock[tid] == 0 {
		b.Clock[tid] = 1e9
	}
	e := trace.Event{Start: b.Clock[tid], Dur: dur, Op: op, Tid: tid, Pid: 100}
	if name != "-" {
		e.Path = b.Path(name)
	}
	if mod != nil {
		mod(&e)
	}
	b.W.Append(&e)
	b.Clock[tid] += dur + gap
	return b
}

// Lookup appends a LOOKUP of name with its outcome: an errno, or the mode and size found.
func (b *Builder) Lookup(tid uint32, name string, errno syscall.Errno, mode uint32, size int64) *Builder {
	return b.Ev(tid, trace.OpLookup, name, 3000, 1000, func(e *trace.Event) {
		e.Errno, e.Mode, e.Ret = uint16(errno), mode, size
	})
}

// Walk adds the lookups of each component of name, as the kernel does with a 0 s entry
// timeout.
func (b *Builder) Walk(tid uint32, name string, last syscall.Errno, mode uint32, size int64) *Builder {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		b.Lookup(tid, strings.Join(parts[:i], "/"), 0, unix.S_IFDIR|0o755, 4096)
	}
	return b.Lookup(tid, name, last, mode, size)
}

// Open returns a new handle after the path walk and the OPEN of name.
func (b *Builder) Open(tid uint32, name string, flags uint32) uint64 {
	b.Walk(tid, name, 0, unix.S_IFREG|0o644, 0)
	b.FH++
	fh := b.FH
	b.Ev(tid, trace.OpOpen, name, 5000, 2000, func(e *trace.Event) { e.Handle, e.Flags = fh, flags })
	return fh
}

// Create is CreateFlags with O_WRONLY|O_CREAT|O_TRUNC.
func (b *Builder) Create(tid uint32, name string) uint64 {
	return b.CreateFlags(tid, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC)
}

// CreateFlags returns a new handle after the path walk (ENOENT) and the CREATE of name.
func (b *Builder) CreateFlags(tid uint32, name string, flags uint32) uint64 {
	b.Walk(tid, name, syscall.ENOENT, 0, 0)
	b.FH++
	fh := b.FH
	b.Ev(tid, trace.OpCreate, name, 8000, 2000, func(e *trace.Event) {
		e.Handle, e.Flags, e.Mode = fh, flags, unix.S_IFREG|0o644
	})
	return fh
}

// RW appends a read or write (op) of size bytes at off on handle fh that returned ret.
func (b *Builder) RW(tid uint32, op trace.Op, name string, fh uint64, off int64, size uint32, ret int64) *Builder {
	return b.Ev(tid, op, name, 10000, 1000, func(e *trace.Event) {
		e.Handle, e.Offset, e.Size, e.Ret = fh, off, size, ret
	})
}

// Close appends the FLUSH and RELEASE of handle fh.
func (b *Builder) Close(tid uint32, name string, fh uint64) *Builder {
	b.Ev(tid, trace.OpFlush, name, 2000, 500, func(e *trace.Event) { e.Handle = fh })
	return b.Ev(tid, trace.OpRelease, name, 1000, 1000, func(e *trace.Event) { e.Handle = fh })
}

// At sets thread tid's clock (ns since the trace origin).
func (b *Builder) At(tid uint32, t int64) *Builder {
	b.Clock[tid] = t
	return b
}

// Bytes closes the writer and returns the trace.
func (b *Builder) Bytes() []byte {
	if b.W != nil {
		if err := b.W.Close(); err != nil {
			b.t.Fatal(err)
		}
		b.W = nil
	}
	return b.buf.Bytes()
}

// Reader opens a trace held in data.
func Reader(t testing.TB, data []byte) *trace.Reader {
	r, err := trace.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Workload writes a realistic FUSE-level trace: an archive extraction (tar), a
// database with a journal (sqlite-like), and a reader thread that lists and stats what
// the others made, over input files that existed before the trace began.
func Workload(b *Builder, nfiles int) {
	const tar, db, ls = 10, 11, 12
	// Pre-existing input: the layer saw it through a lookup (File record) ...
	b.W.AddFile(trace.File{Path: b.Path("in/archive.tar"), Type: trace.TypeFile, Mode: 0o644, Size: 3 * mib})
	b.W.AddFile(trace.File{Path: b.Path("in"), Type: trace.TypeDir, Mode: 0o755})
	// ... and a config file only ops refer to (no File record).
	b.At(tar, 1e9)
	fh := b.Open(tar, "in/archive.tar", unix.O_RDONLY)
	b.Ev(tar, trace.OpGetattr, "in/archive.tar", 2000, 1000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o644; e.Ret = 3 * mib })
	for i := int64(0); i < 3; i++ { // 1 MiB reads into an unaligned buffer: 1048560 + 16
		b.RW(tar, trace.OpRead, "in/archive.tar", fh, i*mib, mib-16, mib-16)
		b.RW(tar, trace.OpRead, "in/archive.tar", fh, (i+1)*mib-16, 16, 16)
	}
	b.RW(tar, trace.OpRead, "in/archive.tar", fh, 3*mib, mib, 0) // EOF
	b.Walk(tar, "out", syscall.ENOENT, 0, 0)
	b.Ev(tar, trace.OpMkdir, "out", 20000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	for i := 0; i < nfiles; i++ {
		dir := fmt.Sprintf("out/d%d", i%4)
		if i < 4 {
			b.Walk(tar, dir, syscall.ENOENT, 0, 0)
			b.Ev(tar, trace.OpMkdir, dir, 20000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
		}
		name := fmt.Sprintf("%s/f%d", dir, i)
		w := b.Create(tar, name)
		b.RW(tar, trace.OpWrite, name, w, 0, mib-16, mib-16)
		b.RW(tar, trace.OpWrite, name, w, mib-16, 16, 16)
		b.RW(tar, trace.OpWrite, name, w, mib, 1000, 1000)
		b.Close(tar, name, w)
		b.Walk(tar, name, 0, unix.S_IFREG|0o644, mib+1000)
		b.Ev(tar, trace.OpSetattr, name, 4000, 1000, func(e *trace.Event) { e.Flags = trace.SetattrMode; e.Mode = 0o640 })
		b.Lookup(tar, name, 0, unix.S_IFREG|0o640, mib+1000)
		b.Ev(tar, trace.OpSetattr, name, 4000, 1000, func(e *trace.Event) { e.Flags = trace.SetattrAtime | trace.SetattrMtime })
	}
	b.Walk(tar, "out/link", syscall.ENOENT, 0, 0)
	b.Ev(tar, trace.OpSymlink, "out/link", 9000, 1000, func(e *trace.Event) { e.Path2 = b.W.Raw("d0/f0") })
	b.Close(tar, "in/archive.tar", fh)
	tarEnd := b.Clock[tar]

	// The database thread, concurrently.
	b.At(db, 1e9+50000)
	d := b.CreateFlags(db, "app.db", unix.O_RDWR|unix.O_CREAT)
	for p := int64(0); p < 16; p++ {
		b.RW(db, trace.OpWrite, "app.db", d, p*4096, 4096, 4096)
	}
	b.Ev(db, trace.OpFsync, "app.db", 50000, 1000, func(e *trace.Event) { e.Handle = d })
	j := b.Create(db, "app.db-journal")
	b.RW(db, trace.OpWrite, "app.db-journal", j, 0, 512, 512)
	b.Ev(db, trace.OpFsync, "app.db-journal", 50000, 1000, func(e *trace.Event) { e.Handle = j; e.Flags = trace.FsyncDatasync })
	for p := int64(0); p < 16; p += 3 {
		b.RW(db, trace.OpRead, "app.db", d, p*4096, 4096, 4096)
	}
	b.Ev(db, trace.OpSetattr, "app.db", 4000, 1000, func(e *trace.Event) { e.Flags = trace.SetattrSize; e.Offset = 8 * 4096 })
	b.Close(db, "app.db-journal", j)
	b.Walk(db, "app.db-journal", 0, unix.S_IFREG|0o644, 512)
	b.Ev(db, trace.OpUnlink, "app.db-journal", 9000, 1000, nil)
	b.Ev(db, trace.OpGetxattr, "app.db", 2000, 1000, func(e *trace.Event) { e.Size = 64; e.Errno = uint16(syscall.ENODATA) })
	b.Lookup(db, "app.db-wal", syscall.ENOENT, 0, 0) // stat of a missing file
	b.Walk(db, "app.tmp", syscall.ENOENT, 0, 0)
	t := b.Create(db, "app.tmp")
	b.RW(db, trace.OpWrite, "app.tmp", t, 0, 100, 100)
	// The kernel sends the release of the handle from no thread (tid 0).
	b.Ev(db, trace.OpFlush, "app.tmp", 2000, 500, func(e *trace.Event) { e.Handle = t })
	b.Ev(0, trace.OpRelease, "app.tmp", 1000, 0, func(e *trace.Event) { e.Handle = t; e.Start = b.Clock[db]; e.Tid, e.Pid = 0, 0 })
	b.Walk(db, "app.tmp", 0, unix.S_IFREG|0o644, 100)
	b.Lookup(db, "app.final", syscall.ENOENT, 0, 0)
	b.Ev(db, trace.OpRename, "app.tmp", 9000, 1000, func(e *trace.Event) { e.Path2 = b.Path("app.final") })
	b.Close(db, "app.db", d)

	// The lister, after tar is done.
	b.At(ls, tarEnd+100000)
	b.Walk(ls, "out", 0, unix.S_IFDIR|0o755, 4096)
	b.Ev(ls, trace.OpOpendir, "out", 3000, 1000, func(e *trace.Event) { e.Handle = 9000 })
	b.Ev(ls, trace.OpReaddir, "out", 5000, 1000, func(e *trace.Event) { e.Handle = 9000; e.Size = 4096; e.Ret = 200 })
	b.Ev(ls, trace.OpReaddir, "out", 2000, 1000, func(e *trace.Event) { e.Handle = 9000; e.Offset = 6; e.Size = 4096 })
	b.Ev(ls, trace.OpReleasedir, "out", 1000, 1000, func(e *trace.Event) { e.Handle = 9000 })
	for i := 0; i < nfiles; i++ {
		name := fmt.Sprintf("out/d%d/f%d", i%4, i)
		b.Walk(ls, name, 0, unix.S_IFREG|0o640, mib+1000)
		b.Ev(ls, trace.OpGetattr, name, 2000, 1000, func(e *trace.Event) { e.Mode = unix.S_IFREG | 0o640; e.Ret = mib + 1000 })
	}
	b.Walk(ls, "out/link", 0, unix.S_IFLNK|0o777, 5)
	b.Ev(ls, trace.OpReadlink, "out/link", 2000, 1000, func(e *trace.Event) { e.Size = 4096; e.Ret = 5 })
	b.Ev(ls, trace.OpStatfs, "", 2000, 1000, nil)
	b.Walk(ls, "etc/app.conf", 0, unix.S_IFREG|0o644, 300) // pre-existing, never a File record
	c := b.FH + 1
	b.FH++
	b.Ev(ls, trace.OpOpen, "etc/app.conf", 3000, 1000, func(e *trace.Event) { e.Handle = c; e.Flags = unix.O_RDONLY })
	b.RW(ls, trace.OpRead, "etc/app.conf", c, 0, 4096, 300)
	b.Close(ls, "etc/app.conf", c)
	b.Walk(ls, "missing/file", syscall.ENOENT, 0, 0)
	b.Ev(ls, trace.OpForget, "-", 100, 0, nil)
}

const mib = 1 << 20
