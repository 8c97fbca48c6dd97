package report

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// In-flight depth: how many requests of an operation were being served at once (see
// stats.Depth). Each request counts the depth it found when it started, itself included.

// InflightRow is one operation's in-flight depth (the JSON "inflight" of an op).
type InflightRow struct {
	Max        uint32       `json:"max"`
	Mean       float64      `json:"mean"`      // of the depths the requests found at their start
	BusyMean   float64      `json:"busy_mean"` // time-weighted, while at least one was in flight
	P50        uint32       `json:"p50"`
	P90        uint32       `json:"p90"`
	P99        uint32       `json:"p99"`
	LowerBound bool         `json:"lower_bound,omitempty"` // requests arrived too late to place exactly
	Hist       []DepthCount `json:"hist"`                  // requests by the depth they found
}

// DepthCount counts the requests that found Depth requests in flight (themselves included).
type DepthCount struct {
	Depth uint32 `json:"depth"`
	Count uint64 `json:"count"`
}

// InflightIntervals is the in-flight depth over time of the operations that overlapped
// (largest depth at least 2), on the intervals of the view.
type InflightIntervals struct {
	Start   time.Time          `json:"start"`
	WidthNs int64              `json:"width_ns"`
	Ops     []InflightSeriesOp `json:"ops"`
}

// InflightSeriesOp is one operation's depth per interval.
type InflightSeriesOp struct {
	Op   string    `json:"op"`
	Mean []float64 `json:"mean"` // time-weighted mean depth over the interval
	Max  []uint32  `json:"max"`
}

// maxInflightSeries bounds the operations in InflightIntervals (the busiest by time).
const maxInflightSeries = 4

// Overlapped reports whether two requests of the operation were ever in flight together.
func (r *InflightRow) Overlapped() bool { return r != nil && r.Max >= 2 }

func inflightRow(d *stats.Depth) *InflightRow {
	if d.Requests == 0 {
		return nil
	}
	r := &InflightRow{
		Max: d.Max, Mean: round3(d.Mean()), BusyMean: round3(d.BusyMean()),
		P50: d.Percentile(50), P90: d.Percentile(90), P99: d.Percentile(99),
		LowerBound: d.Late > 0, Hist: []DepthCount{},
	}
	for depth, n := range d.Hist {
		if n > 0 {
			r.Hist = append(r.Hist, DepthCount{Depth: uint32(depth), Count: n})
		}
	}
	return r
}

// inflightIntervals picks the operations that overlapped, busiest first.
func inflightIntervals(s *stats.Stats) *InflightIntervals {
	se := &s.Inflight.Series
	var ops []trace.Op
	for op := range s.Inflight.Ops {
		if d := &s.Inflight.Ops[op]; d.Max >= 2 && len(se.Ops[op]) > 0 {
			ops = append(ops, trace.Op(op))
		}
	}
	if len(ops) == 0 || se.Width <= 0 {
		return nil
	}
	sort.SliceStable(ops, func(i, j int) bool {
		return s.Inflight.Ops[ops[i]].AreaNs > s.Inflight.Ops[ops[j]].AreaNs
	})
	out := &InflightIntervals{Start: se.Start.UTC(), WidthNs: int64(se.Width)}
	n := se.Len()
	for _, op := range ops[:min(len(ops), maxInflightSeries)] {
		so := InflightSeriesOp{Op: op.String(), Mean: make([]float64, n), Max: make([]uint32, n)}
		for i, sl := range se.Ops[op] {
			so.Mean[i] = round3(float64(sl.AreaNs) / float64(se.Width))
			so.Max[i] = sl.Max
		}
		out.Ops = append(out.Ops, so)
	}
	return out
}

// inflightSummary is the one-line answer to "at what depth did this job do its I/O": the
// operations that overlapped, busiest first, or that none did.
func inflightSummary(v *View) string {
	var parts []string
	for _, o := range v.Ops {
		d := o.Inflight
		if !d.Overlapped() {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s max %d, p50 %d, p99 %d, mean %s%s", o.Op, d.Max, d.P50, d.P99, depthNum(d.Mean), approx(d.LowerBound)))
		if len(parts) == maxInflightSeries {
			break
		}
	}
	if len(parts) == 0 {
		if len(v.Ops) == 0 {
			return ""
		}
		return "1 (no two requests of one operation were served at the same time)"
	}
	return strings.Join(parts, "; ")
}

// overlapped reports whether any operation of v had two requests in flight together.
func overlapped(v *View) bool {
	for _, o := range v.Ops {
		if o.Inflight.Overlapped() {
			return true
		}
	}
	return false
}

func approx(lowerBound bool) string {
	if lowerBound {
		return " (at least)"
	}
	return ""
}

// depthNum shows a mean depth with one decimal, or two below 10.
func depthNum(f float64) string {
	if f < 10 {
		return fmt.Sprintf("%.2f", math.Round(f*100)/100)
	}
	return fmt.Sprintf("%.1f", f)
}

func writeInflightLine(b *strings.Builder, v *View) {
	if s := inflightSummary(v); s != "" {
		fmt.Fprintf(b, "in flight at once (requests each found being served, itself included): %s\n", s)
	}
}

// writeInflight is the details table: the depth of every operation that overlapped.
func writeInflight(b *strings.Builder, v *View) {
	t := newTable("op", "requests", "max", "mean", "busy mean", "p50", "p90", "p99")
	n := 0
	for _, o := range v.Ops {
		d := o.Inflight
		if !d.Overlapped() {
			continue
		}
		mx := fmt.Sprint(d.Max)
		if d.LowerBound {
			mx = ">=" + mx
		}
		t.add(o.Op, format.Count(o.Count), mx, depthNum(d.Mean), depthNum(d.BusyMean), fmt.Sprint(d.P50), fmt.Sprint(d.P90), fmt.Sprint(d.P99))
		n++
	}
	if n == 0 {
		return
	}
	b.WriteString("\nin-flight depth of the operations that overlapped (the requests each found being served at its\nstart, itself included; busy mean: averaged over the time at least one was in flight)\n")
	b.WriteString(t.String())
}
