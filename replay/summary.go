package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/loghist"
	"github.com/iotap/iotap/trace"
)

// hist is a small log-linear histogram of non-negative ns values (package loghist: 16
// buckets per power of two, about 6% resolution). It is used by one goroutine; merge afterwards.
type hist struct {
	n      uint64
	max    int64
	sum    int64
	counts [64 * 16]uint64
}

// histBits sets hist's resolution: 2^histBits buckets per power of two (package loghist).
const histBits = 4

func histBucket(v int64) int { return loghist.Bucket(uint64(max(v, 0)), histBits) }

func (h *hist) record(v int64) {
	v = max(v, 0)
	h.n++
	h.sum += v
	h.max = max(h.max, v)
	h.counts[histBucket(v)]++
}

func (h *hist) merge(o *hist) {
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
	for i, c := range o.counts {
		h.counts[i] += c
	}
}

// quantile returns the q-quantile (upper bound of its bucket, at most max).
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(int64(loghist.High(i, histBits)), h.max))
		}
	}
	return time.Duration(h.max)
}

// above counts values >= v (to bucket resolution).
func (h *hist) above(v int64) uint64 {
	var n uint64
	for i := histBucket(v); i < len(h.counts); i++ {
		n += h.counts[i]
	}
	return n
}

type opCounts struct {
	recorded, replayed, skipped, diverged, unsupported, fallbacks uint64
}

// runStats are one worker's totals.
type runStats struct {
	ops               [trace.NumOps]opCounts
	recRead, recWrite int64
	read, write       int64
	recIO, ioTime     int64
	depWait           int64
	thinkCut          int64  // recorded think time not waited for (folded requests, round trips)
	thinkWait         int64  // think time the schedule waited for (after the speed)
	thinkMeasured     uint64 // ops whose think time the kernel measured (ThinkMeasured)
	thinkEstimated    uint64 // ops whose think time is the recorded gap less the estimated round trips
	runDelayCut       int64  // of the measured think times, time the threads waited for a CPU, not waited for
	wokenOps          uint64 // ops due after the progress of the thread that woke theirs (replayOp.WakeTid)
	implicit          uint64
	behind            uint64
	implicitFailed    uint64
	escapes           uint64
	clamped           uint64 // reads, writes and copies of more than one system call moves (maxRW)
	overlapped        uint64 // ops issued while others of their thread ran
	maxDepth          int    // most ops of one thread in flight at once, as recorded
	lag               *hist
	lags              lagBuf // lag intervals not yet added to the run's union
	examples          []string
	unsupExamples     []string
}

func (s *runStats) init() { s.lag = new(hist) }

// OpSummary is one recorded op's line of the fidelity summary.
type OpSummary struct {
	Op       trace.Op `json:"op"` // by name in JSON
	Recorded uint64   `json:"recorded"`
	Replayed uint64   `json:"replayed"`
	Skipped  uint64   `json:"skipped"`
	Diverged uint64   `json:"diverged"`
	// Unsupported counts ops where the target, or the recorded storage, answered ENOTSUP
	// (EOPNOTSUPP) or ENOSYS and the other did not: a difference of the backends (s3fs
	// has no extended attributes, for example), not of the replay. They are not
	// divergences.
	Unsupported uint64 `json:"unsupported"`
	// Fallbacks counts ops the target refused and the replay did another way, as the
	// application would have there (fallback.go): backend differences, not divergences.
	Fallbacks uint64 `json:"fallbacks,omitempty"`
}

