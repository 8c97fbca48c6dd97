package export

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/iotap/iotap/trace"
)

// fio's iolog version 3 (fio's iolog.c, read_iolog): a first line "fio version 3 iolog",
// then one action a line, "TIME FILE add|open|close" or "TIME FILE
// read|write|sync|datasync|trim OFFSET LENGTH", TIME in microseconds since the start. fio
// reads FILE with "%256s" (no white space, at most 256 bytes) and LENGTH as an unsigned
// int, issues the actions of one log in order from one job, waiting the gaps between their
// times (none with --replay_no_stall), and needs a file added and opened before its I/O.
const (
	fioHeader  = "fio version 3 iolog"
	fioNameMax = 255 // bytes of a file name the export writes (NAME_MAX; fio reads 256)
	fioMaxLen  = 1<<32 - 1
	// fallocate's FALLOC_FL_PUNCH_HOLE: a hole punched, which fio replays as a trim.
	fallocPunchHole = 0x02
)

// fioCounts are what an iolog holds and what it left out.
type fioCounts struct {
	reads, writes, syncs, datasyncs, trims uint64
	readBytes, writeBytes, trimBytes       uint64
	copies                                 uint64 // copy_file_range, each a read and a write
	files                                  int
	threads                                map[uint32]struct{}
	other                                  uint64 // metadata requests or calls, directories
	failed                                 uint64 // failed data requests or calls
	empty                                  uint64 // reads and writes of no bytes (a read at the end of a file)
	allocs                                 uint64 // fallocates that reserve space (no I/O fio can issue)
}

// fioLog writes an iolog from requests or calls in start order.
type fioLog struct {
	w   io.Writer
	buf []byte
	n   fioCounts

	// Names: a path the trace renamed or linked keeps the fio file of its first name, since
	// fio cannot rename; moved maps such a path to that name, movedDirs a directory's new
	// path to its first (applied to the paths below it).
	moved     map[string]string
	movedDirs map[string]string
	// safe maps names fio cannot read to the names written instead, in the order made.
	safe     map[string]string
	safeList []string

	added map[string]bool
	open  map[string]int // fio file → handles open on it
	// handles maps an open handle to its fio files, oldest first: more than one when the
	// handle was reused before its release was seen (an open that began before the
	// release of the handle's previous file, and got the handle once that release freed
	// it); a release closes the oldest, data calls go to the newest.
	handles map[uint64][]string
}

func newFioLog(w io.Writer) *fioLog {
	return &fioLog{w: w, moved: map[string]string{}, movedDirs: map[string]string{}, safe: map[string]string{},
		added: map[string]bool{}, open: map[string]int{}, handles: map[uint64][]string{},
		n: fioCounts{threads: map[uint32]struct{}{}}}
}

// firstName returns the path a trace path had when the fio file it names was added.
func (l *fioLog) firstName(p string) string {
	if f, ok := l.moved[p]; ok {
		return f
	}
	if len(l.movedDirs) > 0 {
		for d := p; ; {
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
			if f, ok := l.movedDirs[d]; ok {
				p = f + p[len(d):]
				if f, ok := l.moved[p]; ok { // renamed before its directory was
					return f
				}
				return p
			}
		}
	}
	return p
}

// fioName returns the file name the iolog uses for trace path p.
func (l *fioLog) fioName(p string) string {
	p = l.firstName(p)
	if fioSafe(p) {
		return p
	}
	if s, ok := l.safe[p]; ok {
		return s
	}
	s := "iotap-fio-" + strconv.Itoa(len(l.safeList)+1)
	l.safe[p] = s
	l.safeList = append(l.safeList, p)
	return s
}

// fioSafe reports whether fio reads name back as written: 1 to 255 bytes, none of them
// white space in the C locale.
func fioSafe(name string) bool {
	if name == "" || len(name) > fioNameMax {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
			return false
		}
	}
	return true
}

