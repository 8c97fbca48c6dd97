package replay

import (
	"fmt"
	"time"

	"github.com/iotap/iotap/trace"
)

// Round trips of the recording layer.
//
// In a FUSE recording, the gap between a thread's requests is the application's own time
// plus the layer's round trip: the kernel hands the request to the daemon, the daemon's
// reply wakes the caller. A target reached natively has no such cost, and a target that is
// itself a FUSE mount charges its own round trips to the replayed call's latency; either
// way think mode must not wait for the recorded ones again. The recorder measures the
// round trip against its mount, before the job and while it runs (trace.RoundTrip, in the
// footer); State.AutoRoundTrip prefers that. For a trace without it, the planner estimates
// the round trip from the trace itself: a successful LOOKUP is followed by the kernel's next
// request of the same path walk (the next component, or the open/getattr that the walk
// was for) with no application code in between, so the gap after it is one round trip.
// The estimate is the median of those gaps under 1 ms.

const (
	rttBucket  = 100   // ns per histogram bucket
	rttBuckets = 10000 // up to 1 ms
	// rttMinSamples is the fewest lookup gaps an estimate is made from.
	rttMinSamples = 16
)

type rttLast struct {
	end    int64
	lookup bool // the thread's last request was a successful LOOKUP
}

type rttEstimator struct {
	last map[uint32]rttLast
	hist []uint32
	n    uint64
}

func (r *rttEstimator) observe(ev *trace.Event) {
	if ev.Tid == 0 {
		return
	}
	if r.last == nil {
		r.last = make(map[uint32]rttLast)
		r.hist = make([]uint32, rttBuckets)
	}
	if l, ok := r.last[ev.Tid]; ok && l.lookup {
		if gap := ev.Start - l.end; gap >= 0 && gap < rttBucket*rttBuckets {
			r.hist[gap/rttBucket]++
			r.n++
		}
	}
	r.last[ev.Tid] = rttLast{end: ev.End(), lookup: ev.Op == trace.OpLookup && ev.Errno == 0}
}

// estimate returns the median gap, or 0 with too few samples.
func (r *rttEstimator) estimate() (time.Duration, uint64) {
	if r.n < rttMinSamples {
		return 0, r.n
	}
	var seen uint64
	for i, c := range r.hist {
		seen += uint64(c)
		if 2*seen >= r.n {
			return time.Duration(i*rttBucket + rttBucket/2), r.n
		}
	}
	return 0, r.n
}

// recordedThroughFUSE reports whether h is a recording by the FUSE layer (not a replay's
// own trace, whose gaps are the replayer's).
func recordedThroughFUSE(h *trace.Header) bool {
	return h != nil && h.Kind == "record" && h.FUSE.Cache != ""
}

// thinkAfter returns how long after its predecessor op's end an op is due in think mode:
// the application's time between the two system calls where the kernel measured it
// (AppThink), else the recorded gap without the requests folded into the op and without
// the recording layer's round trip for each request it stands for.
func thinkAfter(op *replayOp, rtt int64) int64 {
	if op.ThinkMeasured {
		return op.AppThink
	}
	return thinkEstimate(op, rtt)
}

// thinkEstimate is thinkAfter for an op whose think time the kernel did not measure.
func thinkEstimate(op *replayOp, rtt int64) int64 {
	return max(op.Think-op.FoldDur-int64(op.Reqs)*rtt, 0)
}

// RoundTripChoice is the round trip think mode takes out of the recorded gaps, and where
// it comes from.
type RoundTripChoice struct {
	RoundTrip time.Duration
	// Source: "measured while the job ran" or "measured before the job" (the recorder's
	// probe, trace.RoundTrip), "estimated from N path-walk gaps", or "" for none.
	Source string
}

// AutoRoundTrip chooses the round trip for --round-trip auto: the one the recorder
// measured while the job ran, else its calibration before the job, else the estimate from
// the trace's path walks.
func (st *State) AutoRoundTrip() RoundTripChoice {
	switch {
	case st.Measured.Run > 0:
		return RoundTripChoice{st.Measured.Run, fmt.Sprintf("measured by the recorder while the job ran, median of %d samples", st.Measured.Samples)}
	case st.Measured.Start > 0:
		return RoundTripChoice{st.Measured.Start, "measured by the recorder before the job"}
	case st.RoundTrip > 0:
		return RoundTripChoice{st.RoundTrip, fmt.Sprintf("estimated from the median of %d path-walk gaps", st.RoundTripSamples)}
	}
	return RoundTripChoice{}
}

// Contended returns a note when the recorder's round trip while the job ran was more than
// twice its calibration before the job (and 20 µs more): the job and the serving process
// competed for CPUs while it was recorded. That also slows the job's own work between its
// calls, which think mode keeps as think time, so a replay's runtime then predicts high.
// It returns "" otherwise, or when the trace has no such measurement.
func (st *State) Contended() string {
	m := st.Measured
	if m.Start <= 0 || m.Run <= 0 || m.Run <= 2*m.Start || m.Run-m.Start < 20*time.Microsecond {
		return ""
	}
	return fmt.Sprintf("the recording layer's round trip rose from %v before the job to %v while it ran: "+
		"the job and the recorder competed for CPUs, which also slowed the job's work between its calls; "+
		"think times keep that slowdown, so runtimes replayed from this trace predict high "+
		"(record on a node with a CPU to spare for the layer)", m.Start, m.Run)
}
