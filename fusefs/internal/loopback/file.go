package loopback

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/internal/servicetime"
)

// file is an open backend file. Reads and writes use the descriptor directly; the other
// operations delegate to the go-fuse LoopbackFile that owns (and closes) the descriptor.
// It deliberately does not implement fs.FilePassthroughFder.
type file struct {
	lf           *fs.LoopbackFile
	fd           int
	flags        uint32             // open flags as passed to the backend
	serviceTimes *servicetime.Table // nil when untraced
	locks        *lockTable         // the mount's lock owners (nil in unit tests)
	ino          uint64             // the inode's number in the mount (the lock table's key)
	locked       atomic.Bool        // an owner's first lock came through this handle
	flocked      atomic.Bool        // the handle holds a flock(2) lock
	flushedAt    atomic.Int64       // unix ns of the last FLUSH, when the handle holds locks
	releasing    *releasing         // the mount's closes in progress (nil in unit tests)
	flushPending atomic.Bool        // flushed, and counted so in releasing, until its RELEASE
}

// asFile returns the open file of a handle this package made (a file, or a file the
// kernel may pass through).
func asFile(fh fs.FileHandle) (*file, bool) {
	switch f := fh.(type) {
	case *file:
		return f, true
	case *ptFile:
		return f.file, true
	}
	return nil, false
}

func newFile(fd int, flags uint32) *file {
	return &file{lf: fs.NewLoopbackFile(fd).(*fs.LoopbackFile), fd: fd, flags: flags}
}

var _ fs.FileReader = (*file)(nil)

// Read preads into the kernel's buffer before returning, so the request's time includes the
// backend I/O (the loopback's deferred ReadResultFd would do it after the handler returns).
func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	t0 := f.serviceTimes.Clock()
	n, err := preadFull(f.fd, dest, off)
	f.serviceTimes.Measured(ctx, t0)
	if err != nil {
		return nil, errnoOf(err)
	}
	r := resultPool.Get().(*dataResult)
	r.vec[0] = dest[:n]
	return r, 0
}

// dataResult is a read reply already in memory. Unlike fuse.ReadResultData it offers
// Slices (go-fuse's withSlice), so the server writes it with one writev: with
// ReadResultData, go-fuse v2.12 first tries splice, writes the reply header into a pipe,
// finds nothing to splice and drains the pipe again, costing four syscalls per READ (and
// a log line per 1 MiB read, which does not fit the pipe).
type dataResult struct{ vec [1][]byte }

var resultPool = sync.Pool{New: func() any { return new(dataResult) }}

func (r *dataResult) Bytes([]byte) ([]byte, fuse.Status) { return r.vec[0], fuse.OK }
func (r *dataResult) Size() int                          { return len(r.vec[0]) }
func (r *dataResult) Slices() ([][]byte, fuse.Status)    { return r.vec[:], fuse.OK }
func (r *dataResult) Readv(dst [][]byte) (int, fuse.Status) {
	n := 0
	src := r.vec[0]
	for _, d := range dst {
		c := copy(d, src[n:])
		n += c
		if n == len(src) {
			break
		}
	}
	return n, fuse.OK
}

// Done is called by the server after the reply was written; the result goes back to the pool.
func (r *dataResult) Done() {
	r.vec[0] = nil
	resultPool.Put(r)
}

// preadFull reads until dest is full, EOF or an error, like the kernel expects of a READ reply.
func preadFull(fd int, dest []byte, off int64) (int, error) {
	done := 0
	for done < len(dest) {
		n, err := syscall.Pread(fd, dest[done:], off+int64(done))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			if done > 0 {
				return done, nil
			}
			return 0, err
		}
		if n == 0 {
			break
		}
		done += n
	}
	return done, nil
}

var _ fs.FileWriter = (*file)(nil)

// Write is pwrite on the backend descriptor.
func (f *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	t0 := f.serviceTimes.Clock()
	n, err := syscall.Pwrite(f.fd, data, off)
	f.serviceTimes.Measured(ctx, t0)
	if err != nil {
		return 0, errnoOf(err)
	}
	return uint32(n), 0
}

var _ fs.FileWritever = (*file)(nil)

// Writev is pwritev on the backend descriptor (go-fuse v2.12 dispatches WRITE here first).
func (f *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	if len(data) == 1 {
		return f.Write(ctx, data[0], off)
	}
	t0 := f.serviceTimes.Clock()
	n, err := unix.Pwritev(f.fd, data, off)
	f.serviceTimes.Measured(ctx, t0)
	if err != nil {
		return 0, errnoOf(err)
	}
	return uint32(n), 0
}

var _ fs.FileReleaser = (*file)(nil)

// Release closes the backend descriptor, and releases the OFD locks of the open file.
func (f *file) Release(ctx context.Context) syscall.Errno {
	if f.releasing != nil {
		f.releasing.begin(f.ino, f.flushPending.Swap(false))
		defer f.releasing.end(f.ino)
	}
	errno := f.lf.Release(ctx) // closing the descriptor ends its flock(2) lock
	if f.locked.Load() || f.flocked.Load() {
		f.locks.releaseFile(f)
	}
	return errno
}

