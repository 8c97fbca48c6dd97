package fold

import "github.com/iotap/iotap/trace"

// Kind is the system call a Call stands for, as replay issues it.
type Kind uint8

// Call kinds. The package documentation says which requests each comes from.
const (
	Skip        Kind = iota // no call replay can issue (ioctl, poll, a setattr of bits no call sets)
	Stat                    // lstat(path)
	Fstat                   // fstat(fd): the thread holds the path open
	Access                  // faccessat(path, mask)
	Open                    // openat(path, flags, mode), also a create or opendir
	Close                   // close(fd)
	Read                    // pread(fd, size, off)
	Write                   // pwrite(fd, size, off)
	Readdir                 // getdents64(fd)
	Fsync                   // fsync or fdatasync
	Fallocate               // fallocate(fd, mode, off, len)
	Ftruncate               // ftruncate(fd, size): the thread holds the file open
	Truncate                // truncate(path, size)
	Chmod                   // fchmodat
	Utimes                  // utimensat
	Mkdir                   // mkdirat
	Mknod                   // mknodat
	Unlink                  // unlinkat
	Rmdir                   // unlinkat(AT_REMOVEDIR)
	Rename                  // renameat2
	Link                    // linkat
	Symlink                 // symlinkat
	Readlink                // readlinkat
	Statfs                  // statfs
	Getxattr                // getxattr
	Listxattr               // listxattr
	Setxattr                // setxattr
	Removexattr             // removexattr
	Lseek                   // lseek(SEEK_DATA / SEEK_HOLE)
	Chown                   // lchown
	Lock                    // fcntl locks
	Copy                    // copy_file_range(fd, fd2)
	NumKinds
)

var kindNames = [NumKinds]string{"skip", "lstat", "fstat", "access", "open", "close", "pread", "pwrite",
	"getdents", "fsync", "fallocate", "ftruncate", "truncate", "chmod", "utimes", "mkdir", "mknod",
	"unlink", "rmdir", "rename", "link", "symlink", "readlink", "statfs", "getxattr", "listxattr",
	"setxattr", "removexattr", "lseek", "chown", "fcntl-lock", "copy_file_range"}

func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "kind?"
}

// Call is one system call of the application: its primary recorded request and the
// requests folded into it.
type Call struct {
	Kind   Kind
	Rec    trace.Op // the primary request's op (flush for a close that flushed)
	Worker uint32   // the thread the call belongs to (a close: the thread that opened the file)
	Tid    uint32   // recorded caller of the primary request
	Pid    uint32
	Start  int64 // recorded start of the first request (ns since the trace origin)
	Dur    int64 // recorded duration of the primary request(s)

	Name, Name2 string // relative paths (Name2: rename/link/symlink second operand)
	// Walk is the directory the call's path walk started from, as its folded lookups
	// show (the parent of the shallowest one; the parent of Name when none was folded).
	Walk            string
	PathID, PathID2 uint32 // recorded path ids

	Handle uint64 // recorded handle
	// Slot is the index of the handle's open file in a table of the files open at once
	// (freed slots are reused), -1 none.
	Slot int32
	// Handle2, Slot2 and Offset2 are copy_file_range's output handle, its open file and
	// the output offset (Copy only).
	Handle2 uint64
	Slot2   int32
	Offset2 int64
	Offset  int64
	Size    int64
	Flags   uint32 // the primary request's flags
	Mode    uint32

	Errno uint16 // recorded outcome
	Ret   int64  // recorded return value (bytes for reads and writes)
	// Implicit marks an open the trace never showed (a handle opened before the trace
	// began); Dir says it opens a directory.
	Implicit bool
	Dir      bool
	// Events is the number of primary requests (two split pieces of a read; flush and
	// release of a close), Reqs the number of requests the call stands for counting one
	// for the primary ones (its own and the folded path-walk lookups and probes).
	// FoldDur is the folded requests' recorded time.
	// Idle is the time within Dur when none of a merged read's or write's pieces was in
	// the storage (the FUSE round trips between them).
	Events  uint16
	Reqs    uint16
	FoldDur int64
	Idle    int64
	// CallStart and CallEnd are the application's system call as the kernel saw it enter
	// and return (trace.Event's, in recordings that measured them): the earliest entry and
	// the latest return among the call's requests, 0 when unknown. RunDelay is the run
	// delay before the call as trace.Event holds it (plus one; 0: not measured).
	CallStart, CallEnd int64
	RunDelay           int64
	// WokenAt and Waker are the wake-up before the call (trace.Event's).
	WokenAt int64
	Waker   uint32
	// rwSyscall says the kernel named the call's first request's system call as a read or
	// write of one buffer or vector (see rwCall).
	rwSyscall bool
	// Passthrough: a read or write kernel passthrough served (trace.Event.Passthrough).
	Passthrough bool
}

