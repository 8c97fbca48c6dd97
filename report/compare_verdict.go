package report

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
)

// CompareVerdict is the answer of a comparison for one side, in one line (Text) and in
// figures: its I/O time and its runtime against the baseline's, and the rows (calls, or
// requests with --view requests) that account for most of the difference.
type CompareVerdict struct {
	Side string `json:"side"`
	Text string `json:"text"`
	// IONs is the side's I/O time in the comparison's view (the calls' time in the
	// storage, or the requests' job I/O time); DeltaNs is IONs - BaseIONs.
	IONs     int64   `json:"io_ns"`
	BaseIONs int64   `json:"baseline_io_ns"`
	IORatio  float64 `json:"io_ratio"`
	DeltaNs  int64   `json:"delta_ns"`
	// RuntimeNs is the side's runtime (RuntimeSource says which): the replays' predictions
	// (anchored on the job's native runtime where they were), the recording's native
	// runtime where it keeps one, else its wall time (its duration_ns: each trace's first
	// op's start to its last op's end, runs one after another added up).
	RuntimeNs         int64   `json:"runtime_ns"`
	BaseRuntimeNs     int64   `json:"baseline_runtime_ns"`
	RuntimeRatio      float64 `json:"runtime_ratio"`
	RuntimeSource     string  `json:"runtime_source"`
	BaseRuntimeSource string  `json:"baseline_runtime_source"`
	// RuntimeRatioLow..High and IORatioLow..High hold the ratios where the sides'
	// predictions put them: a side's low against the baseline's high, and the other way.
	// Equal to the ratio when neither side is a prediction.
	RuntimeRatioLow  float64 `json:"runtime_ratio_low"`
	RuntimeRatioHigh float64 `json:"runtime_ratio_high"`
	IORatioLow       float64 `json:"io_ratio_low"`
	IORatioHigh      float64 `json:"io_ratio_high"`
	// Top are up to three rows whose time moved most in the direction of DeltaNs.
	Top []CompareVerdictRow `json:"top"`
	// Differing are the side's calls (requests in the requests view) that have no
	// counterpart of the same kind and outcome (success or failure) on the baseline, of
	// Compared (the larger side's calls; see workDiff). When they are more than
	// MaxWorkDiff of them the side did other work: IORatio, RuntimeRatio and Top are left
	// out (zero, empty) and DiffRows say where it differs.
	Differing uint64        `json:"differing"`
	Compared  uint64        `json:"compared"`
	DiffRows  []WorkDiffRow `json:"differing_rows,omitempty"`
}

// MaxWorkDiff is the share of calls that may differ from the baseline's in kind or outcome
// before a side gets no I/O time or runtime ratio. A replay whose opens failed with
// ENOTDIR is fast because it did nothing; ranking it would be wrong. One per cent leaves
// room for the odd call a backend answers differently (a fallback, an xattr it lacks).
const MaxWorkDiff = 0.01

// WorkDiffRow is a row's part of the calls that differ from the baseline's: how many more
// (or, negative, fewer) succeeded and failed on the side.
type WorkDiffRow struct {
	Name      string `json:"name"`
	Succeeded int64  `json:"succeeded"`
	Failed    int64  `json:"failed"`
}

// differs reports whether the verdict's side did other work than the baseline.
func (v *CompareVerdict) differs() bool {
	return v.Differing > 1 && float64(v.Differing) > MaxWorkDiff*float64(v.Compared)
}

