package replay

import (
	"fmt"
	"time"

	"github.com/iotap/iotap/trace"
)

// What a replay predicts.
//
// A think-mode replay of a recording predicts how the job would do on the target: its
// runtime is the replay's span, its job I/O time the replayed calls' summed time. Neither
// is exact, and the prediction says by how much it may miss, from what the replay knows:
//
//   - the replayer's own delays (the issue lag): the real job would not have them, so
//     the runtime may be lower by up to the time during which some op was late
//     (LagUnion: ops late together count once, lagspan.go);
//   - the time the recorded threads waited for a CPU between their calls, which the replay
//     did not wait (RunDelayCut): a job with more runnable threads than CPUs waits some of
//     it on any machine, so the runtime may be higher by up to that much;
//   - ops whose think time was estimated (the recorded gap less the round-trip probe's
//     estimate, ThinkEstimated): each may be off by half a round trip either way;
//   - the job's own time between its calls, as recorded, runs slower than the job does
//     alone (the recorder works on the other CPUs: on a 2-vCPU machine, maybe a sibling
//     hyperthread), so the runtime may be lower by up to ModelError.Think of the think
//     time the replay waited (at most its span);
//   - each call the job made cost the recorder's backend more than it costs the job alone,
//     or the replay's call more than the job's: the job I/O time (and the runtime) may be
//     higher by up to ModelError.Call per replayed call;
//   - the method's own error, which these terms do not explain (the target's and the job's
//     run-to-run spread): ModelError of the point, either way.
//
// The constants are calibrated on bench/predict.sh (five real jobs, three backends, five
// runs each): see docs/performance.md.
//
// Runs repeated onto one target (--repeat) widen the interval to every run's. A run that
// was interrupted predicts nothing.
//
// Where the job's native runtime is known (Options.NativeRuntime: measured by the user, or
// by `record --native-first`), the prediction is also anchored on it: the native runtime
// plus the difference between the replayed job I/O time and the recorded one (the
// recording's calls took their storage time on the recorded storage). That cancels what
// the replay cannot reproduce of the job's own time (its computing under other load, the
// replayer's cost) and keeps what changes with the storage.

// ModelError is what a prediction's interval allows beyond the terms the run measures:
// Runtime and IO are relative errors of the point either way, Think the share of the think
// time waited the recording may have added, Call the time per call it may have taken out.
var ModelError = struct {
	Runtime, IO, Think float64
	Call               time.Duration
}{Runtime: 0.15, IO: 0.15, Think: 0.25, Call: 2 * time.Microsecond}

// Prediction is what a think-mode replay predicts for the job on its target, each figure
// with the interval it is sure of (see above).
type Prediction struct {
	RuntimeNs     int64 `json:"runtime_ns"`
	RuntimeLowNs  int64 `json:"runtime_low_ns"`
	RuntimeHighNs int64 `json:"runtime_high_ns"`
	IONs          int64 `json:"io_ns"`
	IOLowNs       int64 `json:"io_low_ns"`
	IOHighNs      int64 `json:"io_high_ns"`
	// NativeNs is the job's native runtime the prediction is anchored on (0: none), and
	// Anchored*Ns the anchored runtime: NativeNs plus the replayed job I/O time less the
	// recorded one (RecordedIONs).
	NativeNs         int64 `json:"native_runtime_ns,omitempty"`
	RecordedIONs     int64 `json:"recorded_io_ns,omitempty"`
	AnchoredNs       int64 `json:"anchored_runtime_ns,omitempty"`
	AnchoredLowNs    int64 `json:"anchored_runtime_low_ns,omitempty"`
	AnchoredHighNs   int64 `json:"anchored_runtime_high_ns,omitempty"`
	Runs             int   `json:"runs"` // runs the interval covers
	EstimatedThinkNs int64 `json:"estimated_think_ns"`
}

