package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// exportCommands returns the export subcommand.
func exportCommands() []*command {
	return []*command{
		{
			name:    "export",
			summary: "export a trace as JSON lines or CSV (stable field names), a fio iolog or Perfetto JSON",
			usage:   "[flags] TRACE",
			setup:   withOptions(runExport),
		},
	}
}

// exportFields are the exported columns, in order. They are a stable interface: never
// rename or reorder them; add new fields at the end.
//
//	op          operation name ("read", "copy_file_range", see trace.Op)
//	start_ns    start, ns since the trace origin
//	dur_ns      duration, ns
//	path        path of the object relative to the traced root ("" = the root itself,
//	            "?N" = path id N without a record)
//	path2       second path: rename destination, link source, symlink target text,
//	            copy_file_range output ("" when none)
//	node        FUSE node id
//	handle      file handle
//	offset      offset (read, write, readdir, lseek, fallocate; copy_file_range input;
//	            setattr new size)
//	size        requested bytes
//	ret         bytes done, resulting offset (lseek), or size of the object found (lookup)
//	errno       0 on success, else the errno returned to the caller
//	errno_name  symbolic errno ("ENOENT"), "" on success
//	tid, pid    calling thread and process
//	comm        the thread's command name from the process table ("" if unknown)
//	uid, gid    caller credentials
//	flags       op flags (open flags, rename flags, setattr mask, ...), decimal
//	mode        file mode (create/mkdir/mknod; found object for lookups), decimal
//	node2       second node id (node returned by lookup/create/mkdir/..., copy output)
//	handle2     second handle (copy_file_range output)
//	offset2     copy_file_range output offset (0 for other ops, and in format-version-1
//	            traces, which did not record it)
//	unique      FUSE request id (0 in replays and traces before format version 4)
//	queued_ns   the kernel queued the request for the layer, ns since the trace origin
//	done_ns     the kernel completed the request
//	call_start_ns  the application's system call that sent the request entered the kernel
//	call_end_ns    that call returned (on the call's last request only)
//	call_nr     that call's number (Linux, the recording machine's architecture)
//	            The last five are 0 where the kernel's view was not measured (trace
//	            header legs other than "kernel"); see trace.Event.
//	run_delay_ns   how long the thread waited for a CPU between its previous call that
//	            reached the mount and this one (-1: not measured)
//	woken_ns    when the thread was last woken between those two calls (0: it was not
//	            blocked, or not measured)
//	waker       the job's thread that woke it then (0: an interrupt, or another process)
//
// Names are bytes, not necessarily UTF-8. CSV writes them unchanged. JSON strings must be
// UTF-8, so a byte that is not part of a valid UTF-8 sequence, 0xXY, is written as the
// escape \udcXY (a lone low surrogate, as Python's surrogateescape does): no UTF-8 name
// holds one, so every name reads back to its bytes, and \xff and \xfe stay apart. In
// Python: json.loads(line)["path"].encode("utf-8", "surrogateescape").
var exportFields = []string{
	"op", "start_ns", "dur_ns", "path", "path2", "node", "handle", "offset", "size", "ret",
	"errno", "errno_name", "tid", "pid", "comm", "uid", "gid", "flags", "mode", "node2", "handle2",
	"offset2", "unique", "queued_ns", "done_ns", "call_start_ns", "call_end_ns", "call_nr", "run_delay_ns",
	"woken_ns", "waker",
}

type exportOptions struct {
	Format    string
	Output    string
	Strict    bool
	View      string
	FioSetup  string
	Anonymize bool
	Key       anonymizeKeyOptions
	traceStore
}

func (o *exportOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Format, "format", "jsonl", "output `format`: jsonl (one JSON object per line), csv (with a header row), "+
		"fio (fio's iolog version 3, for fio --read_iolog) or perfetto (Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing); "+
		"jsonl and csv fields, in order: "+strings.Join(exportFields, ",")+"; with --view syscalls: "+strings.Join(exportCallFields, ","))
	fs.StringVarP(&o.Output, "output", "o", "", "write to `file` instead of standard output")
	fs.BoolVar(&o.Strict, "strict", false, "stop at the first corrupt chunk instead of skipping it")
	fs.StringVar(&o.View, "view", viewRequests, "what a record is: requests (each FUSE request) or syscalls (the application's system calls, folded as report folds them)")
	fs.StringVar(&o.FioSetup, "fio-setup", "", "with --format fio, also write to `file` a shell script that prepares a directory for the iolog: it makes the directories of its files (fio makes files only) and links the names it changed")
	fs.BoolVar(&o.Anonymize, "anonymize", false, "replace names by keyed tokens as iotap anonymize does (without --key-file, with a random key that is not kept)")
	o.Key.AddFlags(fs)
	o.addStoreFlags(fs)
}

