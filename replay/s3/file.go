package s3

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"sync"
	"syscall"

	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// file is an open file or directory of the S3 backend. What a handle holds depends on
// the profile that opened it: a prefetch window (mountpoint), the ranges already read or
// a local copy (s3fs), or a streamed upload (mountpoint and sdk).
type file struct {
	b    *Backend
	name string
	key  string

	mu sync.Mutex // guards everything below: a handle may be shared by several workers

	dir   bool
	write bool // opened for writing
	read  bool // may be read
	size  int64
	done  bool // the streamed upload completed; further writes fail

	// directories
	ents   []dirent
	pos    int
	listed bool

	// mountpoint reads: the window fetched (its data held by held), the one being
	// fetched, the next one's size
	cur   span
	held  *fetch
	ahead *fetch
	next  int64

	// s3fs reads of an unmodified object: byte ranges already fetched, sorted, disjoint
	loaded []span

	// s3fs writes: the local copy
	tmp   *os.File
	dirty bool

	// mountpoint and sdk writes: a streamed upload
	up *upload
}

// span is the byte range [start, end).
type span struct{ start, end int64 }

const accMode = syscall.O_ACCMODE

// Open implements replay.Backend.
func (b *Backend) Open(ctx context.Context, name string, flags int, perm uint32) (f replay.File, err error) {
	ctx, end := b.begin(ctx, "open")
	defer func() { end(err) }()
	if err = replay.CheckName(name); err != nil {
		return nil, err
	}
	e, lerr := b.lookup(ctx, name)
	exists := lerr == nil
	if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
		return nil, lerr
	}
	if exists && flags&syscall.O_CREAT != 0 && flags&syscall.O_EXCL != 0 {
		return nil, syscall.EEXIST
	}
	if !exists && flags&syscall.O_CREAT == 0 {
		return nil, lerr
	}
	if !exists {
		if err := b.checkParent(ctx, name); err != nil {
			return nil, err
		}
	}
	if exists && e.isDir() {
		if flags&accMode != syscall.O_RDONLY {
			return nil, syscall.EISDIR
		}
		return &file{b: b, name: name, key: b.dirKey(name), dir: true, read: true}, nil
	}
	if flags&syscall.O_DIRECTORY != 0 {
		return nil, syscall.ENOTDIR
	}
	h := &file{b: b, name: name, key: b.key(name), size: e.size, read: flags&accMode != syscall.O_WRONLY}
	if h, err = b.prof.open(ctx, h, e, exists, flags); err != nil {
		return nil, err
	}
	return h, nil
}

// startStream makes h a handle that uploads what is written to it, sequentially (see
// upload), and shows the file (at the size written so far) until the upload completes.
func (b *Backend) startStream(h *file, partSize, singlePut int64, concurrency int) *file {
	h.write, h.size = true, 0
	h.up = &upload{b: b, key: h.key, partSize: partSize, singlePut: singlePut, concurrency: concurrency}
	b.mu.Lock()
	b.pending[h.name] = 0
	b.mu.Unlock()
	return h
}

