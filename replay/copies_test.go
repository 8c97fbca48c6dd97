package replay

import (
	"errors"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// TestRunCopies: copies replayed together each replay the whole trace onto their own
// target, from one start.
func TestRunCopies(t *testing.T) {
	data := queueTrace(t, 4, 32, int64(2*time.Millisecond))
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	var copies []Copy
	for range 3 {
		_, d := target(t, "")
		must(t, Prepare(t.Context(), d, st, false))
		copies = append(copies, Copy{Source: tracetest.Reader(t, data), Backend: d})
	}
	sums, err := RunCopies(t.Context(), copies, Options{Timing: TimingOriginal})
	must(t, err)
	for k, s := range sums {
		if s == nil || s.Divergences != 0 || s.ReplayedOps != s.RecordedOps || s.Interrupted {
			t.Fatalf("copy %d: %+v", k+1, s)
		}
		// Original timing from one start: every copy ends when the recording did, later
		// only by what it was late issuing its ops (a loaded machine) and their own time.
		if d := s.ReplaySpan - s.RecordedSpan; d > s.LagTotal+s.ReplayIO+2*s.RecordedSpan+100*time.Millisecond || d < -time.Millisecond {
			t.Errorf("copy %d: span %v, recorded %v, lag %v, op time %v", k+1, s.ReplaySpan, s.RecordedSpan, s.LagTotal, s.ReplayIO)
		}
	}
}

// failing is a trace that cannot be read past its first events.
type failing struct {
	*trace.Reader
	left int
}

var errUnreadable = errors.New("unreadable chunk")

func (f *failing) Next() (*trace.Event, error) {
	if f.left == 0 {
		return nil, errUnreadable
	}
	f.left--
	return f.Reader.Next()
}

// TestRunCopiesError: a copy that fails stops the others, and RunCopies returns its error.
func TestRunCopiesError(t *testing.T) {
	data := queueTrace(t, 4, 256, int64(20*time.Millisecond))
	st, err := DeriveState(tracetest.Reader(t, data), PlanOptions{})
	must(t, err)
	var copies []Copy
	for k := range 3 {
		_, d := target(t, "")
		must(t, Prepare(t.Context(), d, st, false))
		var src Source = tracetest.Reader(t, data)
		if k == 1 {
			src = &failing{Reader: tracetest.Reader(t, data), left: 100}
		}
		copies = append(copies, Copy{Source: src, Backend: d})
	}
	done := make(chan struct{})
	var sums []*Summary
	go func() {
		sums, err = RunCopies(t.Context(), copies, Options{Timing: TimingOriginal})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("RunCopies did not end after a copy failed")
	}
	if !errors.Is(err, errUnreadable) {
		t.Fatalf("error %v, want the failing copy's", err)
	}
	for k, s := range sums {
		if k != 1 && (s == nil || !s.Interrupted) {
			t.Errorf("copy %d ran on: %+v", k+1, s)
		}
	}
}
