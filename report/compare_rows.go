package report

import (
	"slices"
	"sort"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace/stats"
)

// compareRows compares the rows of ax across sides (css are their CompareSides), by the
// baseline's total time, the largest first, and picks the rows whose time moved most on
// each side. Rows that are not work (axis.notWork) give no change between a recording
// and a replay (mixed): replay folds or reshapes them.
func compareRows(ax *axis, css []CompareSide, sides []*stats.Stats, mixed bool) (rows []compareRow, slower, faster []Change) {
	type key struct {
		k     int
		total int64
	}
	var order []key
	for k := range ax.kinds {
		if slices.ContainsFunc(sides, func(s *stats.Stats) bool { return ax.in(s, k).o.Count > 0 }) {
			order = append(order, key{k, ax.in(sides[0], k).o.TotalNs})
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].total > order[b].total })
	totals := make([]int64, len(sides))
	for i, s := range sides {
		totals[i] = ax.total(s)
	}
	for _, o := range order {
		r := compareRow{Name: ax.name(o.k)}
		base := ax.in(sides[0], o.k).o
		for i, s := range sides {
			os := opSide(r.Name, ax.in(s, o.k), base, i > 0)
			r.Sides = append(r.Sides, os)
			if i == 0 || (mixed && ax.isNotWork(o.k)) {
				continue
			}
			slower, faster = addChange(slower, faster, change(css[i].Name, r.Name, &r.Sides[0], &os), totals[0], totals[i])
		}
		rows = append(rows, r)
	}
	slower, faster = mostChanged(slower, faster)
	return rows, slower, faster
}

// opSide is one side's figures of an op or call named name, with ratios to the
// baseline's (base) when ratios is set.
func opSide(name string, in rowIn, base *stats.OpStats, ratios bool) OpSide {
	o := in.o
	ok := o.Succeeded()
	l := latency(ok.Hist, ok.Count, ok.TotalNs, ok.MaxNs)
	os := OpSide{Count: o.Count, Errors: o.Errors, Errnos: errnoNames(o.Errnos), Bytes: o.Bytes, MeanNs: l.MeanNs, P50: l.P50, P99: l.P99,
		TotalNs: o.TotalNs, Rates: rowRates(name, in), AccessSplit: accessSplit(in), Hist: histBins(o.Hist)}
	if !ratios {
		return os
	}
	bok := base.Succeeded()
	bl := latency(bok.Hist, bok.Count, bok.TotalNs, bok.MaxNs)
	if o.Count != base.Count {
		os.Flags = append(os.Flags, "≠count")
	}
	if o.Bytes != base.Bytes {
		os.Flags = append(os.Flags, "≠bytes")
	}
	lat := true
	if dataOp(name) && (o.Bytes == 0) != (base.Bytes == 0) && o.Count > 0 && base.Count > 0 {
		os.Flags = append(os.Flags, "no data")
		lat = false
	}
	if (ok.Count == 0 && o.Count > 0) || (bok.Count == 0 && base.Count > 0) {
		os.Flags = append(os.Flags, "all failed")
		lat = false
	}
	os.Ratio = &Ratios{Count: ratio(float64(o.Count), float64(base.Count))}
	if lat && ok.Count > 0 && bok.Count > 0 {
		os.Ratio.P50 = ratio(float64(l.P50), float64(bl.P50))
		os.Ratio.P99 = ratio(float64(l.P99), float64(bl.P99))
		os.Ratio.Mean = ratio(l.MeanNs, bl.MeanNs)
	}
	if o.Count != base.Count {
		os.Ratio.Total = ratio(float64(o.TotalNs), float64(base.TotalNs))
	}
	return os
}

// change is the change of a row's total time on a side against the baseline.
func change(side, name string, base, os *OpSide) Change {
	ch := Change{Side: side, Op: name, BaseNs: base.TotalNs, TotalNs: os.TotalNs, DeltaNs: os.TotalNs - base.TotalNs, Flags: os.Flags}
	if os.Ratio != nil {
		ch.MeanRatio, ch.P99Ratio = os.Ratio.Mean, os.Ratio.P99
	}
	return ch
}