// workDiff counts the calls of side i that have no counterpart of the same kind and
// outcome on the baseline, over rows (the leading view's) but those the same-work check
// leaves out: the larger of the calls the side has in excess and those it lacks, per
// (kind, outcome), against the larger side's number of calls. rows[k].Sides[i] are side
// i's figures. Readdir and readdirplus requests count as one kind.
func (c *Comparison) workDiff(rows []compareRow, i int) (diff, total uint64, byRow []WorkDiffRow) {
	skip := map[string]bool{}
	for _, e := range c.Excluded {
		skip[e] = true
	}
	ax := axisOf(c.View)
	for k := range ax.kinds {
		if ax.isNotWork(k) {
			skip[ax.name(k)] = true
		}
	}
	type counts struct{ ok, failed [2]int64 } // [baseline, side]
	per := map[string]*counts{}
	var names []string
	for _, r := range rows {
		if skip[r.Name] {
			continue
		}
		name := r.Name
		if name == trace.OpReaddirplus.String() {
			name = trace.OpReaddir.String()
		}
		k := per[name]
		if k == nil {
			k = &counts{}
			per[name] = k
			names = append(names, name)
		}
		for j, s := range [2]OpSide{r.Sides[0], r.Sides[i]} {
			k.ok[j] += int64(s.Count - s.Errors)
			k.failed[j] += int64(s.Errors)
		}
	}
	var more, fewer, all [2]int64
	for _, name := range names {
		k := per[name]
		d := WorkDiffRow{Name: name, Succeeded: k.ok[1] - k.ok[0], Failed: k.failed[1] - k.failed[0]}
		for _, x := range []int64{d.Succeeded, d.Failed} {
			if x > 0 {
				more[0] += x
			} else {
				fewer[0] -= x
			}
		}
		for j := range 2 {
			all[j] += k.ok[j] + k.failed[j]
		}
		if d.Succeeded != 0 || d.Failed != 0 {
			byRow = append(byRow, d)
		}
	}
	sort.SliceStable(byRow, func(a, b int) bool {
		return abs64(byRow[a].Succeeded)+abs64(byRow[a].Failed) > abs64(byRow[b].Succeeded)+abs64(byRow[b].Failed)
	})
	return uint64(max(more[0], fewer[0])), uint64(max(all[0], all[1])), byRow
}

// CompareVerdictRow is a row's part of a side's difference.
type CompareVerdictRow struct {
	Name    string `json:"name"`
	DeltaNs int64  `json:"delta_ns"`
	// Share is DeltaNs over the summed change of every row that moved the same way as the
	// side's I/O time (rows moving the other way offset part of it).
	Share float64 `json:"share"`
}

// verdict fills in c.Verdict and c.Verdicts from c's leading view.
func (c *Comparison) verdict() {
	c.Verdict, c.Verdicts = []string{}, []CompareVerdict{}
	if len(c.Sides) < 2 {
		return
	}
	io := func(s *CompareSide) int64 {
		if c.View == ViewSyscalls {
			return s.CallNs
		}
		return s.TotalNs
	}
	rows := c.rows()
	base := &c.Sides[0]
	c.Warnings = slices.DeleteFunc(c.Warnings, func(w string) bool { return slices.Contains(c.diffWarnings, w) })
	c.diffWarnings = nil
	for i := 1; i < len(c.Sides); i++ {
		s := &c.Sides[i]
		v := CompareVerdict{Side: s.Name, IONs: io(s), BaseIONs: io(base)}
		rt, brt := sideRuntime(s), sideRuntime(base)
		if rt.source == RuntimeAnchored && brt.source == RuntimeRecorded {
			// The side's predictions were anchored on the job's native runtime: the
			// baseline's runtime is that, not its wall time under the recording layer.
			brt = nativeOf(s, len(base.Traces))
		}
		v.RuntimeNs, v.BaseRuntimeNs, v.RuntimeSource, v.BaseRuntimeSource = rt.ns, brt.ns, rt.source, brt.source
		v.DeltaNs = v.IONs - v.BaseIONs
		var byRow []WorkDiffRow
		v.Differing, v.Compared, byRow = c.workDiff(rows, i)
		if v.differs() {
			v.DiffRows = byRow[:min(len(byRow), 3)]
			v.Top = []CompareVerdictRow{}
			v.Text = verdictText(&v)
			c.Verdicts = append(c.Verdicts, v)
			c.Verdict = append(c.Verdict, v.Text)
			w := fmt.Sprintf("%s is not the same work as the baseline: %s of its %ss (%s) differ in kind or outcome (success or failure), more than %s; its I/O time and runtime get no ratio",
				s.Name, format.Count(v.Differing), axisOf(c.View).unit, format.Pct(float64(v.Differing)/float64(v.Compared)), format.Pct(MaxWorkDiff))
			c.Warnings = append(c.Warnings, w)
			c.diffWarnings = append(c.diffWarnings, w)
			if c.View == ViewSyscalls {
				s.CallRatio = 0
			} else {
				s.Ratio, s.WorkRatio = 0, 0
			}
			continue
		}
		v.IORatio = ratio(float64(v.IONs), float64(v.BaseIONs))
		v.RuntimeRatio = ratio(float64(v.RuntimeNs), float64(v.BaseRuntimeNs))
		v.RuntimeRatioLow, v.RuntimeRatioHigh = ratioSpan(rt.ns, rt.low, rt.high, brt.ns, brt.low, brt.high)
		sio, bio := sideIO(s, v.IONs), sideIO(base, v.BaseIONs)
		v.IORatioLow, v.IORatioHigh = ratioSpan(v.IONs, sio.low, sio.high, v.BaseIONs, bio.low, bio.high)
		var top []CompareVerdictRow
		var gross int64 // the time the rows moving with DeltaNs moved
		for _, r := range rows {
			d := r.Sides[i].TotalNs - r.Sides[0].TotalNs
			if (d > 0 && v.DeltaNs > 0) || (d < 0 && v.DeltaNs < 0) {
				top = append(top, CompareVerdictRow{Name: r.Name, DeltaNs: d})
				gross += d
			}
		}
		for k := range top {
			top[k].Share = round3(float64(top[k].DeltaNs) / float64(gross))
		}
		sort.SliceStable(top, func(a, b int) bool { return abs64(top[a].DeltaNs) > abs64(top[b].DeltaNs) })
		v.Top = append([]CompareVerdictRow{}, top[:min(len(top), 3)]...)
		v.Text = verdictText(&v)
		c.Verdicts = append(c.Verdicts, v)
		c.Verdict = append(c.Verdict, v.Text)
	}
}

