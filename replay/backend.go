package replay

import (
	"context"
	"errors"
	"io/fs"
	"syscall"

	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/trace"
)

// Backend is one replay target: a mounted directory (Dir), or another kind of storage in a
// package of its own (replay/s3: a key prefix of an S3 bucket). The engine talks to storage
// only through this interface and File.
//
// # Who calls what
//
// The engine calls Backend methods from many goroutines at once (one or more per traced
// thread); an implementation must be safe for concurrent use. The engine never issues two
// calls that the recorded trace ordered on the same path, handle or parent directory at
// the same time: it waits for the first to complete (see the package documentation,
// "Ordering"). A File is opened, and closed, by the worker of one traced thread; calls on
// it may come from other threads (a handle shared by threads), and several at once from
// one thread where the recording had them in flight together (an application's queue of
// reads on one descriptor: io_uring, libaio), never concurrently with Close. A backend
// may serialise calls on one File (replay/s3 does) at the cost of that queue depth.
//
// Prepare-time calls (IsEmpty, Reset, and the Mkdir/Open/WriteAt/Symlink calls that build
// the starting state) happen before any replayed op and from one goroutine. BeginPhase is
// called from one goroutine between the parts of a run (see PrepareTarget), never while
// another call is in flight.
//
// # Names
//
// Every name is a slash-separated path relative to the target root, as the trace recorded
// it: "" is the root itself, no component is "", "." or "..", and no name is absolute.
// The engine checks names with CheckName before calling; a backend must still refuse
// (with an error wrapping ErrEscape) any name that would resolve outside its root,
// including through symlinks, and must never touch anything outside its root.
//
// # Errors
//
// A method returns nil or an error from which Errno extracts the errno the application
// would have seen (a bare syscall.Errno for syscall backends; a backend that speaks
// another protocol classifies its errors where they enter, into fs.ErrNotExist,
// fs.ErrExist, fs.ErrPermission, or a wrapped syscall.Errno). Errors that say nothing about
// the replayed operation are classified too:
//   - ErrEscape: the name would leave the root; the op is refused, never issued.
//   - ErrUnsupported: the backend cannot express the op (counted as skipped, not as a
//     divergence).
//   - ErrTransient: a retry may succeed (throttling, a dropped connection); the Retry
//     decorator retries idempotent methods that fail with it.
//
// # Idempotence
//
// Idempotent (safe to retry after a transient failure): Lstat, Access, Statfs, Readlink,
// Getxattr, Listxattr, Truncate, Chmod, Chown, Utimes, Setxattr, File.ReadAt, File.WriteAt (same
// data at the same offset), File.ReadDir, File.Stat, File.Sync, File.Truncate,
// File.Allocate. Not idempotent (a retry can observe the first attempt's effect):
// Open with O_CREAT|O_EXCL or O_TRUNC, Mkdir, Mknod, Symlink, Link, Remove, Rmdir, Rename,
// Removexattr, File.Lock, File.Close.
//
// # Decorators
//
// Rate limits, retries and logging wrap a Backend without changing it: see Decorate,
// Limit, Retry and Log.
type Backend interface {
	// Target describes the backend for the replay trace's header.
	Target() trace.Target

	// IsEmpty reports whether the root holds no entries.
	IsEmpty(ctx context.Context) (bool, error)
	// Reset removes everything under the root (not the root itself). The engine calls it
	// only on an empty root it filled itself, or on a root the user declared scratch.
	Reset(ctx context.Context) error
	// Close releases the backend's resources. Files must be closed first.
	Close() error
	// BeginPhase tells the backend which part of a run the calls that follow belong to:
	// PhasePrepare (building the starting state) or PhaseReplay. A backend that counts
	// requests of its own tallies them by phase (see RequestCounter); one that cannot
	// express every call may build the starting state in a way of its own while preparing
	// (S3 makes directories as marker objects whatever its profile). Others ignore it.
	BeginPhase(phase string)

	Lstat(ctx context.Context, name string) (Attr, error)
	Access(ctx context.Context, name string, mask uint32) error
	Statfs(ctx context.Context) error
	Open(ctx context.Context, name string, flags int, perm uint32) (File, error)
	Mkdir(ctx context.Context, name string, perm uint32) error
	Mknod(ctx context.Context, name string, mode uint32) error
	Remove(ctx context.Context, name string) error // unlink
	Rmdir(ctx context.Context, name string) error
	Rename(ctx context.Context, from, to string, flags uint32) error
	Link(ctx context.Context, existing, name string) error
	Symlink(ctx context.Context, target, name string) error
	Readlink(ctx context.Context, name string, buf []byte) (int, error)
	Truncate(ctx context.Context, name string, size int64) error
	Chmod(ctx context.Context, name string, perm uint32) error
	// Chown sets the owner to the replaying user and group: the trace does not record the
	// owner an application asked for.
	Chown(ctx context.Context, name string) error
	Utimes(ctx context.Context, name string) error // set atime and mtime to now
	Getxattr(ctx context.Context, name, attr string, buf []byte) (int, error)
	Listxattr(ctx context.Context, name string, buf []byte) (int, error)
	Setxattr(ctx context.Context, name, attr string, value []byte, flags int) error
	Removexattr(ctx context.Context, name, attr string) error
}

