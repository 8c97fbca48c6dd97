package main

import (
	"io"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// xop is one request, or one system call, as the fio and Perfetto exports take it.
type xop struct {
	kind            xkind
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
	requests        int // the requests a call stands for (0 for a request)
}

// xkind is what an xop does to the files fio's replay knows.
type xkind uint8

const (
	xOther    xkind = iota // nothing fio replays: metadata, directories
	xOpen                  // a file opened (open, create)
	xClose                 // a file closed (its release, or the close call)
	xRead                  // bytes read
	xWrite                 // bytes written
	xSync                  // fsync
	xDatasync              // fdatasync
	xAlloc                 // fallocate
	xCopy                  // copy_file_range: a read of the input, a write of the output
	xRename                // a name moved (path to path2)
	xLink                  // a name added for an existing file (path2 to path)
)

// requestKind returns the xkind of a request.
func requestKind(op trace.Op, flags uint32) xkind {
	switch op {
	case trace.OpOpen, trace.OpCreate:
		return xOpen
	case trace.OpRelease:
		return xClose
	case trace.OpRead:
		return xRead
	case trace.OpWrite:
		return xWrite
	case trace.OpFsync:
		if flags&trace.FsyncDatasync != 0 {
			return xDatasync
		}
		return xSync
	case trace.OpFallocate:
		return xAlloc
	case trace.OpCopyFileRange:
		return xCopy
	case trace.OpRename:
		return xRename
	case trace.OpLink:
		return xLink
	}
	return xOther
}

// callKind returns the xkind of a system call.
func callKind(c *fold.Call) xkind {
	switch c.Kind {
	case fold.Open:
		if !c.Dir && c.Rec != trace.OpTmpfile {
			return xOpen
		}
	case fold.Close:
		if c.Rec != trace.OpReleasedir {
			return xClose
		}
	case fold.Read, fold.Write, fold.Fsync, fold.Fallocate, fold.Copy, fold.Rename, fold.Link:
		return requestKind(c.Rec, c.Flags)
	}
	return xOther
}

// opStream yields a trace's requests (view requests) or system calls (view syscalls) in
// start order.
type opStream struct {
	r     *trace.Reader
	calls *callReader // view syscalls
	sort  trace.Sorter
	ended bool
	err   error // the error that ended the reading of r
	cur   xop
}

func newOpStream(r *trace.Reader, view string) *opStream {
	s := &opStream{r: r}
	if view == viewSyscalls {
		s.calls = newCallReader(r)
	}
	return s
}

// Next returns the next request or call, valid until the next call of Next, or io.EOF
// after the last. An error reading the trace (a *readError) comes after the requests or
// calls read before it.
func (s *opStream) Next() (*xop, error) {
	if s.calls != nil {
		for {
			c, err := s.calls.Next()
			if err != nil {
				return nil, err
			}
			sc, ok := c.Syscall()
			if !ok {
				continue // an implicit open: no call of the application's
			}
			tid := c.Tid
			if tid == 0 {
				tid = c.Worker
			}
			reqs := c.Requests()
			if s.calls.folder == nil {
				reqs = 0
			}
			s.cur = xop{
				kind: callKind(c), op: c.Rec, name: sc.String(), start: c.Start, dur: c.Time(),
				tid: tid, pid: c.Pid, path: c.Name, path2: c.Name2, handle: c.Handle, handle2: c.Handle2,
				offset: c.Offset, offset2: c.Offset2, size: c.Size, ret: c.Ret, flags: c.Flags,
				errno: c.Errno, requests: reqs,
			}
			return &s.cur, nil
		}
	}
	for !s.ended && !s.sort.Full() {
		ev, err := s.r.Next()
		if err != nil {
			s.ended = true
			if err != io.EOF {
				s.err = &readError{err} // after the requests read before it
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
	s.cur = xop{
		kind: requestKind(ev.Op, ev.Flags), op: ev.Op, name: ev.Op.String(), start: ev.Start, dur: ev.Dur,
		tid: ev.Tid, pid: ev.Pid, handle: ev.Handle, handle2: ev.Handle2, offset: ev.Offset,
		offset2: ev.Offset2, size: int64(ev.Size), ret: ev.Ret, flags: ev.Flags, errno: ev.Errno,
	}
	if ev.Path != 0 {
		s.cur.path = s.r.PathName(ev.Path)
	}
	if ev.Path2 != 0 {
		s.cur.path2 = s.r.PathName(ev.Path2)
	}
	return &s.cur, nil
}