// unfinished reports whether c is a piece of a read or write system call the kernel saw
// enter but not yet return: more pieces of it follow.
func (c *Call) unfinished() bool {
	return (c.Kind == Read || c.Kind == Write) && c.rwSyscall && c.CallStart != 0 && c.CallEnd == 0
}

// Requests returns the number of recorded requests the call stands for.
func (c *Call) Requests() int {
	if c.Events == 0 {
		return 0
	}
	return int(c.Events) + int(c.Reqs) - 1
}

// Time returns the call's time in the storage: the recorded time of its primary requests
// (the time at least one was in flight) plus that of the requests folded into it.
func (c *Call) Time() int64 { return c.Dur - c.Idle + c.FoldDur }

// IsDataOp reports whether requests of op move or persist file data (read, write,
// copy_file_range, fsync, fallocate): on a shared file system these go to the data servers.
// Every other request is a metadata request (lookup, getattr, open, create, flush, release,
// readdir, setattr, ...): on a shared file system a round trip to the metadata server.
func IsDataOp(op trace.Op) bool {
	switch op {
	case trace.OpRead, trace.OpWrite, trace.OpCopyFileRange, trace.OpFsync, trace.OpFsyncdir, trace.OpFallocate:
		return true
	}
	return false
}

// DataTime returns the part of the call's time spent in data requests (IsDataOp): its
// primary requests' when they are data requests. The folded requests (path-walk lookups,
// privilege probes) are metadata requests.
func (c *Call) DataTime() int64 {
	if IsDataOp(c.Rec) {
		return c.Dur - c.Idle
	}
	return 0
}

// MetaTime returns the part of the call's time spent in metadata requests: Time less
// DataTime.
func (c *Call) MetaTime() int64 { return c.Time() - c.DataTime() }

// folded is what held calls folded into another stood for.
type folded struct {
	reqs               int
	dur                int64
	callStart, callEnd int64
	pre                callPre
}

// callPre is what the kernel measured before a call: its thread's run delay and last
// wake-up since its previous call (trace.Event's RunDelay, WokenAt, Waker).
type callPre struct {
	runDelay, wokenAt int64
	waker             uint32
}

// pre returns c's callPre.
func (c *Call) pre() callPre { return callPre{c.RunDelay, c.WokenAt, c.Waker} }

// setPre sets c's callPre.
func (c *Call) setPre(p callPre) { c.RunDelay, c.WokenAt, c.Waker = p.runDelay, p.wokenAt, p.waker }

// eventPre returns an event's callPre.
func eventPre(ev *trace.Event) callPre { return callPre{ev.RunDelay, ev.WokenAt, ev.Waker} }

// add counts the held call h as folded.
func (fd *folded) add(h *Call) {
	fd.reqs += int(h.Reqs)
	fd.dur += h.Dur + h.FoldDur
	if h.CallStart != 0 && (fd.callStart == 0 || h.CallStart < fd.callStart) {
		fd.pre = h.pre()
	}
	fd.callStart, fd.callEnd = widenCall(fd.callStart, fd.callEnd, h.CallStart, h.CallEnd)
}

// fold charges folded requests to c.
func (c *Call) fold(fd folded) {
	c.Reqs = uint16(min(int(c.Reqs)+fd.reqs, 1<<16-1))
	c.FoldDur += fd.dur
	c.widen(fd.callStart, fd.callEnd, fd.pre)
}

// widen extends c's system call times with another request's (0: unknown), with what the
// kernel measured before that request's call.
func (c *Call) widen(start, end int64, pre callPre) {
	if start != 0 && (c.CallStart == 0 || start < c.CallStart) {
		c.setPre(pre)
	}
	c.CallStart, c.CallEnd = widenCall(c.CallStart, c.CallEnd, start, end)
}

// widenCall returns the earliest known start and the latest end of two spans.
func widenCall(s0, e0, s1, e1 int64) (start, end int64) {
	start = s0
	if s1 != 0 && (start == 0 || s1 < start) {
		start = s1
	}
	return start, max(e0, e1)
}
