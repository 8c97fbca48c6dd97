package fold

import "github.com/iotap/iotap/trace"

// Syscall is a kind of system call as the per-system-call view counts them: the calls of
// one row.
type Syscall uint8

// System call kinds, in the order a report lists them.
const (
	SysOpen          Syscall = iota // open, openat, creat, opendir (a create: Rec is create)
	SysStat                         // stat, lstat, fstat, newfstatat, statx; a lookup standing alone
	SysAccess                       // access, faccessat
	SysClose                        // close
	SysRead                         // read, pread, readv
	SysWrite                        // write, pwrite, writev
	SysGetdents                     // getdents64
	SysReadlink                     // readlink
	SysMkdir                        // mkdir
	SysMknod                        // mknod (a FIFO, a device node)
	SysUnlink                       // unlink
	SysRmdir                        // rmdir
	SysRename                       // rename, renameat2
	SysLink                         // link
	SysSymlink                      // symlink
	SysChmod                        // chmod, fchmod
	SysChown                        // chown, fchown, lchown
	SysTruncate                     // truncate, ftruncate
	SysUtimes                       // utimensat, futimens, utimes
	SysSetattr                      // a setattr of attributes no single call above sets
	SysFsync                        // fsync
	SysFdatasync                    // fdatasync
	SysGetxattr                     // getxattr
	SysListxattr                    // listxattr
	SysSetxattr                     // setxattr
	SysRemovexattr                  // removexattr
	SysLock                         // fcntl locks, flock
	SysCopyFileRange                // copy_file_range
	SysFallocate                    // fallocate
	SysLseek                        // lseek(SEEK_DATA / SEEK_HOLE)
	SysStatfs                       // statfs
	SysOther                        // ioctl, poll, bmap, unknown requests
	NumSyscalls
)

var syscallNames = [NumSyscalls]string{"open", "stat", "access", "close", "read", "write", "getdents",
	"readlink", "mkdir", "mknod", "unlink", "rmdir", "rename", "link", "symlink", "chmod", "chown",
	"truncate", "utimes", "setattr", "fsync", "fdatasync", "getxattr", "listxattr", "setxattr",
	"removexattr", "lock", "copy_file_range", "fallocate", "lseek", "statfs", "other"}

func (s Syscall) String() string {
	if s < NumSyscalls {
		return syscallNames[s]
	}
	return "syscall?"
}

// SyscallOf returns the kind of system call whose primary request is op with flags (as
// in Call.Rec and Call.Flags), and false for requests that are no call of their own
// (forget).
func SyscallOf(op trace.Op, flags uint32) (Syscall, bool) {
	switch op {
	case trace.OpForget:
		return 0, false
	case trace.OpOpen, trace.OpCreate, trace.OpOpendir, trace.OpTmpfile:
		return SysOpen, true
	case trace.OpLookup, trace.OpGetattr, trace.OpStatx:
		return SysStat, true
	case trace.OpAccess:
		return SysAccess, true
	case trace.OpFlush, trace.OpRelease, trace.OpReleasedir:
		return SysClose, true
	case trace.OpRead:
		return SysRead, true
	case trace.OpWrite:
		return SysWrite, true
	case trace.OpReaddir, trace.OpReaddirplus:
		return SysGetdents, true
	case trace.OpSetattr:
		return setattrSyscall(flags), true
	case trace.OpFsync, trace.OpFsyncdir:
		if flags&trace.FsyncDatasync != 0 {
			return SysFdatasync, true
		}
		return SysFsync, true
	case trace.OpGetlk, trace.OpSetlk, trace.OpSetlkw:
		return SysLock, true
	}
	if s, ok := sameName[op]; ok {
		return s, true
	}
	return SysOther, true
}

// sameName maps the requests that are the system call of the same name.
var sameName = map[trace.Op]Syscall{
	trace.OpReadlink: SysReadlink, trace.OpMkdir: SysMkdir, trace.OpMknod: SysMknod, trace.OpUnlink: SysUnlink,
	trace.OpRmdir: SysRmdir, trace.OpRename: SysRename, trace.OpLink: SysLink, trace.OpSymlink: SysSymlink,
	trace.OpGetxattr: SysGetxattr, trace.OpListxattr: SysListxattr, trace.OpSetxattr: SysSetxattr,
	trace.OpRemovexattr: SysRemovexattr, trace.OpCopyFileRange: SysCopyFileRange,
	trace.OpFallocate: SysFallocate, trace.OpLseek: SysLseek, trace.OpStatfs: SysStatfs,
}

// setattrSyscall chooses the call of a setattr by the attribute it sets, as the folder
// chooses the call replay issues (a size change wins: a truncate also updates times).
func setattrSyscall(flags uint32) Syscall {
	switch {
	case flags&trace.SetattrSize != 0:
		return SysTruncate
	case flags&trace.SetattrMode != 0:
		return SysChmod
	case flags&trace.SetattrTimes != 0:
		return SysUtimes
	case flags&(trace.SetattrUID|trace.SetattrGID) != 0:
		return SysChown
	}
	return SysSetattr
}

// Syscall returns the kind of system call c is, and false for an implicit open (no call
// of the application's).
func (c *Call) Syscall() (Syscall, bool) {
	if c.Implicit {
		return 0, false
	}
	return SyscallOf(c.Rec, c.Flags)
}
