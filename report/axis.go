package report

import (
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// An axis is what the rows of a view stand for: the kinds of FUSE request (requestAxis: a
// report's ops[], a comparison's requests view) or the kinds of system call the
// application made (callAxis: syscalls[], the syscalls view); processes or files would be
// two more. It says where a row's figures are in a [stats.Stats], what the rows are called
// in text, and how a comparison treats them, so that building, sorting, comparing and
// printing rows are each written once, over an axis (rows.go, compare.go, compare_rows.go).
type axis struct {
	view   string // the comparison view the axis leads: ViewRequests or ViewSyscalls
	line   string // which view leads a comparison, in its header
	unit   string // what one row counts, in text: "op" or "call"
	plural string // what a row's requests or calls are called in its first-access line
	kinds  int    // rows are kinds 0..kinds-1
	name   func(k int) string
	in     func(s *stats.Stats, k int) rowIn // the figures of kind k in s
	total  func(s *stats.Stats) int64        // the time a row's share is of

	// notWork, when set, are the kinds whose counts follow the kernel and the replay's
	// folding more than the job: work and the verdict leave them out, and between a
	// recording and a replay their change is an artefact the comparison warns about.
	notWork func(k int) bool
	// work are the figures the same-work check compares; it names a count "<name>
	// <countWord>" and ignores byte differences of byteSlack or less.
	work      func(s *stats.Stats) workFigures
	countWord string
	byteSlack uint64
	// replayFolded are the kinds a replay does not reproduce by design, which the
	// same-work check of a recording against a replay leaves out, for the reason
	// replayFoldedWhy.
	replayFolded    []string
	replayFoldedWhy string
}

// isNotWork reports whether kind k is one of ax.notWork.
func (ax *axis) isNotWork(k int) bool { return ax.notWork != nil && ax.notWork(k) }

// rowIn are a set of traces' figures of one row.
type rowIn struct {
	o            *stats.OpStats
	busy         int64              // time at least one was in flight
	first, again *stats.AccessStats // read rows only: first access and re-access
}

// workFigures are what the same-work check compares of a side: counts by name, in the
// same order on every side, and bytes read and written.
type workFigures struct {
	names         []string
	counts        []uint64
	read, written uint64
}

func (w *workFigures) add(name string, n uint64) {
	w.names = append(w.names, name)
	w.counts = append(w.counts, n)
}

// requestAxis: the rows are kinds of FUSE request (operations).
var requestAxis = axis{
	view:   ViewRequests,
	line:   "per FUSE request (--view syscalls: per system call)",
	unit:   "op",
	plural: "requests",
	kinds:  int(trace.NumOps),
	name:   func(k int) string { return trace.Op(k).String() },
	in: func(s *stats.Stats, k int) rowIn {
		in := rowIn{o: &s.Ops[k], busy: s.Inflight.Ops[k].BusyNs}
		if trace.Op(k) == trace.OpRead {
			in.first, in.again = &s.FirstReads, &s.Rereads
		}
		return in
	},
	total:   (*stats.Stats).TotalNs,
	notWork: func(k int) bool { return notWork[k] },
	work: func(s *stats.Stats) workFigures {
		var w workFigures
		for i := range s.Ops {
			if op := trace.Op(i); !notWork[i] && op != trace.OpReaddir && op != trace.OpReaddirplus {
				w.add(op.String(), s.Ops[i].Count)
			}
		}
		w.add("readdir+readdirplus", s.Ops[trace.OpReaddir].Count+s.Ops[trace.OpReaddirplus].Count)
		w.read = s.Patterns.SeqReadBytes + s.Patterns.RandReadBytes
		w.written = s.Patterns.SeqWriteBytes + s.Patterns.RandWriteBytes
		return w
	},
	countWord:       "count",
	replayFolded:    kindNames(ReplayFolded),
	replayFoldedWhy: "replay folds the kernel's getattr and getxattr(security.capability) probes into the calls they belong to and does not issue ioctl",
}

// callAxis: the rows are kinds of system call, folded from the requests (trace/fold).
var callAxis = axis{
	view:   ViewSyscalls,
	line:   "per system call (time in the storage per call; --view requests: per FUSE request)",
	unit:   "call",
	plural: "calls",
	kinds:  int(fold.NumSyscalls),
	name:   func(k int) string { return fold.Syscall(k).String() },
	in: func(s *stats.Stats, k int) rowIn {
		in := rowIn{o: &s.Calls[k].OpStats, busy: s.Calls[k].BusyNs}
		if fold.Syscall(k) == fold.SysRead {
			in.first, in.again = &s.CallFirstReads, &s.CallRereads
		}
		return in
	},
	total: (*stats.Stats).CallTotalNs,
	work: func(s *stats.Stats) workFigures {
		var w workFigures
		for k := range fold.NumSyscalls {
			w.add(k.String(), s.Calls[k].Count)
		}
		w.read = s.Calls[fold.SysRead].Bytes + s.Calls[fold.SysCopyFileRange].Bytes
		w.written = s.Calls[fold.SysWrite].Bytes + s.Calls[fold.SysCopyFileRange].Bytes
		return w
	},
	countWord: "calls",
	byteSlack: 1,
	// ioctl and the like, and setattrs of attributes no single call sets.
	replayFolded:    kindNames([]fold.Syscall{fold.SysOther, fold.SysSetattr}),
	replayFoldedWhy: "replay does not issue ioctl, poll or setattrs of attributes no single call sets",
}

// axisOf returns the axis that leads a comparison's view.
func axisOf(view string) *axis {
	if view == ViewSyscalls {
		return &callAxis
	}
	return &requestAxis
}

// kindNames returns the names of kinds.
func kindNames[K interface{ String() string }](kinds []K) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.String()
	}
	return out
}