// predict fills in s.Prediction from the summary of one think-mode run. A run that was
// interrupted predicts nothing: its span is that of the ops it issued, not the job's, and
// the ops it left out are not a sample of the whole (s.NoPrediction says so).
func (s *Summary) predict(o Options) {
	s.Prediction, s.NoPrediction = nil, ""
	if s.Timing != TimingThink.String() || s.ReplaySpan <= 0 {
		return
	}
	if s.Interrupted {
		s.NoPrediction = fmt.Sprintf("the run was interrupted (%d ops replayed): the part of the job it replayed says nothing of the job's runtime", s.ReplayedOps)
		return
	}
	span, io := int64(s.ReplaySpan), int64(s.ReplayIO)
	// Each estimated think time may be off by half a round trip per request.
	est := int64(s.ThinkEstimated) * int64(s.RoundTrip) / 2
	calls := int64(s.ReplayedOps) * int64(ModelError.Call)
	up := est + calls + int64(float64(span)*ModelError.Runtime)
	if !o.KeepRunDelay {
		up += int64(s.RunDelayCut)
	}
	slower := int64(float64(min(int64(s.ThinkWait), span)) * ModelError.Think)
	down := est + int64(s.LagUnion) + slower + int64(float64(span)*ModelError.Runtime)
	ioErr := int64(float64(io) * ModelError.IO)
	p := &Prediction{
		RuntimeNs: span, RuntimeLowNs: max(span-down, 0), RuntimeHighNs: span + up,
		IONs: io, IOLowNs: max(io-ioErr, 0), IOHighNs: io + ioErr + calls,
		Runs: 1, EstimatedThinkNs: est,
	}
	if o.NativeRuntime > 0 {
		p.anchor(int64(o.NativeRuntime), int64(s.RecordedIO))
	}
	s.Prediction = p
}

// anchor sets the anchored runtime on native, with recorded the recorded job I/O time.
func (p *Prediction) anchor(native, recorded int64) {
	p.NativeNs, p.RecordedIONs = native, recorded
	p.AnchoredNs = max(native+p.IONs-recorded, 0)
	p.AnchoredLowNs = max(native+p.IOLowNs-recorded, 0)
	p.AnchoredHighNs = max(native+p.IOHighNs-recorded, 0)
}

// MergePredictions returns the prediction of several runs onto one target: the median
// of the runs' figures, in the interval that holds every run's. nil when no run predicted.
func MergePredictions(ps []*Prediction) *Prediction {
	var runs []*Prediction
	for _, p := range ps {
		if p != nil {
			runs = append(runs, p)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	med := func(f func(*Prediction) int64) int64 {
		v := make([]int64, len(runs))
		for i, p := range runs {
			v[i] = f(p)
		}
		for i := 1; i < len(v); i++ { // insertion sort: a handful of runs
			for j := i; j > 0 && v[j] < v[j-1]; j-- {
				v[j], v[j-1] = v[j-1], v[j]
			}
		}
		n := len(v)
		return (v[(n-1)/2] + v[n/2]) / 2
	}
	m := &Prediction{
		RuntimeNs: med(func(p *Prediction) int64 { return p.RuntimeNs }),
		IONs:      med(func(p *Prediction) int64 { return p.IONs }),
		Runs:      len(runs), EstimatedThinkNs: runs[0].EstimatedThinkNs,
		RuntimeLowNs: runs[0].RuntimeLowNs, RuntimeHighNs: runs[0].RuntimeHighNs,
		IOLowNs: runs[0].IOLowNs, IOHighNs: runs[0].IOHighNs,
	}
	for _, p := range runs[1:] {
		m.RuntimeLowNs, m.RuntimeHighNs = min(m.RuntimeLowNs, p.RuntimeLowNs), max(m.RuntimeHighNs, p.RuntimeHighNs)
		m.IOLowNs, m.IOHighNs = min(m.IOLowNs, p.IOLowNs), max(m.IOHighNs, p.IOHighNs)
	}
	if runs[0].NativeNs > 0 {
		m.anchor(runs[0].NativeNs, runs[0].RecordedIONs)
	}
	return m
}

// Figures returns the prediction as a replay trace's footer keeps it.
func (p *Prediction) Figures() trace.Prediction {
	return trace.Prediction{
		Runtime: p.RuntimeNs, RuntimeLow: p.RuntimeLowNs, RuntimeHigh: p.RuntimeHighNs,
		IO: p.IONs, IOLow: p.IOLowNs, IOHigh: p.IOHighNs,
		Native: p.NativeNs, Anchored: p.AnchoredNs, AnchoredLow: p.AnchoredLowNs, AnchoredHigh: p.AnchoredHighNs,
	}
}

// Line is the prediction in one line of text.
func (p *Prediction) Line() string {
	d := func(ns int64) time.Duration { return time.Duration(ns).Round(time.Microsecond) }
	s := fmt.Sprintf("runtime %v (%v–%v), job I/O time %v (%v–%v)",
		d(p.RuntimeNs), d(p.RuntimeLowNs), d(p.RuntimeHighNs), d(p.IONs), d(p.IOLowNs), d(p.IOHighNs))
	if p.Runs > 1 {
		s += fmt.Sprintf(", over %d runs", p.Runs)
	}
	if p.NativeNs > 0 {
		s += fmt.Sprintf("; anchored on the native runtime %v: runtime %v (%v–%v), which the verdict uses",
			d(p.NativeNs), d(p.AnchoredNs), d(p.AnchoredLowNs), d(p.AnchoredHighNs))
	}
	return s
}
