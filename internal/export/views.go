package export

import (
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// request is one record of the requests view: an event, the names of its paths and
// process, and the trace's names.
type request struct {
	ev          trace.Event
	path, path2 string
	proc        proc
	n           *names
}

// requestOffset reports whether op carries an offset in Event.Offset (setattr: a truncate's
// new size).
func requestOffset(ev *trace.Event) bool {
	switch ev.Op {
	case trace.OpRead, trace.OpWrite, trace.OpReaddir, trace.OpReaddirplus, trace.OpLseek,
		trace.OpFallocate, trace.OpCopyFileRange:
		return true
	case trace.OpSetattr:
		return ev.Flags&trace.SetattrSize != 0
	}
	return false
}

// requestSize reports whether op asks for a number of bytes (Event.Size).
func requestSize(op trace.Op) bool {
	switch op {
	case trace.OpRead, trace.OpWrite, trace.OpReaddir, trace.OpReaddirplus, trace.OpFallocate,
		trace.OpCopyFileRange, trace.OpGetxattr, trace.OpListxattr, trace.OpReadlink:
		return true
	}
	return false
}

// bytesMoved is the bytes a request or call transferred: its result when it succeeded.
func bytesMoved(errno uint16, ret int64) int64 {
	if errno != 0 || ret < 0 {
		return 0
	}
	return ret
}

// requestColumns are the columns of the requests view, in order (schema SchemaVersion).
var requestColumns = append([]column[request]{
	strCol("op", `the FUSE operation ("read", "lookup", "copy_file_range", ...: trace.Op)`, func(r *request) string { return r.ev.Op.String() }),
	intCol("start_ns", "start, ns since the trace's start (trace_start_time)", func(r *request) int64 { return r.ev.Start }),
	timeCol("start_time", "start, absolute", func(r *request) int64 { return r.n.id.start + r.ev.Start }),
	intCol("dur_ns", "duration: the request's time in the tracing layer and its storage, ns", func(r *request) int64 { return r.ev.Dur }),
	nameCol("path", `path of the object, relative to the traced directory ("" = the directory itself, "?N" = path id N without a record)`,
		func(r *request) string { return r.path }),
	optName("path2", "second path: rename destination, link source, symlink target text, copy_file_range output",
		func(r *request) string { return r.path2 }),
	nonZero("node", "FUSE node id", func(r *request) int64 { return int64(r.ev.Node) }),
	nonZero("handle", "file handle", func(r *request) int64 { return int64(r.ev.Handle) }),
	optInt("file_offset", "offset: read, write, readdir, lseek, fallocate, copy_file_range's input; a truncate's new size",
		func(r *request) (int64, bool) { return r.ev.Offset, requestOffset(&r.ev) }),
	optInt("size", "bytes asked for: read, write, readdir, fallocate, copy_file_range, getxattr, listxattr, readlink",
		func(r *request) (int64, bool) { return int64(r.ev.Size), requestSize(r.ev.Op) }),
	optInt("bytes", "bytes transferred, as the report counts them: file data (read, write, copy_file_range), directory entries (readdir), "+
		"attribute values and names (getxattr, listxattr), a link's text (readlink); 0 when it failed; NULL for the other operations",
		func(r *request) (int64, bool) { return bytesMoved(r.ev.Errno, r.ev.Ret), stats.HasBytes(r.ev.Op) }),
	intCol("ret", "the request's result: bytes done, the resulting offset (lseek), the size of the object found (lookup, getattr)",
		func(r *request) int64 { return r.ev.Ret }),
	intCol("errno", "0 on success, else the errno returned to the caller", func(r *request) int64 { return int64(r.ev.Errno) }),
	optStr("errno_name", `the errno's name ("ENOENT"), NULL on success`, func(r *request) string { return trace.ErrnoName(r.ev.Errno) }),
	nonZero("tid", "the calling thread (NULL: a request of the kernel's own, a forget)", func(r *request) int64 { return int64(r.ev.Tid) }),
	nonZero("pid", "the calling process", func(r *request) int64 { return int64(r.ev.Pid) }),
	optName("comm", "the thread's command name, from the trace's process table", func(r *request) string { return r.proc.comm }),
	optName("exe", "its process's executable", func(r *request) string { return r.proc.exe }),
	intCol("uid", "the caller's user id", func(r *request) int64 { return int64(r.ev.Uid) }),
	intCol("gid", "the caller's group id", func(r *request) int64 { return int64(r.ev.Gid) }),
	intCol("flags", "the operation's flags (open flags, rename flags, setattr mask, ...; on a read or write, 2^31 marks pages of a mapped file "+
		"that page faults brought in or made dirty: no system call, dur_ns 0)", func(r *request) int64 { return int64(r.ev.Flags) }),
	intCol("mode", "file mode (create, mkdir, mknod; the object found by a lookup)", func(r *request) int64 { return int64(r.ev.Mode) }),
	nonZero("node2", "second node id: the node a lookup, create or mkdir returned; copy_file_range's output", func(r *request) int64 { return int64(r.ev.Node2) }),
	nonZero("handle2", "copy_file_range's output handle", func(r *request) int64 { return int64(r.ev.Handle2) }),
	optInt("file_offset2", "copy_file_range's output offset (NULL in format-version-1 traces, which did not record it)",
		func(r *request) (int64, bool) {
			return r.ev.Offset2, r.ev.Op == trace.OpCopyFileRange && r.n.version >= trace.Version2
		}),
	nonZero("request_id", "the FUSE request's unique id (NULL in replays and traces before format version 4)", func(r *request) int64 { return int64(r.ev.Unique) }),
	nonZero("queued_ns", "the kernel queued the request for the layer, ns since the trace's start (NULL: the kernel's view was not measured)",
		func(r *request) int64 { return r.ev.Queued }),
	nonZero("done_ns", "the kernel completed the request (NULL: not measured)", func(r *request) int64 { return r.ev.Done }),
	nonZero("call_start_ns", "the application's system call that sent the request entered the kernel (NULL: not measured)",
		func(r *request) int64 { return r.ev.CallStart }),
	nonZero("call_end_ns", "that call returned, on the call's last request (NULL: not measured, or not its last)", func(r *request) int64 { return r.ev.CallEnd }),
	nonZero("call_nr", "that call's number (Linux, the recording machine's architecture; NULL: not measured)",
		func(r *request) int64 { return int64(r.ev.CallNr) }),
	optInt("run_delay_ns", "how long the thread waited for a CPU between its previous call that reached the mount and this one (NULL: not measured)",
		func(r *request) (int64, bool) { d, ok := r.ev.ThinkRunDelay(); return int64(d), ok }),
	nonZero("woken_ns", "when the thread was last woken between those two calls (NULL: it was not blocked, or not measured)",
		func(r *request) int64 { return r.ev.WokenAt }),
	nonZero("waker", "the job's thread that woke it then (NULL: an interrupt, another process, or not measured)", func(r *request) int64 { return int64(r.ev.Waker) }),
	boolCol("passthrough", "a read or write kernel passthrough served and the kernel timed in the application's thread: the system call itself, "+
		"no FUSE request (request_id NULL; queued_ns..done_ns and call_start_ns..call_end_ns are the call)", func(r *request) bool { return r.ev.Passthrough }),
}, identityColumns(func(r *request) *identity { return r.n.id })...)

// syscall is one record of the syscalls view: a call the application made, found by
// folding the requests as the report and replay do (package trace/fold).
type syscall struct {
	c      fold.Call
	kind   fold.Syscall
	replay bool // a replay's trace, whose events are calls
	proc   proc // its thread's process (with names)
	n      *names
}

// callOffset reports whether a call of kind k carries an offset (a truncate: the new size).
func callOffset(k fold.Syscall) bool {
	switch k {
	case fold.SysRead, fold.SysWrite, fold.SysFallocate, fold.SysCopyFileRange, fold.SysTruncate, fold.SysLseek:
		return true
	}
	return false
}

// syscallColumns are the columns of the syscalls view, in order (schema SchemaVersion).
var syscallColumns = append([]column[syscall]{
	strCol("syscall", "the call's kind as the report's rows name it (open, stat, read, close, ...: fold.Syscall)",
		func(s *syscall) string { return s.kind.String() }),
	strCol("op", `its primary request ("flush" for a close that flushed, "lookup" for a stat of a missing name)`,
		func(s *syscall) string { return s.c.Rec.String() }),
	intCol("start_ns", "start of its first request, ns since the trace's start (trace_start_time)", func(s *syscall) int64 { return s.c.Start }),
	timeCol("start_time", "start, absolute", func(s *syscall) int64 { return s.n.id.start + s.c.Start }),
	intCol("dur_ns", "its time in the storage: the summed time of the requests it stands for, ns", func(s *syscall) int64 { return s.c.Time() }),
	intCol("meta_ns", "of which in metadata requests (lookups, getattr, open, flush, ...)", func(s *syscall) int64 { return s.c.MetaTime() }),
	intCol("data_ns", "of which in data requests (read, write, fsync, ...)", func(s *syscall) int64 { return s.c.DataTime() }),
	optInt("requests", "the requests it stands for (NULL in a replay's trace, whose events are calls)", func(s *syscall) (int64, bool) {
		return int64(s.c.Requests()), !s.replay
	}),
	nameCol("path", "its path, relative to the traced directory", func(s *syscall) string { return s.c.Name }),
	optName("path2", "its second path: rename or link target, symlink text, copy_file_range's output", func(s *syscall) string { return s.c.Name2 }),
	nonZero("handle", "the file handle it used", func(s *syscall) int64 { return int64(s.c.Handle) }),
	optInt("file_offset", "offset: read, write, fallocate, copy_file_range's input, lseek; a truncate's new size",
		func(s *syscall) (int64, bool) { return s.c.Offset, callOffset(s.kind) }),
	optInt("size", "bytes asked for: read, write, fallocate, copy_file_range", func(s *syscall) (int64, bool) {
		return s.c.Size, s.kind == fold.SysRead || s.kind == fold.SysWrite || s.kind == fold.SysCopyFileRange || s.kind == fold.SysFallocate
	}),
	optInt("bytes", "bytes transferred, as the requests view counts them by the call's primary request (read, write, copy_file_range, "+
		"getdents, getxattr, listxattr, readlink); 0 when it failed; NULL for the other calls",
		func(s *syscall) (int64, bool) { return bytesMoved(s.c.Errno, s.c.Ret), stats.HasBytes(s.c.Rec) }),
	intCol("ret", "its result: bytes done, or the size found (stat)", func(s *syscall) int64 { return s.c.Ret }),
	intCol("errno", "0 on success, else the errno", func(s *syscall) int64 { return int64(s.c.Errno) }),
	optStr("errno_name", "the errno's name, NULL on success", func(s *syscall) string { return trace.ErrnoName(s.c.Errno) }),
	nonZero("tid", "the thread that made its primary request", func(s *syscall) int64 { return int64(s.c.Tid) }),
	nonZero("pid", "its process", func(s *syscall) int64 { return int64(s.c.Pid) }),
	optName("comm", "that thread's command name", func(s *syscall) string { return s.proc.comm }),
	optName("exe", "its process's executable", func(s *syscall) string { return s.proc.exe }),
	nonZero("thread", "the thread the call belongs to (a close: the one that opened the file)", func(s *syscall) int64 { return int64(s.c.Worker) }),
	intCol("flags", "the primary request's flags (on a read or write, 2^31: pages of a mapped file page faults brought in or made dirty, no system call)",
		func(s *syscall) int64 { return int64(s.c.Flags) }),
	intCol("mode", "the primary request's mode", func(s *syscall) int64 { return int64(s.c.Mode) }),
	nonZero("handle2", "copy_file_range's output handle", func(s *syscall) int64 { return int64(s.c.Handle2) }),
	optInt("file_offset2", "copy_file_range's output offset", func(s *syscall) (int64, bool) {
		return s.c.Offset2, s.kind == fold.SysCopyFileRange && s.n.version >= trace.Version2
	}),
	nonZero("call_start_ns", "the system call's entry as the kernel saw it (recordings with the kernel's legs; NULL: not measured)",
		func(s *syscall) int64 { return s.c.CallStart }),
	nonZero("call_end_ns", "its return as the kernel saw it (NULL: not measured)", func(s *syscall) int64 { return s.c.CallEnd }),
	optInt("run_delay_ns", "how long the thread waited for a CPU before the call (NULL: not measured)", func(s *syscall) (int64, bool) {
		return s.c.RunDelay - 1, s.c.RunDelay > 0
	}),
	nonZero("woken_ns", "its last wake-up before the call (NULL: none, or not measured)", func(s *syscall) int64 { return s.c.WokenAt }),
	nonZero("waker", "the thread that woke it then (NULL: none, or not measured)", func(s *syscall) int64 { return int64(s.c.Waker) }),
	boolCol("passthrough", "a read or write kernel passthrough served, timed by the kernel in the application's thread", func(s *syscall) bool { return s.c.Passthrough }),
}, identityColumns(func(s *syscall) *identity { return s.n.id })...)
