package stats

import (
	"testing"

	"github.com/iotap/iotap/trace"
)

// TestLegsPassthrough: a read kernel passthrough served has no FUSE leg: it adds nothing
// to the legs' histograms, and the time between calls counts across it; a page fault of a
// mapped file is no call: it is counted apart and leaves the time between calls alone.
func TestLegsPassthrough(t *testing.T) {
	var l Legs
	// A request of a call 100..1000 (queued 200, served 300..800, done 900).
	l.Add(&trace.Event{Tid: 1, Op: trace.OpOpen, Unique: 2, Start: 300, Dur: 500, Queued: 200, Done: 900, CallStart: 100, CallEnd: 1000})
	// A page fault of a mapped file at 1200 (no system call), a passthrough read
	// 1500..1700, then a request of a call from 2000.
	l.Add(&trace.Event{Tid: 1, Op: trace.OpRead, Passthrough: true, Flags: trace.MapFault, Start: 1200, Queued: 1200, Done: 1200})
	l.Add(&trace.Event{Tid: 1, Op: trace.OpRead, Passthrough: true, Start: 1500, Dur: 200, Queued: 1500, Done: 1700, CallStart: 1500, CallEnd: 1700})
	l.Add(&trace.Event{Tid: 1, Op: trace.OpFlush, Unique: 4, Start: 2100, Dur: 100, Queued: 2050, Done: 2250, CallStart: 2000, CallEnd: 2300})
	if l.Measured != 2 || l.Passthrough != 1 || l.Faults != 1 || l.Calls != 2 {
		t.Errorf("measured %d, passthrough %d, faults %d, calls %d", l.Measured, l.Passthrough, l.Faults, l.Calls)
	}
	if l.Queue.TotalCount() != 2 || l.Call.TotalCount() != 2 {
		t.Errorf("queue %d, call %d values: the passthrough read added legs", l.Queue.TotalCount(), l.Call.TotalCount())
	}
	if l.ThinkCalls != 2 || l.Think != (1500-1000)+(2000-1700) {
		t.Errorf("think %d over %d gaps, want %d over 2", l.Think, l.ThinkCalls, (1500-1000)+(2000-1700))
	}
}