// minChangeShare is the share of a side's (or the baseline's) time a row must carry to be
// among the most slower or faster: a row of negligible time may change by a large ratio
// and mean nothing.
const minChangeShare = 0.01

// addChange adds ch to slower or faster when its row carries at least minChangeShare of
// the baseline's time (baseTotal) or of the side's (total).
func addChange(slower, faster []Change, ch Change, baseTotal, total int64) ([]Change, []Change) {
	if share(ch.BaseNs, baseTotal) < minChangeShare && share(ch.TotalNs, total) < minChangeShare {
		return slower, faster
	}
	switch {
	case ch.DeltaNs > 0:
		slower = append(slower, ch)
	case ch.DeltaNs < 0:
		faster = append(faster, ch)
	}
	return slower, faster
}

// mostChanged keeps the five largest changes each way, largest first.
func mostChanged(slower, faster []Change) ([]Change, []Change) {
	sort.SliceStable(slower, func(a, b int) bool { return slower[a].DeltaNs > slower[b].DeltaNs })
	sort.SliceStable(faster, func(a, b int) bool { return faster[a].DeltaNs < faster[b].DeltaNs })
	return append([]Change{}, slower[:min(len(slower), 5)]...), append([]Change{}, faster[:min(len(faster), 5)]...)
}

// compareRow is one row of a comparison's leading view, for the writers.
type compareRow struct {
	Name  string
	Sides []OpSide
}

// A comparison keeps each view's rows in fields of its own (the JSON's): rows and changes
// read those of the leading view, put writes those of a view.

// rows returns the rows of c's leading view: calls, or FUSE requests.
func (c *Comparison) rows() []compareRow {
	var out []compareRow
	if c.View == ViewSyscalls {
		for _, cc := range c.Calls {
			out = append(out, compareRow{cc.Call, cc.Sides})
		}
		return out
	}
	for _, o := range c.Ops {
		out = append(out, compareRow{o.Op, o.Sides})
	}
	return out
}

// changes returns the most slower and faster rows of c's leading view.
func (c *Comparison) changes() (slower, faster []Change) {
	if c.View == ViewSyscalls {
		return c.SlowerCalls, c.FasterCalls
	}
	return c.Slower, c.Faster
}

// put makes rows, and slower and faster, the rows and most changed of view in c.
func (c *Comparison) put(view string, rows []compareRow, slower, faster []Change) {
	if view == ViewSyscalls {
		c.Calls = nil
		for _, r := range rows {
			c.Calls = append(c.Calls, CompareCall{Call: r.Name, Sides: r.Sides})
		}
		c.SlowerCalls, c.FasterCalls = slower, faster
		return
	}
	c.Ops = nil
	for _, r := range rows {
		c.Ops = append(c.Ops, CompareOp{Op: r.Name, Sides: r.Sides})
	}
	c.Slower, c.Faster = slower, faster
}

// compareSidesTable starts the table of sides of a view.
func compareSidesTable(view string) *table {
	if view == ViewSyscalls {
		return newTable("side", "kind", "host", "fs", "cache", "events", "duration", "call time", "ratio", "data share")
	}
	return newTable("side", "kind", "host", "fs", "cache", "events", "duration", "job I/O time", "ratio", "work time", "ratio", "data share")
}

// compareSideTimes are the cells of a side's times in a view.
func compareSideTimes(view string, s *CompareSide) []string {
	if view == ViewSyscalls {
		return []string{format.Dur(s.CallNs), fmtRatio(s.CallRatio), format.Pct(s.DataShare)}
	}
	return []string{format.Dur(s.TotalNs), fmtRatio(s.Ratio), format.Dur(s.WorkNs), fmtRatio(s.WorkRatio), format.Pct(s.DataShare)}
}
