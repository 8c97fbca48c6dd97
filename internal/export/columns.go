package export

import (
	"strconv"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Type is the type of a column's values.
type Type uint8

// Column types.
const (
	Int    Type = iota // a signed 64-bit integer
	Uint               // an unsigned 64-bit integer (Value.Int holds its bits)
	String             // bytes: a name, not necessarily UTF-8
)

// Column is one column of a view: its name and type, and what it holds.
type Column struct {
	Name string
	Type Type
	Doc  string
}

// Value is one cell of a row.
type Value struct {
	Int int64 // Int and Uint columns (a Uint's bits)
	Str string
}

// Text returns v as text: a number in decimal, a string as it is.
func (v Value) Text(t Type) string {
	switch t {
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Uint:
		return strconv.FormatUint(uint64(v.Int), 10)
	}
	return v.Str
}

// column is a column of the view whose records are R, with the function that gives its
// value for a record.
type column[R any] struct {
	Column
	get func(r *R) Value
}

func intCol[R any](name, doc string, get func(r *R) int64) column[R] {
	return column[R]{Column{name, Int, doc}, func(r *R) Value { return Value{Int: get(r)} }}
}

func uintCol[R any](name, doc string, get func(r *R) uint64) column[R] {
	return column[R]{Column{name, Uint, doc}, func(r *R) Value { return Value{Int: int64(get(r))} }}
}

func strCol[R any](name, doc string, get func(r *R) string) column[R] {
	return column[R]{Column{name, String, doc}, func(r *R) Value { return Value{Str: get(r)} }}
}

// columnsOf returns the columns of a table.
func columnsOf[R any](table []column[R]) []Column {
	out := make([]Column, len(table))
	for i, c := range table {
		out[i] = c.Column
	}
	return out
}

// fill sets row (one Value per column of table) to record r's values.
func fill[R any](table []column[R], r *R, row []Value) {
	for i := range table {
		row[i] = table[i].get(r)
	}
}

// request is one record of the requests view: an event and the trace's names.
type request struct {
	ev *trace.Event
	n  *names
}

// requestColumns are the columns of the requests view, in order. They are a stable
// interface: never rename or reorder them; add new ones at the end.
var requestColumns = []column[request]{
	strCol("op", `operation name ("read", "copy_file_range", see trace.Op)`, func(r *request) string { return r.ev.Op.String() }),
	intCol("start_ns", "start, ns since the trace origin", func(r *request) int64 { return r.ev.Start }),
	intCol("dur_ns", "duration, ns", func(r *request) int64 { return r.ev.Dur }),
	strCol("path", `path of the object relative to the traced root ("" = the root itself, "?N" = path id N without a record)`,
		func(r *request) string { return r.n.r.PathName(r.ev.Path) }),
	strCol("path2", `second path: rename destination, link source, symlink target text, copy_file_range output ("" when none)`,
		func(r *request) string { return r.n.path(r.ev.Path2) }),
	uintCol("node", "FUSE node id", func(r *request) uint64 { return r.ev.Node }),
	uintCol("handle", "file handle", func(r *request) uint64 { return r.ev.Handle }),
	intCol("offset", "offset (read, write, readdir, lseek, fallocate; copy_file_range input; setattr new size)",
		func(r *request) int64 { return r.ev.Offset }),
	uintCol("size", "requested bytes", func(r *request) uint64 { return uint64(r.ev.Size) }),
	intCol("ret", "bytes done, resulting offset (lseek), or size of the object found (lookup)", func(r *request) int64 { return r.ev.Ret }),
	uintCol("errno", "0 on success, else the errno returned to the caller", func(r *request) uint64 { return uint64(r.ev.Errno) }),
	strCol("errno_name", `symbolic errno ("ENOENT"), "" on success`, func(r *request) string { return trace.ErrnoName(r.ev.Errno) }),
	uintCol("tid", "calling thread", func(r *request) uint64 { return uint64(r.ev.Tid) }),
	uintCol("pid", "calling process", func(r *request) uint64 { return uint64(r.ev.Pid) }),
	strCol("comm", `the thread's command name from the process table ("" if unknown)`, func(r *request) string { return r.n.comm(r.ev.Tid) }),
	uintCol("uid", "caller's user id", func(r *request) uint64 { return uint64(r.ev.Uid) }),
	uintCol("gid", "caller's group id", func(r *request) uint64 { return uint64(r.ev.Gid) }),
	uintCol("flags", "op flags (open flags, rename flags, setattr mask, ...), decimal", func(r *request) uint64 { return uint64(r.ev.Flags) }),
	uintCol("mode", "file mode (create/mkdir/mknod; found object for lookups), decimal", func(r *request) uint64 { return uint64(r.ev.Mode) }),
	uintCol("node2", "second node id (node returned by lookup/create/mkdir/..., copy output)", func(r *request) uint64 { return r.ev.Node2 }),
	uintCol("handle2", "second handle (copy_file_range output)", func(r *request) uint64 { return r.ev.Handle2 }),
	intCol("offset2", "copy_file_range output offset (0 for other ops, and in format-version-1 traces, which did not record it)",
		func(r *request) int64 { return r.ev.Offset2 }),
	uintCol("unique", "FUSE request id (0 in replays and traces before format version 4)", func(r *request) uint64 { return r.ev.Unique }),
	intCol("queued_ns", "the kernel queued the request for the layer, ns since the trace origin (0: not measured)",
		func(r *request) int64 { return r.ev.Queued }),
	intCol("done_ns", "the kernel completed the request (0: not measured)", func(r *request) int64 { return r.ev.Done }),
	intCol("call_start_ns", "the application's system call that sent the request entered the kernel (0: not measured)",
		func(r *request) int64 { return r.ev.CallStart }),
	intCol("call_end_ns", "that call returned, on the call's last request only (0: not measured)", func(r *request) int64 { return r.ev.CallEnd }),
	uintCol("call_nr", "that call's number (Linux, the recording machine's architecture; 0: not measured)",
		func(r *request) uint64 { return uint64(r.ev.CallNr) }),
	intCol("run_delay_ns", "how long the thread waited for a CPU between its previous call that reached the mount and this one (-1: not measured)",
		func(r *request) int64 { return runDelay(r.ev) }),
	intCol("woken_ns", "when the thread was last woken between those two calls (0: it was not blocked, or not measured)",
		func(r *request) int64 { return r.ev.WokenAt }),
	uintCol("waker", "the job's thread that woke it then (0: an interrupt, or another process)", func(r *request) uint64 { return uint64(r.ev.Waker) }),
}

// runDelay is the run_delay_ns of ev: -1 when not measured.
func runDelay(ev *trace.Event) int64 {
	if d, ok := ev.ThinkRunDelay(); ok {
		return int64(d)
	}
	return -1
}

// syscall is one record of the syscalls view: a call the application made, found by
// folding the requests as the report and replay do (package trace/fold).
type syscall struct {
	c      *fold.Call
	kind   fold.Syscall
	replay bool // a replay's trace, whose events are calls
	n      *names
}

// syscallColumns are the columns of the syscalls view, in order. A stable interface: never
// rename or reorder them; add new ones at the end.
var syscallColumns = []column[syscall]{
	strCol("syscall", "the call's kind as the report's rows name it (open, stat, read, close, ...; fold.Syscall)",
		func(s *syscall) string { return s.kind.String() }),
	strCol("op", `its primary request ("flush" for a close that flushed, "lookup" for a stat of a missing name)`,
		func(s *syscall) string { return s.c.Rec.String() }),
	intCol("start_ns", "start of its first request, ns since the trace origin", func(s *syscall) int64 { return s.c.Start }),
	intCol("time_ns", "its time in the storage: the summed time of the requests it stands for", func(s *syscall) int64 { return s.c.Time() }),
	intCol("meta_ns", "of which in metadata requests (lookups, getattr, open, flush, ...)", func(s *syscall) int64 { return s.c.MetaTime() }),
	intCol("data_ns", "of which in data requests (read, write, fsync, ...)", func(s *syscall) int64 { return s.c.DataTime() }),
	uintCol("requests", "the requests it stands for (0 in a replay's trace, whose events are calls)", func(s *syscall) uint64 {
		if s.replay {
			return 0
		}
		return uint64(s.c.Requests())
	}),
	strCol("path", "its path relative to the traced root", func(s *syscall) string { return s.c.Name }),
	strCol("path2", "its second path: rename or link target, symlink text, copy output", func(s *syscall) string { return s.c.Name2 }),
	uintCol("handle", "the file handle it used", func(s *syscall) uint64 { return s.c.Handle }),
	intCol("offset", "offset (read, write, fallocate, copy input; truncate: the new size)", func(s *syscall) int64 { return s.c.Offset }),
	intCol("size", "requested bytes", func(s *syscall) int64 { return s.c.Size }),
	intCol("ret", "bytes done, or the size found (stat)", func(s *syscall) int64 { return s.c.Ret }),
	uintCol("errno", "0 on success, else the errno", func(s *syscall) uint64 { return uint64(s.c.Errno) }),
	strCol("errno_name", `symbolic errno, "" on success`, func(s *syscall) string { return trace.ErrnoName(s.c.Errno) }),
	uintCol("tid", "the thread that made the request", func(s *syscall) uint64 { return uint64(s.c.Tid) }),
	uintCol("pid", "its process", func(s *syscall) uint64 { return uint64(s.c.Pid) }),
	strCol("comm", "that thread's command name", func(s *syscall) string { return s.n.comm(s.c.Tid) }),
	uintCol("thread", "the thread the call belongs to (a close: the one that opened the file)", func(s *syscall) uint64 { return uint64(s.c.Worker) }),
	uintCol("flags", "the primary request's flags, decimal", func(s *syscall) uint64 { return uint64(s.c.Flags) }),
	uintCol("mode", "the primary request's mode, decimal", func(s *syscall) uint64 { return uint64(s.c.Mode) }),
	uintCol("handle2", "copy_file_range's output handle", func(s *syscall) uint64 { return s.c.Handle2 }),
	intCol("offset2", "copy_file_range's output offset", func(s *syscall) int64 { return s.c.Offset2 }),
	intCol("call_start_ns", "the system call's entry as the kernel saw it (recordings with the kernel's legs; 0 when not measured)",
		func(s *syscall) int64 { return s.c.CallStart }),
	intCol("call_end_ns", "the system call's return as the kernel saw it (0 when not measured)", func(s *syscall) int64 { return s.c.CallEnd }),
	intCol("run_delay_ns", "how long the thread waited for a CPU before the call (-1: not measured)", func(s *syscall) int64 {
		if s.c.RunDelay > 0 {
			return s.c.RunDelay - 1
		}
		return -1
	}),
	intCol("woken_ns", "its last wake-up before the call (0: none)", func(s *syscall) int64 { return s.c.WokenAt }),
	uintCol("waker", "the thread that woke it then (0: none)", func(s *syscall) uint64 { return uint64(s.c.Waker) }),
}

// names resolves a trace's path ids and thread ids, remembering the threads' names.
type names struct {
	r     *trace.Reader
	comms map[uint32]string
}

func newNames(r *trace.Reader) *names { return &names{r: r, comms: map[uint32]string{}} }

func (n *names) comm(tid uint32) string {
	if c, ok := n.comms[tid]; ok {
		return c
	}
	p, _ := n.r.Process(tid)
	n.comms[tid] = p.Comm
	return p.Comm
}

// path returns the name of path id, "" for none (0).
func (n *names) path(id uint32) string {
	if id == 0 {
		return ""
	}
	return n.r.PathName(id)
}