// Walker is an optional extension of a Backend that has path walks (a directory). From
// returns a view whose calls on names below dir begin their path walk in dir instead of
// the root, so that a replayed call walks the same components as the recorded
// application's call (whose lookups were folded into it): on a FUSE target, the same
// LOOKUP requests. Views share the backend's state and must stay confined to its root;
// closing a view does nothing.
type Walker interface {
	From(dir string) Backend
}

// File is an open file or directory of a Backend.
type File interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// ReadDir reads directory entries into buf (getdents); off 0 restarts the listing.
	// It returns the bytes of entries read, 0 at the end.
	ReadDir(ctx context.Context, buf []byte, off int64) (int, error)
	Sync(ctx context.Context, datasync bool) error
	Truncate(ctx context.Context, size int64) error
	Stat(ctx context.Context) (Attr, error)
	Allocate(ctx context.Context, mode uint32, off, length int64) error
	Seek(ctx context.Context, off int64, whence int) (int64, error)
	// Lock tests (LockGet), takes or releases (LockSet), or waits for (LockWait) a byte
	// range lock of type typ (F_RDLCK, F_WRLCK, F_UNLCK); length 0 means to the end of the
	// file. Locks belong to the open file, as open-file-description locks do, so handles of
	// different recorded processes conflict as they did.
	Lock(ctx context.Context, cmd LockCmd, typ int16, start, length int64) error
	Close(ctx context.Context) error
}

// RequestCounter is implemented by backends that turn filesystem calls into requests of
// their own (S3), counted by phase (see Backend.BeginPhase). The engine does not need it:
// the campaign (replay/campaign) takes the tallies after each run and writes them next to
// the replay trace (s3req.Write); `iotap report` prints them.
type RequestCounter interface {
	// TakeRequests returns the tallies of the phases begun since the previous call, oldest
	// first, so that each phase is taken once (with --repeat, each run's sidecar holds that
	// run's phases).
	TakeRequests() []s3req.Phase
}

// RangeCopier is an optional File capability: copying a byte range to another File of
// the same backend without passing the data through the caller (copy_file_range). It
// returns the bytes copied, fewer than n only at the end of the source. An error
// wrapping ErrUnsupported, returned before anything was copied, means this pair of files
// cannot be copied that way (another backend's File, a file system without the call):
// the engine then copies with ReadAt and WriteAt. Idempotent, like WriteAt.
type RangeCopier interface {
	CopyRange(ctx context.Context, dst File, offIn, offOut, n int64) (int64, error)
}

// Phases of a run, for Backend.BeginPhase.
const (
	PhasePrepare = "prepare"
	PhaseReplay  = "replay"
)

// LockCmd selects what File.Lock does.
type LockCmd uint8

// Lock commands.
const (
	LockGet LockCmd = iota
	LockSet
	LockWait
)

// Attr is what Lstat and File.Stat report.
type Attr struct {
	Mode uint32 // S_IFMT type bits and permissions
	Size int64
}

// Sentinel errors of the Backend contract.
var (
	// ErrEscape marks a name that would resolve outside the target root.
	ErrEscape = errors.New("path leaves the target root")
	// ErrUnsupported marks an operation the backend cannot express.
	ErrUnsupported = errors.New("operation not supported by this backend")
	// ErrTransient marks a failure that a retry may fix.
	ErrTransient = errors.New("transient backend failure")
)

// Errno returns the errno an application would have seen for err: 0 for nil, the
// wrapped syscall.Errno if there is one, the usual errno for the io/fs sentinels, and EIO
// for anything else.
func Errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(syscall.Errno); ok { // fast path, no allocation
		return e
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	case errors.Is(err, ErrUnsupported):
		return syscall.ENOTSUP
	case errors.Is(err, ErrEscape):
		return syscall.EXDEV
	}
	return syscall.EIO
}

// SpaceReporter is an optional Backend capability: the space and inodes free below its
// root (a file system's statfs). Prepare refuses a starting state that does not fit before
// it creates any of it. A backend without a limit it can tell (S3) does not implement it,
// or returns an error wrapping ErrUnsupported.
type SpaceReporter interface {
	Space(ctx context.Context) (Space, error)
}

// Space is what a SpaceReporter reports.
type Space struct {
	FreeBytes uint64 // free to an unprivileged user
	// FreeFiles is the number of inodes free, and Files the number in all (0: the file
	// system does not count them, and FreeFiles means nothing).
	FreeFiles, Files uint64
	BlockSize        int64 // the allocation unit
}
