package trace

import (
	"fmt"
	"strings"
	"time"
)

// Op identifies a filesystem operation. The numeric values are part of the on-disk format:
// never renumber, only append.
type Op uint8

// Operations, one per FUSE request the tracing layer can see.
const (
	OpInvalid       Op = 0
	OpLookup        Op = 1
	OpForget        Op = 2
	OpGetattr       Op = 3
	OpSetattr       Op = 4
	OpReadlink      Op = 5
	OpSymlink       Op = 6
	OpMknod         Op = 7
	OpMkdir         Op = 8
	OpUnlink        Op = 9
	OpRmdir         Op = 10
	OpRename        Op = 11
	OpLink          Op = 12
	OpOpen          Op = 13
	OpRead          Op = 14
	OpWrite         Op = 15
	OpStatfs        Op = 16
	OpRelease       Op = 17
	OpFsync         Op = 18
	OpSetxattr      Op = 19
	OpGetxattr      Op = 20
	OpListxattr     Op = 21
	OpRemovexattr   Op = 22
	OpFlush         Op = 23
	OpOpendir       Op = 24
	OpReaddir       Op = 25
	OpReleasedir    Op = 26
	OpFsyncdir      Op = 27
	OpAccess        Op = 28
	OpCreate        Op = 29
	OpGetlk         Op = 30
	OpSetlk         Op = 31
	OpSetlkw        Op = 32
	OpReaddirplus   Op = 33
	OpFallocate     Op = 34
	OpLseek         Op = 35
	OpCopyFileRange Op = 36
	OpStatx         Op = 37
	OpIoctl         Op = 38
	OpTmpfile       Op = 39

	// NumOps is one more than the largest valid Op.
	NumOps = 40
)

var opNames = [NumOps]string{
	OpInvalid:       "invalid",
	OpLookup:        "lookup",
	OpForget:        "forget",
	OpGetattr:       "getattr",
	OpSetattr:       "setattr",
	OpReadlink:      "readlink",
	OpSymlink:       "symlink",
	OpMknod:         "mknod",
	OpMkdir:         "mkdir",
	OpUnlink:        "unlink",
	OpRmdir:         "rmdir",
	OpRename:        "rename",
	OpLink:          "link",
	OpOpen:          "open",
	OpRead:          "read",
	OpWrite:         "write",
	OpStatfs:        "statfs",
	OpRelease:       "release",
	OpFsync:         "fsync",
	OpSetxattr:      "setxattr",
	OpGetxattr:      "getxattr",
	OpListxattr:     "listxattr",
	OpRemovexattr:   "removexattr",
	OpFlush:         "flush",
	OpOpendir:       "opendir",
	OpReaddir:       "readdir",
	OpReleasedir:    "releasedir",
	OpFsyncdir:      "fsyncdir",
	OpAccess:        "access",
	OpCreate:        "create",
	OpGetlk:         "getlk",
	OpSetlk:         "setlk",
	OpSetlkw:        "setlkw",
	OpReaddirplus:   "readdirplus",
	OpFallocate:     "fallocate",
	OpLseek:         "lseek",
	OpCopyFileRange: "copy_file_range",
	OpStatx:         "statx",
	OpIoctl:         "ioctl",
	OpTmpfile:       "tmpfile",
}

// String returns the lower-case name used in reports and exports ("read", "copy_file_range").
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Valid reports whether o is a known operation (OpInvalid is not).
func (o Op) Valid() bool { return o > OpInvalid && o < NumOps }

// ParseOp is the inverse of Op.String.
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if i > 0 && strings.EqualFold(n, s) {
			return Op(i), nil
		}
	}
	return OpInvalid, fmt.Errorf("trace: unknown operation %q", s)
}

// Class groups operations for "metadata vs data" views.
type Class uint8

// Operation classes.
const (
	ClassMeta Class = iota // lookups, attributes, namespace changes, xattrs, statfs
	ClassData              // read, write, copy_file_range, fallocate, fsync, flush
	ClassOpen              // open, create, opendir, release, releasedir
	ClassDir               // readdir, readdirplus
)