func runExport(ctx context.Context, e *env, o *exportOptions, args []string) (err error) {
	if err := o.check(args); err != nil {
		return err
	}
	if err := o.usedBy(args...); err != nil {
		return err
	}
	var key []byte
	if o.Anonymize {
		if key, _, err = o.Key.load(e, ""); err != nil {
			return err
		}
	}
	r, closeTrace, err := openTraceArg(ctx, e, args[0])
	if err != nil {
		return err
	}
	defer func() { _ = closeTrace() }() // read-only
	r.SetStrict(o.Strict)
	out, end, err := o.output(e)
	if err != nil {
		return err
	}
	defer func() { err = end(err) }()
	x := &exporter{r: r, comm: map[uint32]string{}}
	if o.Anonymize {
		// The events come from the trace's anonymised copy, made as they are read.
		var copied func() error
		if x.r, copied, err = anonymizedStream(ctx, r, key, o.Key.NoExtensions); err != nil {
			return err
		}
		defer func() { _ = copied() }() // after an early return: ends the copy
		x.cause = copied
	}
	stopped, err := x.export(ctx, e, out, o, args[0])
	if err != nil {
		return err
	}
	return exportOutcome(e, r, args[0], stopped)
}

// check checks export's flags and its argument, one trace that is not the output.
func (o *exportOptions) check(args []string) error {
	if len(args) != 1 {
		return usageErrorf("want exactly one trace, got %d arguments", len(args))
	}
	switch o.Format {
	case "jsonl", "csv", "fio", "perfetto":
	default:
		return usageErrorf("--format %q: want jsonl, csv, fio or perfetto", o.Format)
	}
	if o.View != viewRequests && o.View != viewSyscalls {
		return usageErrorf("--view %q: want requests or syscalls", o.View)
	}
	if o.FioSetup != "" && o.Format != "fio" {
		return usageErrorf("--fio-setup goes with --format fio")
	}
	if !o.Anonymize && (o.Key.File != "" || o.Key.NoExtensions) {
		return usageErrorf("--key-file and --no-extensions go with --anonymize")
	}
	for _, f := range []string{o.Output, o.FioSetup} {
		if f != "" && f != "-" && args[0] != "-" {
			in, ierr := os.Stat(args[0])
			out, oerr := os.Stat(f)
			if ierr == nil && oerr == nil && os.SameFile(in, out) {
				return usageErrorf("%s is the trace itself", f)
			}
		}
	}
	return nil
}

// output returns where the export goes, --output or standard output, and end, which ends
// it given the export's error and returns the command's: a file is closed (a failure to
// close is the error if there was none), and a closed pipe on standard output is no error.
func (o *exportOptions) output(e *env) (out io.Writer, end func(error) error, err error) {
	if o.Output != "" && o.Output != "-" {
		file, err := private.OpenFile(o.Output, os.O_WRONLY|os.O_TRUNC)
		if err != nil {
			return nil, nil, usageErrorf("create output: %v", err)
		}
		return file, func(err error) error {
			if cerr := file.Close(); cerr != nil && err == nil {
				return fmt.Errorf("write output: %w", cerr)
			}
			return err
		}, nil
	}
	// A reader that stops early (iotap export T | head) closes the pipe: with SIGPIPE
	// caught, the write fails with EPIPE instead of killing the process, and the export
	// ends quietly with exit status 0. Caught, not ignored: a caught signal is back to its
	// default in the programs other commands start.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	return e.stdout, func(err error) error {
		signal.Stop(sigpipe)
		if errors.Is(err, syscall.EPIPE) {
			return nil
		}
		return err
	}, nil
}

// export writes every request (or, with --view syscalls, every system call) of the trace
// (named name) to out, in o.Format. Under o.Strict it stops at the first damaged chunk, and
// returns that damage as stopped.
func (x *exporter) export(ctx context.Context, e *env, out io.Writer, o *exportOptions, name string) (stopped, err error) {
	bw := bufio.NewWriterSize(out, 1<<16)
	stop := func(n int) error {
		if n&0xffff == 0 {
			return ctx.Err()
		}
		return nil
	}
	switch {
	case o.Format == "fio":
		err = exportFio(e, x.r, o, bw)
	case o.Format == "perfetto":
		err = exportPerfetto(e, x.r, o.View, bw, stop)
	case o.View == viewSyscalls:
		err = exportCalls(x.r, x, o.Format, bw, stop)
	default:
		err = x.exportRequests(o.Format, bw, stop)
	}
	var re *readError
	if errors.As(err, &re) {
		if x.cause != nil {
			if c := x.cause(); c != nil {
				re = &readError{c} // why the stream of the copy ended
			}
		}
		if !o.Strict || (!errors.Is(re.err, trace.ErrCorrupt) && !errors.Is(re.err, trace.ErrTruncated)) {
			return nil, fmt.Errorf("read trace %s: %w", name, re.err)
		}
		stopped, err = re.err, nil
	}
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, writeError(err)
	}
	return stopped, nil
}