func (l *fioLog) line(t int64, name, act string, args ...int64) error {
	b := strconv.AppendInt(l.buf[:0], max(t, 0)/1000, 10)
	b = append(b, ' ')
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, act...)
	for _, a := range args {
		b = append(b, ' ')
		b = strconv.AppendInt(b, a, 10)
	}
	l.buf = append(b, '\n')
	_, err := l.w.Write(l.buf)
	return err
}

// openFile opens the fio file of path for handle h at time t, adding it on first use.
func (l *fioLog) openFile(t int64, path string, h uint64) (string, error) {
	name := l.fioName(path)
	if !l.added[name] {
		l.added[name] = true
		l.n.files++
		if err := l.line(t, name, "add"); err != nil {
			return "", err
		}
	}
	l.handles[h] = append(l.handles[h], name)
	l.open[name]++
	if l.open[name] == 1 {
		return name, l.line(t, name, "open")
	}
	return name, nil
}

// fileOf returns the fio file open on handle h, opening the one of path for a handle the
// trace used but did not open (before it began).
func (l *fioLog) fileOf(t int64, h uint64, path string) (string, error) {
	if names := l.handles[h]; len(names) > 0 {
		return names[len(names)-1], nil
	}
	return l.openFile(t, path, h)
}

// add takes the next request or call.
func (l *fioLog) add(o *span) error {
	l.n.threads[o.tid] = struct{}{}
	if o.act == actOther {
		l.n.other++
		return nil
	}
	if o.errno != 0 {
		l.n.failed++
		return nil
	}
	switch o.act {
	case actOpen:
		_, err := l.openFile(o.start, o.path, o.handle)
		return err
	case actClose:
		names := l.handles[o.handle]
		if len(names) == 0 {
			return nil
		}
		name := names[0]
		if len(names) == 1 {
			delete(l.handles, o.handle)
		} else {
			l.handles[o.handle] = names[1:]
		}
		l.open[name]--
		if l.open[name] == 0 {
			return l.line(o.start, name, "close")
		}
		return nil
	case actRename:
		first := l.firstName(o.path)
		delete(l.moved, o.path)
		delete(l.movedDirs, o.path)
		if first == o.path2 { // back to its first name
			delete(l.moved, o.path2)
			delete(l.movedDirs, o.path2)
			return nil
		}
		l.moved[o.path2] = first
		l.movedDirs[o.path2] = first // the paths below it too, if it is a directory
		return nil
	case actLink: // path is the new name of path2
		l.moved[o.path] = l.firstName(o.path2)
		return nil
	case actRead, actWrite:
		return l.transfer(o, false)
	case actCopy:
		if err := l.transfer(o, false); err != nil {
			return err
		}
		if o.ret > 0 {
			l.n.copies++
		}
		return l.transfer(o, true)
	case actSync, actDatasync:
		name, err := l.fileOf(o.start, o.handle, o.path)
		if err != nil {
			return err
		}
		if o.act == actDatasync {
			l.n.datasyncs++
			return l.line(o.start, name, "datasync", 0, 0)
		}
		l.n.syncs++
		return l.line(o.start, name, "sync", 0, 0)
	case actAlloc:
		if o.flags&fallocPunchHole == 0 || o.size <= 0 {
			l.n.allocs++
			return nil
		}
		name, err := l.fileOf(o.start, o.handle, o.path)
		if err != nil {
			return err
		}
		for off, n := o.offset, o.size; n > 0; {
			k := min(n, fioMaxLen)
			if err := l.line(o.start, name, "trim", off, k); err != nil {
				return err
			}
			l.n.trims++
			l.n.trimBytes += uint64(k)
			off, n = off+k, n-k
		}
		return nil
	}
	return nil
}

// transfer writes the read or write of o: of its input (o.handle, o.path at o.offset; a
// write for a write), or with out of its output (copy_file_range's o.handle2, o.path2 at
// o.offset2). o.ret bytes moved.
func (l *fioLog) transfer(o *span, out bool) error {
	h, path, off, write := o.handle, o.path, o.offset, o.act == actWrite
	if out {
		h, path, off, write = o.handle2, o.path2, o.offset2, true
	}
	n := o.ret
	if n <= 0 {
		l.n.empty++
		return nil
	}
	name, err := l.fileOf(o.start, h, path)
	if err != nil {
		return err
	}
	act := "read"
	if write {
		act = "write"
		l.n.writes++
		l.n.writeBytes += uint64(n)
	} else {
		l.n.reads++
		l.n.readBytes += uint64(n)
	}
	return l.line(o.start, name, act, off, n) // n: one call moves at most 2 GiB on Linux
}