// Summary is the fidelity report of one replay run.
type Summary struct {
	Target  trace.Target `json:"target"`
	Timing  string       `json:"timing"`
	Speed   float64      `json:"speed"`
	Threads int          `json:"threads"`

	Fold FoldStats   `json:"fold"` // what planning did with the recorded events
	Ops  []OpSummary `json:"ops"`  // in JSON only the ops recorded or replayed

	RecordedOps uint64 `json:"recorded_ops"`
	ReplayedOps uint64 `json:"replayed_ops"`
	SkippedOps  uint64 `json:"skipped_ops"`
	Divergences uint64 `json:"divergences"`
	// BackendDifferences sums OpSummary.Unsupported and Fallbacks: ops one of the two
	// storages does not support.
	BackendDifferences uint64 `json:"backend_differences"`
	// Fallbacks sums OpSummary.Fallbacks.
	Fallbacks            uint64 `json:"fallbacks"`
	RecordedRead         int64  `json:"recorded_read_bytes"`
	RecordedWrite        int64  `json:"recorded_write_bytes"`
	ReplayedRead         int64  `json:"replayed_read_bytes"`
	ReplayedWrite        int64  `json:"replayed_write_bytes"`
	ImplicitOpens        uint64 `json:"implicit_opens"`
	ImplicitOpenFailures uint64 `json:"implicit_open_failures"`
	Escapes              uint64 `json:"escapes"` // ops refused because their path left the root
	// Clamped counts reads, writes and copies that asked for more bytes than one system
	// call moves (2 GiB less a page): no application's call does; they were replayed
	// with that many.
	Clamped     uint64 `json:"clamped"`
	Interrupted bool   `json:"interrupted"` // the run was cancelled before the trace's end

	// Issue lag: actual issue time minus the time the op became due (its scheduled time,
	// or when its ordering dependencies completed if later).
	LagP50   time.Duration `json:"lag_p50_ns"`
	LagP99   time.Duration `json:"lag_p99_ns"`
	LagMax   time.Duration `json:"lag_max_ns"`
	LagTotal time.Duration `json:"lag_total_ns"`
	// LagUnion is the time during which at least one op was late: the union of the ops'
	// lag intervals, where LagTotal sums them (lagspan.go).
	LagUnion    time.Duration `json:"lag_union_ns"`
	LateOver1ms uint64        `json:"late_over_1ms"`
	LagSamples  uint64        `json:"lag_samples"`
	DepWait     time.Duration `json:"dep_wait_ns"` // total time spent waiting for other threads' ops
	// RoundTrip is the recording layer's round trip per request that think mode took out
	// of the recorded gaps; ThinkCut is the recorded think time not waited for in all
	// (those round trips and the folded requests' own time).
	RoundTrip time.Duration `json:"round_trip_ns"`
	ThinkCut  time.Duration `json:"think_cut_ns"`
	// RoundTripSource says where RoundTrip came from (Options.RoundTripSource).
	RoundTripSource string `json:"round_trip_source,omitempty"`
	// ThinkWait is the think time the schedule made threads wait in all (think mode: the
	// recorded gaps less ThinkCut, divided by the speed). With LagTotal and ReplayIO it
	// accounts for a single thread's span: span = ThinkWait + LagTotal + ReplayIO, give or
	// take the replayer's bookkeeping between ops.
	ThinkWait time.Duration `json:"think_wait_ns"`
	// ThinkMeasured counts the ops whose think time is the application's time between its
	// system calls as the kernel measured it while recording (trace.Header.Legs kernel);
	// ThinkEstimated those whose think time is the recorded gap less the round trip
	// estimate (RoundTrip).
	ThinkMeasured  uint64 `json:"think_measured"`
	ThinkEstimated uint64 `json:"think_estimated"`
	// RunDelayCut is the part of the measured think times that the recorded threads spent
	// waiting for a CPU, which was not waited for (part of ThinkCut; Options.KeepRunDelay).
	RunDelayCut time.Duration `json:"run_delay_cut_ns"`
	// WokenOps counts the ops due after the progress of another thread that woke theirs
	// while recorded (a thread that waited for another), not after a think time.
	WokenOps uint64 `json:"woken_ops"`
	// Behind counts ops that were due more than 1 ms before their thread's previous op
	// returned: the target was slower than the recording (original timing). Such waits
	// are not counted as lag.
	Behind uint64 `json:"behind"`

	// Prediction is what the run predicts for the job on the target (think timing only).
	Prediction *Prediction `json:"prediction,omitempty"`
	// Idle is the part of ReplaySpan during which none of the job's replayed calls was in
	// flight, on any thread: the job's own time between its calls (in think mode the
	// recorded think times, carried over unchanged, and the replayer's issue lag).
	// ThinkShare is Idle over ReplaySpan: the share of the replayed (predicted) runtime
	// that the target did not change.
	Idle       time.Duration `json:"idle_ns"`
	ThinkShare float64       `json:"think_share"`
	// NoPrediction says why a think-mode run predicts nothing (it was interrupted).
	NoPrediction string `json:"no_prediction,omitempty"`

	RecordedSpan time.Duration `json:"recorded_span_ns"` // first op start to last op end
	ReplaySpan   time.Duration `json:"replay_span_ns"`
	RecordedIO   time.Duration `json:"recorded_io_ns"` // summed op latencies
	ReplayIO     time.Duration `json:"replay_io_ns"`
	// ReplayerCPU is the CPU time (user and system) the replaying process used during the
	// run; ReplayerCPUShare is it over ReplaySpan (1 = one CPU busy throughout), on a
	// machine of CPUs. On a target reached through a local client (a FUSE daemon), the
	// client competes for the same CPUs.
	ReplayerCPU      time.Duration `json:"replayer_cpu_ns"`
	ReplayerCPUShare float64       `json:"replayer_cpu_share"`
	CPUs             int           `json:"cpus"`

	Examples []string `json:"examples"` // first divergences that are causes of their own (see Causes)
	// Causes are the first failures on each file (divergences, and backend differences
	// that divergences followed), those with the most divergences after them first:
	// the root causes of cascades such as EBADF after a failed open.
	Causes []Cause `json:"causes,omitempty"`
	// BackendExamples are the first backend differences.
	BackendExamples []string `json:"backend_examples,omitempty"`
	// Bottleneck is set when the replayer itself, not the target, limited the replay.
	Bottleneck string `json:"bottleneck,omitempty"`
	// Overlapped counts ops that started while others of their thread were running in
	// the recording (an application's queue of requests): they were issued while those
	// ran. MaxQueueDepth is the most ops of one thread recorded in flight at once.
	Overlapped    uint64 `json:"overlapped"`
	MaxQueueDepth int    `json:"max_queue_depth"`

	lag  hist
	lags *lagSpans // the union of the lag intervals, nil when no op was late
}

