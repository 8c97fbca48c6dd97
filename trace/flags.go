package trace

// Bits and values of Event.Flags, by op. They are the FUSE protocol's (and, for rename and
// lseek, the system calls') values as the kernel sent them, named here so that readers of
// traces need not know the protocol; fusefs checks them against go-fuse's constants.

// Setattr: the valid mask (FATTR_*), the attributes the request sets.
const (
	SetattrMode        = 1 << 0  // FATTR_MODE: chmod
	SetattrUID         = 1 << 1  // FATTR_UID: chown
	SetattrGID         = 1 << 2  // FATTR_GID: chown
	SetattrSize        = 1 << 3  // FATTR_SIZE: truncate (Event.Offset is the new size)
	SetattrAtime       = 1 << 4  // FATTR_ATIME: utimes
	SetattrMtime       = 1 << 5  // FATTR_MTIME: utimes
	SetattrFH          = 1 << 6  // FATTR_FH: the request names an open handle
	SetattrAtimeNow    = 1 << 7  // FATTR_ATIME_NOW: utimes to now
	SetattrMtimeNow    = 1 << 8  // FATTR_MTIME_NOW: utimes to now
	SetattrLockOwner   = 1 << 9  // FATTR_LOCKOWNER
	SetattrCtime       = 1 << 10 // FATTR_CTIME
	SetattrKillSUIDGID = 1 << 11 // FATTR_KILL_SUIDGID: clear set-id bits (with a size change)

	// SetattrTimes are the bits of a time update.
	SetattrTimes = SetattrAtime | SetattrMtime | SetattrAtimeNow | SetattrMtimeNow
)

// Fsync and fsyncdir: FsyncDatasync (FUSE_FSYNC_FDATASYNC) marks fdatasync.
const FsyncDatasync = 1 << 0

// Rename: the renameat2 flags.
const (
	RenameNoReplace = 1 << 0 // RENAME_NOREPLACE
	RenameExchange  = 1 << 1 // RENAME_EXCHANGE
	RenameWhiteout  = 1 << 2 // RENAME_WHITEOUT
)

// Lseek: the whence values FUSE forwards (SEEK_SET, SEEK_CUR and SEEK_END are answered
// by the kernel).
const (
	SeekData = 3 // SEEK_DATA
	SeekHole = 4 // SEEK_HOLE
)

// Read and write: MapFault marks pages of a memory-mapped file that page faults brought in
// (a read) or that a store through a shared mapping made dirty (a write), which kernel
// passthrough served on the backing file without a system call (Passthrough is set, and
// CallStart, CallEnd and CallNr are 0): see Event.Mapped. Offset and Size are the pages',
// Ret the bytes of them within the file, and Dur 0: no tracepoint marks a fault's end. The
// low bits of a write's Flags are FUSE's write flags (WRITE_CACHE 1, WRITE_LOCKOWNER 2,
// WRITE_KILL_SUIDGID 4); the bit is far above them and above every open flag.
const MapFault = 1 << 31