// Class returns the class of o.
func (o Op) Class() Class {
	switch o {
	case OpRead, OpWrite, OpCopyFileRange, OpFallocate, OpFsync, OpFlush, OpLseek:
		return ClassData
	case OpOpen, OpCreate, OpOpendir, OpRelease, OpReleasedir, OpTmpfile:
		return ClassOpen
	case OpReaddir, OpReaddirplus:
		return ClassDir
	}
	return ClassMeta
}

// Event is one timed filesystem operation. It is a fixed-size struct of scalars so that
// producers can fill and hand it off without allocating; strings live in side tables
// (paths, processes) and are referenced by id.
//
// Field use by operation (fields not listed are zero):
//   - Path: the object the op addresses. For name ops (lookup, create, mkdir, mknod,
//     symlink, unlink, rmdir, rename source, link destination) it is parent/name, whether or
//     not that name exists; for handle and node ops it is the node's current path.
//   - Path2: rename destination; link source (the existing file); symlink target text;
//     copy_file_range output file.
//   - Node: FUSE node id the request addressed (the parent directory for name ops).
//     Node2: the node id a successful lookup/create/mkdir/mknod/symlink/link returned;
//     copy_file_range output node.
//   - Handle: file handle (open/create reply, read, write, flush, fsync, release, lseek,
//     locks, fallocate, readdir*, releasedir). Handle2: copy_file_range output handle.
//   - Offset: read/write/readdir/fallocate/lseek input offset, copy_file_range input
//     offset, setattr new size (when Flags has the size bit).
//   - Offset2: copy_file_range output offset (0 in version-1 traces).
//   - Size: requested bytes (read, write, copy_file_range, fallocate length, getxattr and
//     listxattr buffer, readdir buffer).
//   - Ret: bytes done (read, write, copy_file_range, getxattr, listxattr, readlink, readdir
//     bytes of entries), or the resulting offset (lseek); for lookup-like ops the size of
//     the object found.
//   - Flags: open/create flags (O_*), rename flags (Rename*), setattr valid mask
//     (Setattr*), fsync flags (FsyncDatasync), fallocate mode, lseek whence (SeekData,
//     SeekHole), access mask, lock type, FUSE's write flags; MapFault on a read or write
//     that is pages of a mapped file page faults brought in or made dirty (Mapped).
//   - Mode: create/mkdir/mknod mode; for lookup-like ops the mode of the object found.
//   - Tid/Pid: calling thread and its thread group. Requests the kernel issues on its own
//     (release, forget, write-backs) carry the opener's ids when known, else 0.
//   - Start/Dur: in a recording, for the requests the layer carries out with one backend
//     system call (read, write, open, create, setattr, lookup, getattr, mkdir, unlink,
//     rmdir, rename, readlink, opendir), that call's start and duration; for the others,
//     the request handler's.
//   - Unique: the FUSE request's id in a recording (0 in replays and older traces).
//   - Queued, Done, CallStart, CallEnd, CallNr: the kernel's view of the request, in
//     recordings whose Header.Legs is LegsKernel (see HasLegs); zero when not measured.
type Event struct {
	Start   int64 // ns since Header.Origin (monotonic clock)
	Dur     int64 // ns
	Offset  int64 // see above
	Ret     int64 // see above
	Offset2 int64 // see above
	// The kernel's view, in ns since Header.Origin (0: not measured). Queued..Done holds
	// Start..End: the legs outside the server are Start-Queued (the request waiting for
	// the server, and the server's own work before the backend call) and Done-End (the
	// reply reaching the kernel). CallStart..CallEnd is the application's system call that
	// sent the request: it waited CallEnd-CallStart for it.
	Queued    int64 // the kernel queued the request for the server (fuse_request_send)
	Done      int64 // the kernel completed it with the server's reply (fuse_request_end)
	CallStart int64 // the system call that sent it entered the kernel; 0: unknown, or none (sent by the kernel on its own)
	CallEnd   int64 // that call returned; set on the last request the call sent, 0 on the others
	// RunDelay is, plus one, how long the calling thread waited for a CPU (runnable, not
	// running: the scheduler's run delay) between the return of its previous system call
	// that reached the mount and this call's first request; 0: not measured. See
	// ThinkRunDelay.
	RunDelay int64
	// WokenAt is when the calling thread was last woken up between the return of its
	// previous system call that reached the mount and this call (0: it was not blocked,
	// or not measured), and Waker the job's thread that woke it (0: an interrupt, such as
	// its own timer, or a process the recorder did not follow). A thread that waited for
	// another (pthread_join, wait4, a pipe) was woken by it.
	WokenAt int64
	Unique  uint64 // FUSE request id
	Node    uint64 // FUSE node id
	Node2   uint64 // second node id
	Handle  uint64 // file handle
	Handle2 uint64 // second file handle
	Path    uint32 // path id (0 = unknown)
	Path2   uint32 // second path id (0 = none)
	Size    uint32 // requested size
	Flags   uint32 // op flags
	Mode    uint32 // file mode
	Tid     uint32 // caller thread id
	Pid     uint32 // caller process (thread group) id
	Uid     uint32
	Gid     uint32
	Waker   uint32 // see WokenAt
	Errno   uint16 // 0 on success, else the positive errno returned to the caller
	CallNr  uint16 // the number of the system call CallStart names (Linux, the recorder's architecture)
	Op      Op
	// Passthrough: a read or write that kernel FUSE passthrough served from the backing
	// file without the layer, timed by the kernel in the application's thread from the
	// system call's entry to its return (an asynchronous one from its submission to its
	// completion). It has no FUSE request (Unique 0); Queued..Done is the call itself, so
	// no FUSE leg is added to it. Pages of a mapped file that page faults brought in or
	// made dirty have it too, with MapFault in Flags and no call (see Mapped).
	Passthrough bool
}