// ratioRange is " (low–high×)" when a ratio has an interval, "" when it is exact.
func ratioRange(r, low, high float64) string {
	if low == r && high == r {
		return ""
	}
	return fmt.Sprintf(" (%s–%s)", strings.TrimSuffix(fmtX(low), "×"), fmtX(high))
}

// span is a figure with the interval it is known in, and where it comes from.
type span struct {
	ns, low, high int64
	source        string
}

// Where a side's runtime comes from (CompareVerdict.RuntimeSource).
const (
	RuntimeAnchored  = "anchored prediction" // replays' predictions anchored on the native runtime
	RuntimePredicted = "prediction"          // replays' predictions
	RuntimeNative    = "native"              // the recording's native runtime
	RuntimeRecorded  = "recorded"            // wall time under the recording layer, or of the replay
)

// sideRuntime is a side's runtime: the sum over its traces of the replays' predictions
// (anchored where every one was), of the recordings' native runtimes, or else the side's
// wall time.
func sideRuntime(s *CompareSide) span {
	var pred, anch, native span
	np, na, nn := 0, 0, 0
	for _, t := range s.Traces {
		if p := t.Prediction; p != nil {
			np++
			pred.ns, pred.low, pred.high = pred.ns+p.RuntimeNs, pred.low+p.RuntimeLowNs, pred.high+p.RuntimeHighNs
			if p.AnchoredNs > 0 {
				na++
				anch.ns, anch.low, anch.high = anch.ns+p.AnchoredNs, anch.low+p.AnchoredLowNs, anch.high+p.AnchoredHighNs
			}
		}
		if t.NativeNs > 0 {
			nn++
			native.ns += t.NativeNs
		}
	}
	n := len(s.Traces)
	switch {
	case n > 0 && na == n:
		anch.source = RuntimeAnchored
		return anch
	case n > 0 && np == n:
		pred.source = RuntimePredicted
		return pred
	case n > 0 && nn == n:
		native.low, native.high, native.source = native.ns, native.ns, RuntimeNative
		return native
	}
	return span{ns: s.DurationNs, low: s.DurationNs, high: s.DurationNs, source: RuntimeRecorded}
}

// nativeOf is the native runtime a side's anchored predictions name, for n traces.
func nativeOf(s *CompareSide, n int) span {
	var ns int64
	for _, t := range s.Traces {
		if t.Prediction != nil && t.Prediction.NativeNs > 0 {
			ns = t.Prediction.NativeNs
			break
		}
	}
	ns *= int64(max(n, 1))
	return span{ns: ns, low: ns, high: ns, source: RuntimeNative}
}