var _ fs.FileFlusher = (*file)(nil)

// Flush closes a dup of the descriptor (the backend sees a close, as with a direct close),
// and notes the time for a handle that holds locks (releaseGrace).
func (f *file) Flush(ctx context.Context) syscall.Errno {
	f.flushed()
	errno := f.lf.Flush(ctx)
	if f.releasing != nil {
		// After the backend's close of the dup: an unlink or rename of the file waits for
		// the RELEASE that follows (releasing.go).
		f.releasing.flush(f.ino, !f.flushPending.Swap(true))
	}
	return errno
}

var _ fs.FileFsyncer = (*file)(nil)

// Fsync is fsync on the backend descriptor.
func (f *file) Fsync(ctx context.Context, flags uint32) syscall.Errno { return f.lf.Fsync(ctx, flags) }

var _ fs.FileGetlker = (*file)(nil)

// Getlk is F_GETLK by the lock owner (locks_linux.go).
func (f *file) Getlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, out *fuse.FileLock) syscall.Errno {
	if f.locks == nil {
		return syscall.ENOLCK
	}
	return f.locks.getlk(f, owner, lk, out)
}

var _ fs.FileSetlker = (*file)(nil)

// Setlk is F_SETLK by the lock owner, or flock(2) with LOCK_NB.
func (f *file) Setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setlk(ctx, owner, lk, flags, false)
}

var _ fs.FileSetlkwer = (*file)(nil)

// Setlkw is F_SETLKW by the lock owner, or a blocking flock(2).
func (f *file) Setlkw(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32) syscall.Errno {
	return f.setlk(ctx, owner, lk, flags, true)
}

func (f *file) setlk(ctx context.Context, owner uint64, lk *fuse.FileLock, flags uint32, block bool) syscall.Errno {
	if flags&fuse.FUSE_LK_FLOCK != 0 {
		return f.flock(ctx, lk, block)
	}
	if f.locks == nil {
		return syscall.ENOLCK
	}
	return f.locks.setlk(ctx, f, owner, lk, block)
}

var _ fs.FileSetattrer = (*file)(nil)

// Setattr applies chmod, chown, truncate and utimes through the descriptor, in the
// loopback's order (truncate before times, so an explicit mtime survives), then fstats
// once for the reply. The time it reports covers the changes, not the fstat (package servicetime).
func (f *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	t0 := f.serviceTimes.Clock()
	errno := f.setattr(in)
	f.serviceTimes.Measured(ctx, t0)
	if errno != 0 {
		return errno
	}
	return f.Getattr(ctx, out)
}

func (f *file) setattr(in *fuse.SetAttrIn) syscall.Errno { return applySetattr(in, fdAttrs(f.fd)) }

// fdAttrs changes attributes through a descriptor.
type fdAttrs int

func (fd fdAttrs) chmod(mode uint32) error  { return syscall.Fchmod(int(fd), mode) }
func (fd fdAttrs) chown(uid, gid int) error { return syscall.Fchown(int(fd), uid, gid) }
func (fd fdAttrs) truncate(size int64) error {
	return syscall.Ftruncate(int(fd), size)
}

// utimes is futimens(fd): utimensat with a NULL path (x/sys refuses an empty path
// without AT_EMPTY_PATH, which utimensat does not take).
func (fd fdAttrs) utimes(ts *[2]unix.Timespec) error {
	if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

var _ fs.FileGetattrer = (*file)(nil)

// Getattr is fstat.
func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if err := syscall.Fstat(f.fd, &st); err != nil {
		return errnoOf(err)
	}
	out.FromStat(&st)
	return 0
}

var _ fs.FileStatxer = (*file)(nil)

// Statx is statx on the descriptor (the kernel's flags are for a path; only the sync bits
// apply).
func (f *file) Statx(ctx context.Context, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	var x unix.Statx_t
	if err := unix.Statx(f.fd, "", unix.AT_EMPTY_PATH|int(flags&atStatxSyncType), int(mask), &x); err != nil {
		return errnoOf(err)
	}
	out.FromStatx(&x)
	return 0
}

var _ fs.FileLseeker = (*file)(nil)

// Lseek is lseek on the descriptor (SEEK_DATA/SEEK_HOLE reach the backend).
func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.lf.Lseek(ctx, off, whence)
}

var _ fs.FileAllocater = (*file)(nil)

// Allocate is fallocate on the descriptor.
func (f *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	return f.lf.Allocate(ctx, off, size, mode)
}

var _ fs.FileIoctler = (*file)(nil)

// Ioctl forwards the ioctl to the descriptor.
func (f *file) Ioctl(ctx context.Context, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	return f.lf.Ioctl(ctx, cmd, arg, input, output)
}
