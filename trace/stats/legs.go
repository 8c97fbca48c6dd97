package stats

import (
	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/trace"
)

// Legs summarises the kernel's view of a recording's requests (trace.Event.HasLegs): the
// legs of each request outside the backend call the layer timed, and the system calls
// that sent them. For one request, in time order:
//
//	CallStart  the application's system call enters the kernel
//	  Entry    the kernel's own work before it queues the request (path walk, locks)
//	Queued     the request is queued for the FUSE server
//	  Queue    the server takes it, decodes it, and the layer starts the backend call
//	Start..End the backend call (Event.Dur)
//	  Reply    the layer's reply reaches the kernel
//	Done       the kernel completes the request
//	  Return   the application's thread runs again and its call returns
//	CallEnd    (the last request of the call only)
//
// Entry and Return are counted once per system call: Entry on its first request, Return
// on its last.
type Legs struct {
	Events   uint64 // events added
	Measured uint64 // events with the kernel's queue and completion times
	InCall   uint64 // of those, sent from a system call whose entry was seen
	Calls    uint64 // system calls whose entry and return were both seen
	// Histograms of each leg in ns (nil until a value is added).
	Queue, Reply, Entry, Return *hdrhistogram.Histogram
	// Call is, per system call seen whole, its duration less its requests' backend time:
	// what FUSE added to the call as the application waited for it.
	Call *hdrhistogram.Histogram
	// Think is the summed time threads spent between a call's return and their next
	// call's entry (ThinkCalls gaps), and ThinkRunDelay how much of it they waited for a
	// CPU (over the ThinkDelayed gaps whose run delay was measured).
	Think, ThinkRunDelay     int64
	ThinkCalls, ThinkDelayed uint64
	// Passthrough counts the reads and writes kernel passthrough served (Event.Passthrough):
	// calls without a FUSE request, so without legs; they count in the think time only.
	// Faults counts, apart, the pages of mapped files that faults brought in or made dirty
	// (Event.Mapped): no system call, so not in the think time either.
	Passthrough, Faults uint64

	open map[uint32]legCall // per thread, the system call its last request came from
}

// legCall is a system call in progress of a thread: its entry, and the backend time of
// its requests so far.
type legCall struct {
	start, backend int64
	end            int64 // the previous call's return (0: unknown), for the think time
}

// Add adds one event; events of one thread must come in their order (a trace's file order
// keeps it).
func (l *Legs) Add(ev *trace.Event) {
	l.Events++
	if !ev.HasLegs() {
		return
	}
	if ev.Mapped() {
		l.Faults++
		return
	}
	if ev.Passthrough {
		l.Passthrough++
		if l.open == nil {
			l.open = map[uint32]legCall{}
		}
		if c, ok := l.open[ev.Tid]; ok && c.start != ev.CallStart {
			l.think(ev, c)
		}
		l.open[ev.Tid] = legCall{end: ev.CallEnd}
		return
	}
	l.Measured++
	recordInto(&l.Queue, ev.Start-ev.Queued)
	recordInto(&l.Reply, ev.Done-ev.End())
	if ev.CallStart == 0 {
		return
	}
	l.InCall++
	if l.open == nil {
		l.open = map[uint32]legCall{}
	}
	c, ok := l.open[ev.Tid]
	if !ok || c.start != ev.CallStart {
		recordInto(&l.Entry, ev.Queued-ev.CallStart)
		if ok {
			l.think(ev, c)
		}
		c = legCall{start: ev.CallStart}
	}
	c.backend += ev.Dur
	if ev.CallEnd == 0 {
		l.open[ev.Tid] = c
		return
	}
	l.open[ev.Tid] = legCall{end: ev.CallEnd}
	if ev.CallEnd >= ev.Done { // else the call did not wait for the request (a release)
		recordInto(&l.Return, ev.CallEnd-ev.Done)
	}
	recordInto(&l.Call, ev.CallEnd-ev.CallStart-c.backend)
	l.Calls++
}

// think counts the gap between the thread's previous call c, when it returned, and ev's.
func (l *Legs) think(ev *trace.Event, c legCall) {
	if c.start == 0 && c.end != 0 && ev.CallStart >= c.end {
		l.Think += ev.CallStart - c.end
		l.ThinkCalls++
		if d, ok := ev.ThinkRunDelay(); ok {
			l.ThinkRunDelay += int64(d)
			l.ThinkDelayed++
		}
	}
}

func recordInto(h **hdrhistogram.Histogram, ns int64) {
	if *h == nil {
		*h = NewHist()
	}
	record(*h, ns)
}

// LegQuantile returns the q-th percentile (0..100) of h in ns (rank ⌈q/100·n⌉, package
// internal/quantile), 0 when h is empty.
func LegQuantile(h *hdrhistogram.Histogram, q float64) int64 {
	if h == nil {
		return 0
	}
	return quantile.Value(h, q)
}