// sideIO is the interval of a side's I/O time ns: the replays' predictions' relative
// interval applied to it, or ns itself.
func sideIO(s *CompareSide, ns int64) span {
	var io, low, high int64
	for _, t := range s.Traces {
		p := t.Prediction
		if p == nil || p.IONs <= 0 {
			return span{ns: ns, low: ns, high: ns}
		}
		io, low, high = io+p.IONs, low+p.IOLowNs, high+p.IOHighNs
	}
	if io == 0 {
		return span{ns: ns, low: ns, high: ns}
	}
	f := float64(ns) / float64(io)
	return span{ns: ns, low: int64(float64(low) * f), high: int64(float64(high) * f)}
}

// ratioSpan returns the lowest and highest ratio of a (in lo..hi) to b (in blo..bhi).
func ratioSpan(a, lo, hi, b, blo, bhi int64) (float64, float64) {
	if b <= 0 || blo <= 0 {
		r := ratio(float64(a), float64(b))
		return r, r
	}
	return ratio(float64(lo), float64(bhi)), ratio(float64(hi), float64(blo))
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// signedCount formats a difference of counts with its sign: "+2,050", "−12".
func signedCount(n int64) string {
	if n < 0 {
		return "−" + format.Count(uint64(-n))
	}
	return "+" + format.Count(uint64(n))
}

// signedDur formats a difference with its sign: "+8.20s", "−1.30ms".
func signedDur(ns int64) string {
	if ns < 0 {
		return "−" + format.Dur(-ns)
	}
	return "+" + format.Dur(ns)
}

// verdictText is a verdict in one line, e.g. "s3fs: 19.2× the baseline's I/O time
// (+8.20s), runtime 3.10×: write +2.20s (27.0%), open +1.90s (23.2%), close +1.00s (12.2%)".
func verdictText(v *CompareVerdict) string {
	var b strings.Builder
	b.WriteString(v.Side + ": ")
	if v.differs() {
		fmt.Fprintf(&b, "no ratio, not the same work: %s of %s (%s) differ from the baseline's in kind or outcome", format.Count(v.Differing),
			format.Count(v.Compared), format.Pct(float64(v.Differing)/float64(v.Compared)))
		var parts []string
		for _, d := range v.DiffRows {
			var p []string
			if d.Failed != 0 {
				p = append(p, signedCount(d.Failed)+" failed")
			}
			if d.Succeeded != 0 {
				p = append(p, signedCount(d.Succeeded)+" succeeded")
			}
			parts = append(parts, d.Name+" "+strings.Join(p, ", "))
		}
		if len(parts) > 0 {
			b.WriteString(": " + strings.Join(parts, "; "))
		}
		return b.String()
	}
	switch {
	case v.BaseIONs == 0 && v.IONs == 0:
		b.WriteString("no I/O time on either side")
	case v.BaseIONs == 0:
		fmt.Fprintf(&b, "%s of I/O time, none on the baseline", format.Dur(v.IONs))
	default:
		fmt.Fprintf(&b, "%s the baseline's I/O time (%s)%s", fmtX(v.IORatio), signedDur(v.DeltaNs), ratioRange(v.IORatio, v.IORatioLow, v.IORatioHigh))
	}
	if v.BaseRuntimeNs > 0 {
		fmt.Fprintf(&b, ", runtime %s%s", fmtX(v.RuntimeRatio), ratioRange(v.RuntimeRatio, v.RuntimeRatioLow, v.RuntimeRatioHigh))
		if v.RuntimeSource == RuntimeAnchored || v.BaseRuntimeSource == RuntimeNative {
			fmt.Fprintf(&b, " (%s against %s)", v.RuntimeSource, v.BaseRuntimeSource)
		}
	}
	var parts []string
	for _, t := range v.Top {
		parts = append(parts, fmt.Sprintf("%s %s (%s)", t.Name, signedDur(t.DeltaNs), format.Pct(t.Share)))
	}
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	return b.String()
}