// exportRequests writes the trace's events to bw in format, one per FUSE request. stop is
// asked before each whether to stop (a cancelled context). An error reading the trace is a
// *readError, returned once the events read before it are written.
func (x *exporter) exportRequests(format string, bw *bufio.Writer, stop func(n int) error) error {
	write, flush, err := x.encoder(format, bw)
	if err != nil {
		return writeError(err)
	}
	for n := 0; ; n++ {
		if err := stop(n); err != nil {
			return err
		}
		ev, err := x.r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return writeError(ferr)
			}
			return &readError{err}
		}
		if err := write(ev); err != nil {
			return writeError(err)
		}
	}
	if err := flush(); err != nil {
		return writeError(err)
	}
	return nil
}

// encoder returns the function that writes an event to bw in format (jsonl or csv, whose
// header it writes first), and the one that flushes bw.
func (x *exporter) encoder(format string, bw *bufio.Writer) (write func(*trace.Event) error, flush func() error, err error) {
	if format != "csv" {
		var line []byte
		write = func(ev *trace.Event) error {
			line = x.appendJSON(line[:0], ev)
			_, err := bw.Write(line)
			return err
		}
		return write, bw.Flush, nil
	}
	cw := csv.NewWriter(bw)
	if err := cw.Write(exportFields); err != nil {
		return nil, nil, err
	}
	rec := make([]string, len(exportFields))
	write = func(ev *trace.Event) error {
		x.record(ev, rec)
		return cw.Write(rec)
	}
	flush = func() error {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		return bw.Flush()
	}
	return write, flush, nil
}

// exportOutcome is what export leaves out of the trace r (named name): the events its
// recorder dropped, and its damage, said on stderr too (stopped: the damage --strict
// stopped at).
func exportOutcome(e *env, r *trace.Reader, name string, stopped error) error {
	var dropped error
	if f, ok := r.Footer(); ok {
		dropped = droppedError(nonEmpty(droppedNote(name, f)))
	}
	d := r.Damage()
	if len(d) == 0 {
		return dropped
	}
	var msg strings.Builder
	for _, x := range d {
		fmt.Fprintf(&msg, "iotap export: %s: damaged: %s\n", termsafe.Name(name), termsafe.Text(x.Error()))
	}
	_, _ = io.WriteString(e.stderr, msg.String()) // diagnostics: the exit code says it too
	if stopped != nil {
		return errors.Join(fmt.Errorf("%w: %s: stopped at the first damaged chunk (--strict)", errDamaged, name), dropped)
	}
	return errors.Join(fmt.Errorf("%w: %s (the export holds every readable event)", errDamaged, name), dropped)
}

// exporter turns events into export records, resolving paths and thread names.
type exporter struct {
	r    *trace.Reader
	comm map[uint32]string
	// cause, when r is a stream made as it is read (export --anonymize), waits for its end
	// and returns the error that ended it early, the one to report.
	cause func() error
}

func (x *exporter) commOf(tid uint32) string {
	if c, ok := x.comm[tid]; ok {
		return c
	}
	p, _ := x.r.Process(tid)
	x.comm[tid] = p.Comm
	return p.Comm
}

func (x *exporter) path2(ev *trace.Event) string {
	if ev.Path2 == 0 {
		return ""
	}
	return x.r.PathName(ev.Path2)
}

