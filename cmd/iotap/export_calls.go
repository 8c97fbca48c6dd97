package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Export views: what one exported record stands for.
const (
	viewRequests = "requests" // a FUSE request, as recorded
	viewSyscalls = "syscalls" // a system call of the application, folded as the report folds them
)

// exportCallFields are the columns of `export --view syscalls`, in order: one record per
// system call the application made, found by folding the requests as the report and replay
// do (package trace/fold). A stable interface: never rename or reorder them; add new fields
// at the end.
//
//	syscall        the call's kind as the report's rows name it (open, stat, read, close, ...;
//	               fold.Syscall)
//	op             its primary request ("flush" for a close that flushed, "lookup" for a stat
//	               of a missing name)
//	start_ns       start of its first request, ns since the trace origin
//	time_ns        its time in the storage: the summed time of the requests it stands for
//	meta_ns        of which in metadata requests (lookups, getattr, open, flush, ...)
//	data_ns        of which in data requests (read, write, fsync, ...)
//	requests       the requests it stands for (0 in a replay's trace, whose events are calls)
//	path, path2    its paths relative to the traced root (path2: rename or link target,
//	               symlink text, copy output)
//	handle         the file handle it used; handle2 copy_file_range's output handle
//	offset, size   offset and requested bytes (read, write, fallocate, copy input; truncate:
//	               the new size in offset)
//	ret            bytes done, or the size found (stat)
//	errno, errno_name  0 and "" on success
//	tid, pid       the thread that made the request, and its process
//	comm           that thread's command name
//	thread         the thread the call belongs to (a close: the one that opened the file)
//	flags, mode    the primary request's flags and mode, decimal
//	offset2        copy_file_range's output offset
//	call_start_ns, call_end_ns  the system call's entry and return as the kernel saw them
//	               (recordings with the kernel's legs; 0 when not measured)
//	run_delay_ns   how long the thread waited for a CPU before the call (-1: not measured)
//	woken_ns, waker  its last wake-up before the call, and by which thread (0: none)
var exportCallFields = []string{
	"syscall", "op", "start_ns", "time_ns", "meta_ns", "data_ns", "requests", "path", "path2",
	"handle", "offset", "size", "ret", "errno", "errno_name", "tid", "pid", "comm", "thread",
	"flags", "mode", "handle2", "offset2", "call_start_ns", "call_end_ns", "run_delay_ns",
	"woken_ns", "waker",
}

// exportCallStrings marks the columns of exportCallFields that JSON writes as strings.
var exportCallStrings = map[string]bool{"syscall": true, "op": true, "path": true, "path2": true,
	"errno_name": true, "comm": true}

// callReader yields the system calls of a trace in start order, folded as the report folds
// them; a replay's trace records calls already, one per event.
type callReader struct {
	r      *trace.Reader
	folder *fold.Folder // nil for a replay's trace
	sort   trace.Sorter // a replay's events, in start order
	call   fold.Call    // a replay's current call
	ended  bool         // r is at its end
	err    error        // r's error, returned once the calls before it are out
}

func newCallReader(r *trace.Reader) *callReader {
	c := &callReader{r: r}
	if r.Header().Kind != "replay" {
		c.folder = fold.New(r, r.Header(), fold.Options{})
	}
	return c
}

// Next returns the next call, valid until the next call of Next, or io.EOF after the last.
// An error reading the trace (a *readError) comes after the calls folded before it.
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
			c.call = replayCall(c.r, c.sort.Pop())
			return &c.call, nil
		} else if c.ended {
			return nil, c.end()
		}
		ev, err := c.r.Next()
		if err != nil {
			c.ended = true
			if err != io.EOF {
				c.err = &readError{err}
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

// callRecord fills rec (len(exportCallFields)) with call c's fields.
func (x *exporter) callRecord(c *fold.Call, s fold.Syscall, replay bool, rec []string) {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	reqs := uint64(c.Requests())
	if replay {
		reqs = 0
	}
	runDelay := int64(-1)
	if c.RunDelay > 0 {
		runDelay = c.RunDelay - 1
	}
	rec[0] = s.String()
	rec[1] = c.Rec.String()
	rec[2] = i(c.Start)
	rec[3] = i(c.Time())
	rec[4] = i(c.MetaTime())
	rec[5] = i(c.DataTime())
	rec[6] = u(reqs)
	rec[7] = c.Name
	rec[8] = c.Name2
	rec[9] = u(c.Handle)
	rec[10] = i(c.Offset)
	rec[11] = i(c.Size)
	rec[12] = i(c.Ret)
	rec[13] = u(uint64(c.Errno))
	rec[14] = trace.ErrnoName(c.Errno)
	rec[15] = u(uint64(c.Tid))
	rec[16] = u(uint64(c.Pid))
	rec[17] = x.commOf(c.Tid)
	rec[18] = u(uint64(c.Worker))
	rec[19] = u(uint64(c.Flags))
	rec[20] = u(uint64(c.Mode))
	rec[21] = u(c.Handle2)
	rec[22] = i(c.Offset2)
	rec[23] = i(c.CallStart)
	rec[24] = i(c.CallEnd)
	rec[25] = i(runDelay)
	rec[26] = i(c.WokenAt)
	rec[27] = u(uint64(c.Waker))
}

// appendJSONRecord appends rec as one JSON object of fields (strings where strs says so,
// numbers otherwise) and a newline.
func appendJSONRecord(b []byte, fields []string, strs map[string]bool, rec []string) []byte {
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f...)
		b = append(b, '"', ':')
		if strs[f] {
			b = appendJSONString(b, rec[i])
		} else {
			b = append(b, rec[i]...)
		}
	}
	return append(b, "}\n"...)
}

// exportCalls writes the system calls of r to w as JSON lines or CSV (format). stop is
// asked before each call whether to stop (a cancelled context).
func exportCalls(r *trace.Reader, x *exporter, format string, w io.Writer, stop func(n int) error) error {
	cr := newCallReader(r)
	replay := cr.folder == nil
	rec := make([]string, len(exportCallFields))
	var cw *csv.Writer
	var line []byte
	if format == "csv" {
		cw = csv.NewWriter(w)
		if err := cw.Write(exportCallFields); err != nil {
			return writeError(err)
		}
	}
	for n := 0; ; n++ {
		if err := stop(n); err != nil {
			return err
		}
		c, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		s, ok := c.Syscall()
		if !ok {
			continue // an implicit open: no call of the application's
		}
		x.callRecord(c, s, replay, rec)
		if cw != nil {
			err = cw.Write(rec)
		} else {
			line = appendJSONRecord(line[:0], exportCallFields, exportCallStrings, rec)
			_, err = w.Write(line)
		}
		if err != nil {
			return writeError(err)
		}
	}
	if cw != nil {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return writeError(err)
		}
	}
	return nil
}

// writeError wraps an error writing the export.
func writeError(err error) error { return fmt.Errorf("write output: %w", err) }

// readError is an error reading the trace, as opposed to writing the export: with --strict
// a damaged chunk ends the export as a damaged trace.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