// ReadAt implements replay.File.
func (f *file) ReadAt(ctx context.Context, p []byte, off int64) (n int, err error) {
	ctx, end := f.b.begin(ctx, "read")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir {
		return 0, syscall.EISDIR
	}
	if f.up != nil {
		return 0, f.b.refuse("read", syscall.EBADF, "a file being uploaded cannot be read")
	}
	if !f.read {
		return 0, syscall.EBADF
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	if f.tmp != nil {
		n, err = f.tmp.ReadAt(p, off)
		if err == io.EOF {
			err = nil
		}
		return n, err
	}
	if off >= f.size || len(p) == 0 {
		return 0, nil
	}
	return f.b.prof.read(ctx, f, p, off, min(off+int64(len(p)), f.size))
}

// WriteAt implements replay.File.
func (f *file) WriteAt(ctx context.Context, p []byte, off int64) (n int, err error) {
	ctx, end := f.b.begin(ctx, "write")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir || !f.write || f.done {
		return 0, syscall.EBADF
	}
	if f.tmp != nil {
		n, err = f.tmp.WriteAt(p, off)
		if n > 0 {
			f.dirty = true
			f.size = max(f.size, off+int64(n))
		}
		return n, err
	}
	if off != f.size {
		return 0, f.b.refuse("write", syscall.EINVAL, fmt.Sprintf("out-of-order write at %d, next sequential offset %d", off, f.size))
	}
	if err := f.up.write(ctx, p); err != nil {
		return 0, err
	}
	f.size += int64(len(p))
	f.b.mu.Lock()
	f.b.pending[f.name] = f.size
	f.b.mu.Unlock()
	return len(p), nil
}

// ReadDir implements replay.File.
func (f *file) ReadDir(ctx context.Context, buf []byte, off int64) (n int, err error) {
	ctx, end := f.b.begin(ctx, "readdir")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dir {
		return 0, syscall.ENOTDIR
	}
	if off == 0 || !f.listed {
		if err := f.list(ctx); err != nil {
			return 0, err
		}
	}
	for f.pos < len(f.ents) {
		e := f.ents[f.pos]
		rec := (19 + len(e.name) + 1 + 7) &^ 7
		if n+rec > len(buf) {
			if n == 0 {
				return 0, syscall.EINVAL
			}
			break
		}
		typ := byte(syscall.DT_REG)
		if e.dir {
			typ = syscall.DT_DIR
		}
		b := buf[n : n+rec]
		clear(b)
		binary.LittleEndian.PutUint64(b[0:], uint64(f.pos+1))
		binary.LittleEndian.PutUint64(b[8:], uint64(f.pos+1))
		binary.LittleEndian.PutUint16(b[16:], uint16(rec))
		b[18] = typ
		copy(b[19:], e.name)
		n += rec
		f.pos++
	}
	return n, nil
}

// list fetches the directory's entries: the listing, the directories held locally and
// the files being written below it, then what the profile's client requests per entry.
func (f *file) list(ctx context.Context) error {
	b := f.b
	ents, err := b.listDir(ctx, f.key)
	if err != nil {
		return err
	}
	b.mu.Lock()
	seen := map[string]bool{}
	for _, e := range ents {
		seen[e.name] = true
	}
	for k := range b.localDirs {
		if p, base := fold.SplitName(k); p == f.name && k != f.name && !seen[base] {
			ents = append(ents, dirent{name: base, dir: true})
			seen[base] = true
		}
	}
	for k := range b.pending {
		if p, base := fold.SplitName(k); p == f.name && !seen[base] {
			ents = append(ents, dirent{name: base})
		}
	}
	b.mu.Unlock()
	b.prof.readdir(ctx, f, ents)
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	f.ents = append([]dirent{{name: ".", dir: true}, {name: "..", dir: true}}, ents...)
	f.pos, f.listed = 0, true
	return nil
}

// Sync implements replay.File.
func (f *file) Sync(ctx context.Context, datasync bool) (err error) {
	ctx, end := f.b.begin(ctx, "fsync")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.prof.fsync(ctx, f)
}

// Truncate implements replay.File.
func (f *file) Truncate(ctx context.Context, size int64) (err error) {
	_, end := f.b.begin(ctx, "ftruncate")
	defer func() { end(err) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tmp != nil {
		if err := f.tmp.Truncate(size); err != nil {
			return err
		}
		f.size, f.dirty = size, true
		return nil
	}
	if !f.write {
		return syscall.EBADF
	}
	if size == f.size {
		return nil
	}
	return f.b.prof.resize()
}

// Stat implements replay.File: answered from the handle, no request.
func (f *file) Stat(ctx context.Context) (a replay.Attr, err error) {
	_, end := f.b.begin(ctx, "fstat")
	defer func() { end(nil) }()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dir {
		return replay.Attr{Mode: syscall.S_IFDIR | 0o755}, nil
	}
	return replay.Attr{Mode: syscall.S_IFREG | 0o644, Size: f.size}, nil
}

// Allocate implements replay.File.
func (f *file) Allocate(ctx context.Context, mode uint32, off, length int64) (err error) {
	_, end := f.b.begin(ctx, "fallocate")
	defer func() { end(err) }()
	return f.b.refuse("fallocate", syscall.EOPNOTSUPP, "no preallocation")
}

// Seek implements replay.File.
func (f *file) Seek(ctx context.Context, off int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch whence {
	case io.SeekStart, io.SeekCurrent:
		return off, nil
	case io.SeekEnd:
		return f.size + off, nil
	case trace.SeekData:
		if off >= f.size {
			return 0, syscall.ENXIO
		}
		return off, nil
	case trace.SeekHole:
		if off >= f.size {
			return 0, syscall.ENXIO
		}
		return f.size, nil
	}
	return 0, syscall.EINVAL
}

// Lock implements replay.File: FUSE clients leave POSIX locks to the kernel, which keeps
// them locally (conflicting between open files); no request.
func (f *file) Lock(ctx context.Context, cmd replay.LockCmd, typ int16, start, length int64) (err error) {
	ctx, end := f.b.begin(ctx, "lock")
	defer func() { end(err) }()
	return f.b.locks.lock(ctx, f, cmd, typ, start, length)
}

// Close implements replay.File.
func (f *file) Close(ctx context.Context) (err error) {
	ctx, end := f.b.begin(ctx, "close")
	defer func() { end(err) }()
	f.b.locks.dropAll(f)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.b.prof.release(ctx, f)
}

// finishUpload completes f's streamed upload, if it has one still open (f.mu held).
func (f *file) finishUpload(ctx context.Context) error {
	if f.up == nil || f.done {
		return nil
	}
	f.done = true
	err := f.up.finish(ctx)
	f.b.mu.Lock()
	delete(f.b.pending, f.name)
	f.b.mu.Unlock()
	return err
}