// dirs returns the directories the iolog's files are in, parents first.
func (l *fioLog) dirs() []string {
	set := map[string]bool{}
	for name := range l.added {
		for d := name; ; {
			i := strings.LastIndexByte(d, '/')
			if i <= 0 {
				break
			}
			d = d[:i]
			set[d] = true
		}
	}
	ds := make([]string, 0, len(set))
	for d := range set {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds
}

// shellQuote returns s in single quotes for sh; a quote in s closes them, is escaped, and reopens them.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// setupScript returns a shell script that prepares a directory for the iolog: it makes the
// directories the iolog's files are in (fio makes files, not directories), and gives each
// name written for one fio cannot read the file of the name the job used, when that exists
// (a file the job found).
func (l *fioLog) setupScript() string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n" +
		"# Prepares a directory for an iolog of iotap export --format fio. Run it there (sh THIS),\n" +
		"# after the job's starting state (iotap replay TRACE --target DIR --prepare only),\n" +
		"# then fio --read_iolog=LOG in that directory.\n" +
		"set -e\n")
	for _, d := range l.dirs() {
		fmt.Fprintf(&b, "mkdir -p -- %s\n", shellQuote(d))
	}
	for i, p := range l.safeList {
		s, o := shellQuote("iotap-fio-"+strconv.Itoa(i+1)), shellQuote(p)
		fmt.Fprintf(&b, "if [ -e %s ]; then ln -f -- %s %s || cp -- %s %s; fi\n", o, o, s, o, s)
	}
	return b.String()
}

// writeFio writes r's requests or calls (o.View) to w as a fio iolog; its Result says
// what the iolog holds and what it left out, and holds the script that prepares a
// directory for it (o.FioSetup).
func writeFio(ctx context.Context, r *trace.Reader, w io.Writer, o Options) (Result, error) {
	if _, err := io.WriteString(w, fioHeader+"\n"); err != nil {
		return Result{}, writeError(err)
	}
	l := newFioLog(w)
	s := newSpans(&events{r: r}, o.View)
	for i := 0; ; i++ {
		if i%stopEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		op, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Result{}, err
		}
		if err := l.add(op); err != nil {
			return Result{}, writeError(err)
		}
	}
	var res Result
	if o.FioSetup {
		res.FioSetup = l.setupScript()
	}
	n := &l.n
	unit := "requests"
	if o.View == ViewSyscalls {
		unit = "calls"
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "fio iolog: %d reads (%d bytes), %d writes (%d bytes), %d syncs, %d datasyncs, %d trims (%d bytes) on %d files, from %d threads in one job",
		n.reads, n.readBytes, n.writes, n.writeBytes, n.syncs, n.datasyncs, n.trims, n.trimBytes, n.files, len(n.threads))
	if n.copies > 0 {
		fmt.Fprintf(&msg, "; %d copy_file_range each a read and a write", n.copies)
	}
	fmt.Fprintf(&msg, "\n  left out: %d metadata and directory %s, %d failed, %d moving no bytes, %d fallocates reserving space\n",
		n.other, unit, n.failed, n.empty, n.allocs)
	if k := len(l.safeList); k > 0 {
		fmt.Fprintf(&msg, "  %d names fio cannot read (white space, or over %d bytes) are written as iotap-fio-N (--fio-setup links them):", k, fioNameMax)
		for i, p := range l.safeList[:min(k, 5)] {
			fmt.Fprintf(&msg, " %q → iotap-fio-%d", p, i+1)
		}
		if k > 5 {
			msg.WriteString(" ...")
		}
		msg.WriteByte('\n')
	}
	res.Note = msg.String()
	return res, nil
}