// SummarySchema names the JSON form of a Summary (a replay's PREFIX.tN.rM.json); the
// fields are documented in doc.go.
const SummarySchema = "iotap.replay/v1"

// MarshalJSON writes s with its schema name and only the operations that were recorded
// or replayed.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary
	p := plain(s)
	p.Ops = nil
	for _, o := range s.Ops {
		if o.Recorded+o.Replayed+o.Skipped+o.Diverged+o.Unsupported > 0 {
			p.Ops = append(p.Ops, o)
		}
	}
	if p.Ops == nil {
		p.Ops = []OpSummary{}
	}
	if p.Examples == nil {
		p.Examples = []string{} // an array, as documented, when there are none
	}
	return json.Marshal(struct {
		Schema string `json:"schema"`
		plain
	}{SummarySchema, p})
}

// MarshalJSON writes the op by name.
func (o OpSummary) MarshalJSON() ([]byte, error) {
	type plain OpSummary
	return json.Marshal(struct {
		Op string `json:"op"`
		plain
	}{o.Op.String(), plain(o)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (o *OpSummary) UnmarshalJSON(b []byte) error {
	type plain OpSummary
	var v struct {
		Op string `json:"op"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	op, err := trace.ParseOp(v.Op)
	if err != nil {
		return fmt.Errorf("replay summary: %w", err)
	}
	*o = OpSummary(v.plain)
	o.Op = op
	return nil
}

func (s *Summary) add(st *runStats) {
	if len(s.Ops) == 0 {
		s.Ops = make([]OpSummary, trace.NumOps)
	}
	for i := range st.ops {
		o := &s.Ops[i]
		o.Op = trace.Op(i)
		o.Recorded += st.ops[i].recorded
		o.Replayed += st.ops[i].replayed
		o.Skipped += st.ops[i].skipped
		o.Diverged += st.ops[i].diverged
		o.Unsupported += st.ops[i].unsupported
		o.Fallbacks += st.ops[i].fallbacks
	}
	s.RecordedRead += st.recRead
	s.RecordedWrite += st.recWrite
	s.ReplayedRead += st.read
	s.ReplayedWrite += st.write
	s.RecordedIO += time.Duration(st.recIO)
	s.ReplayIO += time.Duration(st.ioTime)
	s.DepWait += time.Duration(st.depWait)
	s.ThinkCut += time.Duration(st.thinkCut)
	s.ThinkWait += time.Duration(st.thinkWait)
	s.ThinkMeasured += st.thinkMeasured
	s.ThinkEstimated += st.thinkEstimated
	s.RunDelayCut += time.Duration(st.runDelayCut)
	s.WokenOps += st.wokenOps
	s.ImplicitOpens += st.implicit
	s.Behind += st.behind
	s.ImplicitOpenFailures += st.implicitFailed
	s.Escapes += st.escapes
	s.Clamped += st.clamped
	s.Overlapped += st.overlapped
	s.MaxQueueDepth = max(s.MaxQueueDepth, st.maxDepth)
	if st.lag != nil {
		s.lag.merge(st.lag)
	}
	if st.lags.to != nil {
		st.lags.flush()
		s.lags = st.lags.to
	}
	for _, ex := range st.examples {
		if len(s.Examples) < 10 {
			s.Examples = append(s.Examples, ex)
		}
	}
	for _, ex := range st.unsupExamples {
		if len(s.BackendExamples) < 5 {
			s.BackendExamples = append(s.BackendExamples, ex)
		}
	}
}

func (s *Summary) finish() {
	ops := s.Ops[:0]
	for _, o := range s.Ops {
		if o.Recorded > 0 {
			ops = append(ops, o)
			s.RecordedOps += o.Recorded
			s.ReplayedOps += o.Replayed
			s.SkippedOps += o.Skipped
			s.Divergences += o.Diverged
			s.BackendDifferences += o.Unsupported + o.Fallbacks
			s.Fallbacks += o.Fallbacks
		}
	}
	s.Ops = ops
	s.Escapes += s.Fold.Escapes
	if s.ReplaySpan > 0 {
		s.ReplayerCPUShare = float64(s.ReplayerCPU) / float64(s.ReplaySpan)
		s.ThinkShare = float64(s.Idle) / float64(s.ReplaySpan)
	}
	s.LagSamples = s.lag.n
	s.LagP50, s.LagP99 = s.lag.quantile(0.5), s.lag.quantile(0.99)
	s.LagMax = time.Duration(s.lag.max)
	s.LagTotal = time.Duration(s.lag.sum)
	if s.lags != nil {
		s.LagUnion = time.Duration(s.lags.total())
	}
	s.LateOver1ms = s.lag.above(int64(time.Millisecond))
	switch {
	case s.Timing == "afap":
	case s.LagSamples > 0 && s.LagP99 > 5*time.Millisecond:
		s.Bottleneck = fmt.Sprintf("issue lag p99 %v: the replayer (CPU, planner or worker queue) could not keep the schedule", s.LagP99)
	case s.LagSamples > 0 && float64(s.LateOver1ms) > 0.05*float64(s.LagSamples):
		s.Bottleneck = fmt.Sprintf("%d of %d ops started more than 1 ms late", s.LateOver1ms, s.LagSamples)
	}
}

// Print writes the summary as text.
func (s *Summary) Print(w io.Writer) {
	fs := s.Target.FSType
	if fs == "s3" && s.Target.Mount != "" {
		fs += ", " + s.Target.Mount // the S3 profile and the settings given for it
	}
	_, _ = fmt.Fprintf(w, "replay onto %s (%s), timing %s, speed %g, %d threads\n", s.Target.Path, fs, s.Timing, s.Speed, s.Threads)
	_, _ = fmt.Fprintf(w, "  recorded events %d -> %d replay ops (%d folded kernel requests, %d split reads/writes merged, %d implicit opens)\n",
		s.Fold.Events, s.RecordedOps, foldedTotal(&s.Fold), s.Fold.Merged, s.ImplicitOpens)
	_, _ = fmt.Fprintf(w, "  ops      replayed %d of %d (skipped %d), divergences %d, backend differences %d\n",
		s.ReplayedOps, s.RecordedOps, s.SkippedOps, s.Divergences, s.BackendDifferences)
	_, _ = fmt.Fprintf(w, "  bytes    read %d of %d, written %d of %d\n", s.ReplayedRead, s.RecordedRead, s.ReplayedWrite, s.RecordedWrite)
	if s.Fold.Unordered > 0 {
		_, _ = fmt.Fprintf(w, "  order    %d events arrived after the sort window had passed their start time (replayed late)\n", s.Fold.Unordered)
	}
	if s.Clamped > 0 {
		_, _ = fmt.Fprintf(w, "  clamped  %d reads, writes or copies asked for more bytes than one system call moves (%d): replayed with that many (damage: no application's call does)\n", s.Clamped, maxRW)
	}
	if s.Escapes > 0 || s.Fold.Unknown > 0 {
		_, _ = fmt.Fprintf(w, "  refused  %d ops whose path leaves the root, %d with an unknown path\n", s.Escapes, s.Fold.Unknown)
	}
	if s.Overlapped > 0 {
		_, _ = fmt.Fprintf(w, "  depth    %d ops overlapped earlier ops of their thread (recorded queue depth up to %d), issued while those ran\n",
			s.Overlapped, s.MaxQueueDepth)
	}
	if s.Behind > 0 && s.Timing == "original" {
		_, _ = fmt.Fprintf(w, "  behind   %d ops were due more than 1 ms before their thread's previous op returned (target slower than recorded)\n", s.Behind)
	}
	if s.ThinkCut > 0 {
		src := ""
		if s.RoundTripSource != "" {
			src = ", " + s.RoundTripSource
		}
		switch {
		case s.ThinkMeasured > 0:
			_, _ = fmt.Fprintf(w, "  think    %d ops waited the application's time between its system calls as the kernel measured it (less %v it waited for a CPU), %d the progress of the thread that woke theirs, %d the recorded gap less the layer's round trip (%v per request%s); %v of recorded gaps not waited for, %v waited\n",
				s.ThinkMeasured, s.RunDelayCut.Round(time.Microsecond), s.WokenOps, s.ThinkEstimated, s.RoundTrip, src, s.ThinkCut.Round(time.Microsecond), s.ThinkWait.Round(time.Microsecond))
		default:
			_, _ = fmt.Fprintf(w, "  think    %v of recorded gaps not waited for: folded requests and the recording layer's round trip (%v per request%s); %v waited\n",
				s.ThinkCut.Round(time.Microsecond), s.RoundTrip, src, s.ThinkWait.Round(time.Microsecond))
		}
	}
	_, _ = fmt.Fprintf(w, "  runtime  replay %v vs recorded %v (%+.1f%%); summed op time %v vs %v (%+.1f%%)\n",
		s.ReplaySpan.Round(time.Microsecond), s.RecordedSpan.Round(time.Microsecond), pct(s.ReplaySpan, s.RecordedSpan),
		s.ReplayIO.Round(time.Microsecond), s.RecordedIO.Round(time.Microsecond), pct(s.ReplayIO, s.RecordedIO))
	switch {
	case s.Prediction != nil:
		_, _ = fmt.Fprintf(w, "  predicts %s\n", s.Prediction.Line())
		_, _ = fmt.Fprintf(w, "  own time %.1f%% of that runtime (%v) had none of the job's calls in flight: the job's own time between its calls, carried over from the recording unchanged; the target changes only the rest\n",
			100*s.ThinkShare, s.Idle.Round(time.Microsecond))
	case s.NoPrediction != "":
		_, _ = fmt.Fprintf(w, "  predicts nothing: %s\n", s.NoPrediction)
	}
	s.printReplayer(w)
	if s.Divergences > 0 || s.SkippedOps > 0 {
		var parts []string
		for _, o := range s.Ops {
			if o.Diverged > 0 || o.Skipped > 0 {
				parts = append(parts, fmt.Sprintf("%s %d/%d diverged, %d skipped", o.Op, o.Diverged, o.Recorded, o.Skipped))
			}
		}
		sort.Strings(parts)
		_, _ = fmt.Fprintf(w, "  per op   %s\n", strings.Join(parts, "; "))
		if s.Divergences > 0 {
			s.printCauses(w)
		}
	}
	if s.BackendDifferences > 0 {
		var parts, fb []string
		for _, o := range s.Ops {
			if o.Unsupported > 0 {
				parts = append(parts, fmt.Sprintf("%s %d/%d", o.Op, o.Unsupported, o.Recorded))
			}
			if o.Fallbacks > 0 {
				fb = append(fb, fmt.Sprintf("%s %d/%d", o.Op, o.Fallbacks, o.Recorded))
			}
		}
		sort.Strings(parts)
		sort.Strings(fb)
		if len(parts) > 0 {
			_, _ = fmt.Fprintf(w, "  backend  not supported by the target or the recorded storage (ENOTSUP/ENOSYS on one side; not divergences): %s\n", strings.Join(parts, "; "))
		}
		if len(fb) > 0 {
			_, _ = fmt.Fprintf(w, "  backend  refused by the target, done as the application does instead (fallbacks; not divergences): %s\n", strings.Join(fb, "; "))
		}
		for _, ex := range s.BackendExamples {
			_, _ = fmt.Fprintf(w, "    e.g. %s\n", ex)
		}
	}
	if s.Bottleneck != "" {
		_, _ = fmt.Fprintf(w, "  WARNING  replayer was the bottleneck: %s\n", s.Bottleneck)
	}
}

// printReplayer states, beside the prediction, how well the replayer kept its schedule
// and how much CPU it took: a prediction made by a replayer that lagged, or that competed
// for the CPUs with the target's client, says so.
func (s *Summary) printReplayer(w io.Writer) {
	var parts []string
	if s.LagSamples > 0 {
		parts = append(parts, fmt.Sprintf("issue lag p50 %v p99 %v max %v, %d ops >1ms late, some op late during %v of the run; waited %v on other threads",
			s.LagP50, s.LagP99, s.LagMax, s.LateOver1ms, s.LagUnion.Round(time.Microsecond), s.DepWait.Round(time.Microsecond)))
	}
	if s.ReplayerCPU > 0 && s.ReplaySpan > 0 {
		parts = append(parts, fmt.Sprintf("CPU %v, %.0f%% of one CPU over the replay (%d CPUs)",
			s.ReplayerCPU.Round(time.Millisecond), 100*s.ReplayerCPUShare, s.CPUs))
	}
	if len(parts) > 0 {
		_, _ = fmt.Fprintf(w, "  replayer %s\n", strings.Join(parts, "; "))
	}
}

// printCauses lists the root causes of the divergences: each first failure on a file,
// then how many divergences followed it; then divergences of their own beyond them.
func (s *Summary) printCauses(w io.Writer) {
	n := 0
	for _, c := range s.Causes {
		if c.Backend && c.Then == 0 {
			continue // listed with the backend differences
		}
		if n == 10 {
			break
		}
		n++
		_, _ = fmt.Fprintf(w, "    cause %s\n", c)
	}
	if n == 0 {
		for _, ex := range s.Examples {
			_, _ = fmt.Fprintf(w, "    e.g. %s\n", ex)
		}
	}
}

func foldedTotal(f *FoldStats) uint64 {
	var n uint64
	for _, v := range f.Folded {
		n += v
	}
	return n
}

func pct(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return 100 * (float64(a) - float64(b)) / float64(b)
}