// ThinkRunDelay returns how long the calling thread waited for a CPU before this call
// since its previous call that reached the mount returned, and whether it was measured.
func (e *Event) ThinkRunDelay() (time.Duration, bool) {
	if e.RunDelay <= 0 {
		return 0, false
	}
	return time.Duration(e.RunDelay - 1), true
}

// Mapped reports whether e is pages of a mapped file that page faults brought in or made
// dirty (a read or write with MapFault), not a system call.
func (e *Event) Mapped() bool {
	return (e.Op == OpRead || e.Op == OpWrite) && e.Flags&MapFault != 0
}

// HasLegs reports whether the kernel's queue and completion times of the request were
// measured (Queued, Done).
func (e *Event) HasLegs() bool { return e.Queued != 0 && e.Done != 0 }

// End returns Start+Dur.
func (e *Event) End() int64 { return e.Start + e.Dur }

// Failed reports whether the op returned an error.
func (e *Event) Failed() bool { return e.Errno != 0 }

// PathRecord is an entry of the path side table: path ID names Parent's path joined with
// Name. ID 1 is the traced root (Parent 0, Name ""). A record for a symlink target text
// has Parent 0 and the raw target as Name. IDs are assigned densely from 1 and never reused
// within a trace.
type PathRecord struct {
	ID     uint32
	Parent uint32
	Name   string
}

// RootPath is the path id of the traced root directory.
const RootPath uint32 = 1

// Process describes a calling thread the first time it was seen.
type Process struct {
	Tid       uint32
	Pid       uint32 // thread group id
	PPid      uint32 // parent process id of Pid
	FirstSeen int64  // ns since origin
	Comm      string // /proc/<tid>/comm
	Exe       string // /proc/<pid>/exe target, may be empty
	// Cmdline is the process's command line (/proc/<pid>/cmdline split at its NUL bytes),
	// at most MaxCmdline bytes of it (CutCmdline); nil when unknown.
	Cmdline []string
}

// FileType is the kind of a filesystem object.
type FileType uint8

// File types, from the S_IFMT bits.
const (
	TypeUnknown FileType = iota
	TypeFile
	TypeDir
	TypeSymlink
	TypeOther // fifo, socket, device
)

// TypeOfMode returns the type of an object from the S_IFMT bits of its mode (as in stat(2)
// and FUSE attributes); a mode without type bits is TypeUnknown.
func TypeOfMode(mode uint32) FileType {
	switch mode & 0o170000 {
	case 0o100000:
		return TypeFile
	case 0o040000:
		return TypeDir
	case 0o120000:
		return TypeSymlink
	case 0:
		return TypeUnknown
	}
	return TypeOther
}

// File describes an object the first time the layer saw it (from a lookup reply), before
// the traced job changed it. Replay uses these records to rebuild the starting state.
type File struct {
	Path  uint32
	Type  FileType
	Mode  uint32 // permission bits
	Size  int64
	Seen  int64 // ns since origin
	Nlink uint32
}