func (x *exporter) record(ev *trace.Event, rec []string) {
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	rec[0] = ev.Op.String()
	rec[1] = i(ev.Start)
	rec[2] = i(ev.Dur)
	rec[3] = x.r.PathName(ev.Path)
	rec[4] = x.path2(ev)
	rec[5] = u(ev.Node)
	rec[6] = u(ev.Handle)
	rec[7] = i(ev.Offset)
	rec[8] = u(uint64(ev.Size))
	rec[9] = i(ev.Ret)
	rec[10] = u(uint64(ev.Errno))
	rec[11] = trace.ErrnoName(ev.Errno)
	rec[12] = u(uint64(ev.Tid))
	rec[13] = u(uint64(ev.Pid))
	rec[14] = x.commOf(ev.Tid)
	rec[15] = u(uint64(ev.Uid))
	rec[16] = u(uint64(ev.Gid))
	rec[17] = u(uint64(ev.Flags))
	rec[18] = u(uint64(ev.Mode))
	rec[19] = u(ev.Node2)
	rec[20] = u(ev.Handle2)
	rec[21] = i(ev.Offset2)
	rec[22] = u(ev.Unique)
	rec[23] = i(ev.Queued)
	rec[24] = i(ev.Done)
	rec[25] = i(ev.CallStart)
	rec[26] = i(ev.CallEnd)
	rec[27] = u(uint64(ev.CallNr))
	rec[28] = i(runDelayField(ev))
	rec[29] = i(ev.WokenAt)
	rec[30] = u(uint64(ev.Waker))
}

// runDelayField is the run_delay_ns field of ev: -1 when not measured.
func runDelayField(ev *trace.Event) int64 {
	if d, ok := ev.ThinkRunDelay(); ok {
		return int64(d)
	}
	return -1
}

// appendJSON appends one JSON object and a newline. Field order is exportFields.
func (x *exporter) appendJSON(b []byte, ev *trace.Event) []byte {
	b = append(b, `{"op":`...)
	b = appendJSONString(b, ev.Op.String())
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, ev.Start, 10)
	b = append(b, `,"dur_ns":`...)
	b = strconv.AppendInt(b, ev.Dur, 10)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, x.r.PathName(ev.Path))
	b = append(b, `,"path2":`...)
	b = appendJSONString(b, x.path2(ev))
	b = append(b, `,"node":`...)
	b = strconv.AppendUint(b, ev.Node, 10)
	b = append(b, `,"handle":`...)
	b = strconv.AppendUint(b, ev.Handle, 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, ev.Offset, 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendUint(b, uint64(ev.Size), 10)
	b = append(b, `,"ret":`...)
	b = strconv.AppendInt(b, ev.Ret, 10)
	b = append(b, `,"errno":`...)
	b = strconv.AppendUint(b, uint64(ev.Errno), 10)
	b = append(b, `,"errno_name":`...)
	b = appendJSONString(b, trace.ErrnoName(ev.Errno))
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(ev.Tid), 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(ev.Pid), 10)
	b = append(b, `,"comm":`...)
	b = appendJSONString(b, x.commOf(ev.Tid))
	b = append(b, `,"uid":`...)
	b = strconv.AppendUint(b, uint64(ev.Uid), 10)
	b = append(b, `,"gid":`...)
	b = strconv.AppendUint(b, uint64(ev.Gid), 10)
	b = append(b, `,"flags":`...)
	b = strconv.AppendUint(b, uint64(ev.Flags), 10)
	b = append(b, `,"mode":`...)
	b = strconv.AppendUint(b, uint64(ev.Mode), 10)
	b = append(b, `,"node2":`...)
	b = strconv.AppendUint(b, ev.Node2, 10)
	b = append(b, `,"handle2":`...)
	b = strconv.AppendUint(b, ev.Handle2, 10)
	b = append(b, `,"offset2":`...)
	b = strconv.AppendInt(b, ev.Offset2, 10)
	b = append(b, `,"unique":`...)
	b = strconv.AppendUint(b, ev.Unique, 10)
	b = append(b, `,"queued_ns":`...)
	b = strconv.AppendInt(b, ev.Queued, 10)
	b = append(b, `,"done_ns":`...)
	b = strconv.AppendInt(b, ev.Done, 10)
	b = append(b, `,"call_start_ns":`...)
	b = strconv.AppendInt(b, ev.CallStart, 10)
	b = append(b, `,"call_end_ns":`...)
	b = strconv.AppendInt(b, ev.CallEnd, 10)
	b = append(b, `,"call_nr":`...)
	b = strconv.AppendUint(b, uint64(ev.CallNr), 10)
	b = append(b, `,"run_delay_ns":`...)
	b = strconv.AppendInt(b, runDelayField(ev), 10)
	b = append(b, `,"woken_ns":`...)
	b = strconv.AppendInt(b, ev.WokenAt, 10)
	b = append(b, `,"waker":`...)
	b = strconv.AppendUint(b, uint64(ev.Waker), 10)
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string. A byte of invalid UTF-8, 0xXY, becomes the
// escape \udcXY (see exportFields).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, '\\', 'u', 'd', 'c', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
