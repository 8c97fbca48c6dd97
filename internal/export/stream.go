package export

import (
	"io"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// events yields a trace's events in file order, and gives each to tap (when set) as it
// passes: the Perfetto format's counters aggregate the requests whatever the view.
type events struct {
	r   *trace.Reader
	tap func(ev *trace.Event)
}

// Next returns the next event, io.EOF after the last, or a *ReadError.
func (s *events) Next() (*trace.Event, error) {
	ev, err := s.r.Next()
	if err != nil {
		if err == io.EOF {
			return nil, err
		}
		return nil, &ReadError{err}
	}
	if s.tap != nil {
		s.tap(ev)
	}
	return ev, nil
}

// callReader yields the system calls of a trace in start order, folded as the report folds
// them; a replay's trace records calls already, one per event.
type callReader struct {
	src    *events
	folder *fold.Folder // nil for a replay's trace
	sort   trace.Sorter // a replay's events, in start order
	call   fold.Call    // a replay's current call
	ended  bool         // src is at its end
	err    error        // src's error, returned once the calls before it are out
}

func newCallReader(src *events) *callReader {
	c := &callReader{src: src}
	if h := src.r.Header(); h.Kind != "replay" {
		c.folder = fold.New(src.r, h, fold.Options{})
	}
	return c
}

// replay reports whether the trace is a replay's, whose events are calls.
func (c *callReader) replay() bool { return c.folder == nil }

// Next returns the next call, valid until the next call of Next, or io.EOF after the last.
// An error reading the trace (a *ReadError) comes after the calls folded before it.
func (c *callReader) Next() (*fold.Call, error) {
	for {
		if c.folder != nil {
			if call, ok := c.folder.Next(); ok {
				return call, nil
			}
			if c.folder.Ended() {
				return nil, c.end()
			}
		} else if c.sort.Len() > 0 && (c.ended || c.sort.Full()) {
			c.call = replayCall(c.src.r, c.sort.Pop())
			return &c.call, nil
		} else if c.ended {
			return nil, c.end()
		}
		ev, err := c.src.Next()
		if err != nil {
			c.ended = true
			if err != io.EOF {
				c.err = err
			}
			if c.folder != nil {
				c.folder.End()
			}
			continue
		}
		if c.folder != nil {
			c.folder.Add(ev)
		} else {
			c.sort.Push(ev)
		}
	}
}

func (c *callReader) end() error {
	if c.err != nil {
		return c.err
	}
	return io.EOF
}

// replayCall returns the call an event of a replay's trace stands for.
func replayCall(r *trace.Reader, ev *trace.Event) fold.Call {
	c := fold.Call{
		Rec: ev.Op, Worker: ev.Tid, Tid: ev.Tid, Pid: ev.Pid, Start: ev.Start, Dur: ev.Dur,
		PathID: ev.Path, PathID2: ev.Path2, Handle: ev.Handle, Handle2: ev.Handle2, Slot: -1, Slot2: -1,
		Offset: ev.Offset, Offset2: ev.Offset2, Size: int64(ev.Size), Flags: ev.Flags, Mode: ev.Mode,
		Errno: ev.Errno, Ret: ev.Ret, Events: 1, Reqs: 1,
	}
	if ev.Path != 0 {
		c.Name = r.PathName(ev.Path)
	}
	if ev.Path2 != 0 {
		c.Name2 = r.PathName(ev.Path2)
	}
	return c
}

// syscalls yields the calls of the syscalls view: the folded calls the application made
// (an implicit open, which no call of the application's stands for, is left out).
type syscalls struct {
	calls *callReader
	cur   syscall
}

func newSyscalls(src *events, n *names) *syscalls {
	s := &syscalls{calls: newCallReader(src)}
	s.cur.replay, s.cur.n = s.calls.replay(), n
	return s
}

// Next returns the next call, valid until the next call of Next, io.EOF after the last,
// or a *ReadError after the calls read before it.
func (s *syscalls) Next() (*syscall, error) {
	for {
		c, err := s.calls.Next()
		if err != nil {
			return nil, err
		}
		k, ok := c.Syscall()
		if !ok {
			continue // an implicit open: no call of the application's
		}
		s.cur.c, s.cur.kind = *c, k
		if s.cur.n != nil {
			s.cur.proc = s.cur.n.proc(c.Tid)
		}
		return &s.cur, nil
	}
}

// action is what a request or call does to the files fio's replay knows.
type action uint8

const (
	actOther    action = iota // nothing fio replays: metadata, directories
	actOpen                   // a file opened (open, create)
	actClose                  // a file closed (its release, or the close call)
	actRead                   // bytes read
	actWrite                  // bytes written
	actSync                   // fsync
	actDatasync               // fdatasync
	actAlloc                  // fallocate
	actCopy                   // copy_file_range: a read of the input, a write of the output
	actRename                 // a name moved (path to path2)
	actLink                   // a name added for an existing file (path2 to path)
)

// requestAction returns the action of a request.
func requestAction(op trace.Op, flags uint32) action {
	switch op {
	case trace.OpOpen, trace.OpCreate:
		return actOpen
	case trace.OpRelease:
		return actClose
	case trace.OpRead:
		return actRead
	case trace.OpWrite:
		return actWrite
	case trace.OpFsync:
		if flags&trace.FsyncDatasync != 0 {
			return actDatasync
		}
		return actSync
	case trace.OpFallocate:
		return actAlloc
	case trace.OpCopyFileRange:
		return actCopy
	case trace.OpRename:
		return actRename
	case trace.OpLink:
		return actLink
	}
	return actOther
}

// callAction returns the action of a system call.
func callAction(c *fold.Call) action {
	switch c.Kind {
	case fold.Open:
		if !c.Dir && c.Rec != trace.OpTmpfile {
			return actOpen
		}
	case fold.Close:
		if c.Rec != trace.OpReleasedir {
			return actClose
		}
	case fold.Read, fold.Write, fold.Fsync, fold.Fallocate, fold.Copy, fold.Rename, fold.Link:
		return requestAction(c.Rec, c.Flags)
	}
	return actOther
}

// span is one request, or one system call, in start order: what the fio and Perfetto
// formats take, whichever the view.
type span struct {
	act             action
	op              trace.Op // the request, or the call's primary request
	name            string   // what it is: the request's op, or the call's kind (fold.Syscall)
	start, dur      int64    // ns; dur: the request's, or the call's time in the storage
	tid, pid        uint32
	path, path2     string
	handle, handle2 uint64
	offset, offset2 int64
	size, ret       int64
	flags           uint32
	errno           uint16
	requests        int // the requests a call stands for (0 for a request, and in a replay's trace)
}

// spans yields a trace's requests (view requests) or system calls (view syscalls) in
// start order.
type spans struct {
	src   *events
	calls *syscalls // view syscalls
	sort  trace.Sorter
	ended bool
	err   error // the error that ended the reading of src
	cur   span
}

func newSpans(src *events, view string) *spans {
	s := &spans{src: src}
	if view == ViewSyscalls {
		s.calls = newSyscalls(src, nil)
	}
	return s
}

// Next returns the next request or call, valid until the next call of Next, or io.EOF
// after the last. An error reading the trace (a *ReadError) comes after the requests or
// calls read before it.
func (s *spans) Next() (*span, error) {
	if s.calls != nil {
		sc, err := s.calls.Next()
		if err != nil {
			return nil, err
		}
		c := &sc.c
		tid := c.Tid
		if tid == 0 {
			tid = c.Worker
		}
		reqs := c.Requests()
		if sc.replay {
			reqs = 0
		}
		s.cur = span{
			act: callAction(c), op: c.Rec, name: sc.kind.String(), start: c.Start, dur: c.Time(),
			tid: tid, pid: c.Pid, path: c.Name, path2: c.Name2, handle: c.Handle, handle2: c.Handle2,
			offset: c.Offset, offset2: c.Offset2, size: c.Size, ret: c.Ret, flags: c.Flags,
			errno: c.Errno, requests: reqs,
		}
		return &s.cur, nil
	}
	for !s.ended && !s.sort.Full() {
		ev, err := s.src.Next()
		if err != nil {
			s.ended = true
			if err != io.EOF {
				s.err = err // after the requests read before it
			}
			break
		}
		s.sort.Push(ev)
	}
	if s.sort.Len() == 0 {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	ev := s.sort.Pop()
	s.cur = span{
		act: requestAction(ev.Op, ev.Flags), op: ev.Op, name: ev.Op.String(), start: ev.Start, dur: ev.Dur,
		tid: ev.Tid, pid: ev.Pid, handle: ev.Handle, handle2: ev.Handle2, offset: ev.Offset,
		offset2: ev.Offset2, size: int64(ev.Size), ret: ev.Ret, flags: ev.Flags, errno: ev.Errno,
	}
	if ev.Path != 0 {
		s.cur.path = s.src.r.PathName(ev.Path)
	}
	if ev.Path2 != 0 {
		s.cur.path2 = s.src.r.PathName(ev.Path2)
	}
	return &s.cur, nil
}
