package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/iotap/iotap/internal/format"
)

// Verdict is the answer of a comparison for one side, in one line (Text) and in figures:
// its I/O time and its runtime against the baseline's, and the rows (calls, or requests
// with --view requests) that account for most of the difference.
type Verdict struct {
	Side string `json:"side"`
	Text string `json:"text"`
	// IONs is the side's I/O time in the comparison's view (the calls' time in the
	// storage, or the requests' job I/O time); DeltaNs is IONs - BaseIONs.
	IONs     int64   `json:"io_ns"`
	BaseIONs int64   `json:"baseline_io_ns"`
	IORatio  float64 `json:"io_ratio"`
	DeltaNs  int64   `json:"delta_ns"`
	// RuntimeNs is the side's wall time (its duration_ns: each trace's first op's start to
	// its last op's end, runs one after another added up).
	RuntimeNs     int64   `json:"runtime_ns"`
	BaseRuntimeNs int64   `json:"baseline_runtime_ns"`
	RuntimeRatio  float64 `json:"runtime_ratio"`
	// Top are up to three rows whose time moved most in the direction of DeltaNs.
	Top []VerdictRow `json:"top"`
}

// VerdictRow is a row's part of a side's difference.
type VerdictRow struct {
	Name    string `json:"name"`
	DeltaNs int64  `json:"delta_ns"`
	// Share is DeltaNs over the summed change of every row that moved the same way as the
	// side's I/O time (rows moving the other way offset part of it).
	Share float64 `json:"share"`
}

// verdict fills in c.Verdict and c.Verdicts from c's leading view.
func (c *Comparison) verdict() {
	c.Verdict, c.Verdicts = []string{}, []Verdict{}
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
	for i := 1; i < len(c.Sides); i++ {
		s := &c.Sides[i]
		v := Verdict{Side: s.Name, IONs: io(s), BaseIONs: io(base), RuntimeNs: s.DurationNs, BaseRuntimeNs: base.DurationNs}
		v.IORatio = ratio(float64(v.IONs), float64(v.BaseIONs))
		v.RuntimeRatio = ratio(float64(v.RuntimeNs), float64(v.BaseRuntimeNs))
		v.DeltaNs = v.IONs - v.BaseIONs
		var top []VerdictRow
		var gross int64 // the time the rows moving with DeltaNs moved
		for _, r := range rows {
			d := r.Sides[i].TotalNs - r.Sides[0].TotalNs
			if (d > 0 && v.DeltaNs > 0) || (d < 0 && v.DeltaNs < 0) {
				top = append(top, VerdictRow{Name: r.Name, DeltaNs: d})
				gross += d
			}
		}
		for k := range top {
			top[k].Share = round3(float64(top[k].DeltaNs) / float64(gross))
		}
		sort.SliceStable(top, func(a, b int) bool { return abs64(top[a].DeltaNs) > abs64(top[b].DeltaNs) })
		v.Top = append([]VerdictRow{}, top[:min(len(top), 3)]...)
		v.Text = verdictText(&v)
		c.Verdicts = append(c.Verdicts, v)
		c.Verdict = append(c.Verdict, v.Text)
	}
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// signedDur formats a difference with its sign: "+8.20s", "−1.30ms".
func signedDur(ns int64) string {
	if ns < 0 {
		return "−" + format.Dur(-ns)
	}
	return "+" + format.Dur(ns)
}

// verdictText is a verdict in one line, e.g. "s3fs: 19.2× the baseline's I/O time
// (+8.20s), runtime 3.10×: flush +2.20s (27%), write +1.90s (23%), create +1.00s (12%)".
func verdictText(v *Verdict) string {
	var b strings.Builder
	b.WriteString(v.Side + ": ")
	switch {
	case v.BaseIONs == 0 && v.IONs == 0:
		b.WriteString("no I/O time on either side")
	case v.BaseIONs == 0:
		fmt.Fprintf(&b, "%s of I/O time, none on the baseline", format.Dur(v.IONs))
	default:
		fmt.Fprintf(&b, "%s the baseline's I/O time (%s)", fmtX(v.IORatio), signedDur(v.DeltaNs))
	}
	if v.BaseRuntimeNs > 0 {
		fmt.Fprintf(&b, ", runtime %s", fmtX(v.RuntimeRatio))
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
