package stats

import (
	"cmp"
	"slices"

	"github.com/iotap/iotap/trace"
)

// ProcessNames returns, per process id, the record a process is named after (its name,
// executable and command line in ProcStats and in the groups of a report by program):
// its main thread's (the thread whose id is the process's), or, when procs holds none, the
// first of its threads in procs. procs are a trace's process records, the last of each
// thread, in the order the threads were first seen (trace.Reader.Processes). A process
// that exec'd another program is named after the last.
func ProcessNames(procs []trace.Process) map[uint32]trace.Process {
	out := make(map[uint32]trace.Process, len(procs))
	for _, p := range procs {
		if _, ok := out[p.Pid]; !ok || p.Tid == p.Pid {
			out[p.Pid] = p
		}
	}
	return out
}

// processLister is a Resolver that lists its process records: a *trace.Reader, or Names.
type processLister interface {
	Processes() []trace.Process
}

// Processes implements processLister: the records by first-seen time, then thread id.
func (n *Names) Processes() []trace.Process {
	out := make([]trace.Process, 0, len(n.Procs))
	for _, p := range n.Procs {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b trace.Process) int {
		return cmp.Or(cmp.Compare(a.FirstSeen, b.FirstSeen), cmp.Compare(a.Tid, b.Tid))
	})
	return out
}

// processNames is ProcessNames of r's records, nil when r does not list them.
func processNames(r Resolver) map[uint32]trace.Process {
	if l, ok := r.(processLister); ok {
		return ProcessNames(l.Processes())
	}
	return nil
}
