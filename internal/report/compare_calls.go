package report

import (
	"fmt"
	"slices"
	"sort"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"

	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// Views of a comparison (Comparison.View): per system call, or per FUSE request.
const (
	ViewSyscalls = "syscalls"
	ViewRequests = "requests"
)

// CompareCall is one kind of system call across sides.
type CompareCall struct {
	Call  string   `json:"call"`
	Sides []OpSide `json:"sides"`
}

// replaySkips are the kinds of call a replay does not issue: ioctl and the like, and
// setattrs of attributes no single call sets.
var replaySkips = []fold.Syscall{fold.SysOther, fold.SysSetattr}

// replaySkipsWhy is the note shown when replaySkips were left out.
const replaySkipsWhy = "replay does not issue ioctl, poll or setattrs of attributes no single call sets"

// CompareCalls makes c lead with the per-system-call view: it adds each side's calls
// (Calls, CallNs, CallRatio, SlowerCalls, FasterCalls) and bases the same-work check
// (Mismatches) on calls rather than requests. Calls are comparable between a
// recording and its replay: replay issues the calls the recording folds into. It returns
// false, leaving c as it was, when a side has no per-system-call view.
func CompareCalls(c *Comparison, sides []*stats.Stats) bool {
	for _, s := range sides {
		if !s.HasCalls() {
			return false
		}
	}
	c.View = ViewSyscalls
	c.Mismatches, c.Excluded, c.ExcludedWhy = nil, nil, ""
	c.Warnings = slices.DeleteFunc(c.Warnings, func(w string) bool { return w == mixedWarning })
	base := sides[0]
	for i, s := range sides {
		c.Sides[i].CallNs = s.CallTotalNs()
		c.Sides[i].CallRatio = ratio(float64(c.Sides[i].CallNs), float64(base.CallTotalNs()))
		// The requests view's ratios, which a verdict of that view may have left out.
		c.Sides[i].Ratio = ratio(float64(c.Sides[i].TotalNs), float64(c.Sides[0].TotalNs))
		c.Sides[i].WorkRatio = ratio(float64(c.Sides[i].WorkNs), float64(c.Sides[0].WorkNs))
		c.Sides[i].Job = jobRates(s, c.Sides[i].DurationNs, true)
		if i == 0 {
			continue
		}
		var skip []fold.Syscall
		if hasKind(&c.Sides[0], "record") != hasKind(&c.Sides[i], "record") &&
			(hasKind(&c.Sides[0], "replay") || hasKind(&c.Sides[i], "replay")) {
			skip = replaySkips
			if c.Excluded == nil {
				for _, k := range replaySkips {
					c.Excluded = append(c.Excluded, k.String())
				}
				c.ExcludedWhy = replaySkipsWhy
			}
		}
		for _, m := range SameCalls(base, s, c.Tolerance, skip...) {
			c.Mismatches = append(c.Mismatches, c.Sides[i].Name+": "+m)
		}
	}
	type key struct {
		k     int
		total int64
	}
	var order []key
	for k := range fold.NumSyscalls {
		var any bool
		for _, s := range sides {
			any = any || s.Calls[k].Count > 0
		}
		if any {
			order = append(order, key{int(k), base.Calls[k].TotalNs})
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return order[a].total > order[b].total })
	c.Calls = nil
	var slower, faster []Change
	totals := make([]int64, len(sides))
	for i, s := range sides {
		totals[i] = s.CallTotalNs()
	}
	for _, k := range order {
		cc := CompareCall{Call: fold.Syscall(k.k).String()}
		for si, s := range sides {
			in := sideIn{o: &s.Calls[k.k].OpStats, busy: s.Calls[k.k].BusyNs}
			if fold.Syscall(k.k) == fold.SysRead {
				in.first, in.again = &s.CallFirstReads, &s.CallRereads
			}
			os := opSide(cc.Call, in, &base.Calls[k.k].OpStats, si > 0)
			cc.Sides = append(cc.Sides, os)
			if si > 0 {
				slower, faster = addChange(slower, faster, change(c.Sides[si].Name, cc.Call, &cc.Sides[0], &os), totals[0], totals[si])
			}
		}
		c.Calls = append(c.Calls, cc)
	}
	c.SlowerCalls, c.FasterCalls = mostChanged(slower, faster)
	c.verdict()
	return true
}

// sideIn are one side's figures of an op or call, for opSide.
type sideIn struct {
	o            *stats.OpStats
	busy         int64
	first, again *stats.AccessStats // reads only
}

// opSide is one side's figures of an op or call named name, with ratios to the
// baseline's (base) when ratios is set.
func opSide(name string, in sideIn, base *stats.OpStats, ratios bool) OpSide {
	o := in.o
	ok := o.Succeeded()
	l := latency(ok.Hist, ok.Count, ok.TotalNs, ok.MaxNs)
	os := OpSide{Count: o.Count, Errors: o.Errors, Bytes: o.Bytes, MeanNs: l.MeanNs, P50: l.P50, P99: l.P99, TotalNs: o.TotalNs,
		BusyNs: in.busy, Hist: histBins(o.Hist)}
	os.OpsPerS, os.FailsPerS, os.MBps = opRates(name, o.Count, o.Errors, o.Bytes, in.busy)
	if len(o.Errnos) > 0 {
		os.Errnos = map[string]uint64{}
		for e, n := range o.Errnos {
			os.Errnos[trace.ErrnoName(e)] += n
		}
	}
	if in.first != nil {
		os.FirstAccess, os.Reaccess = accessRow(in.first), accessRow(in.again)
	}
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

// changes returns the most slower and faster rows of c's leading view.
func (c *Comparison) changes() (slower, faster []Change) {
	if c.View == ViewSyscalls {
		return c.SlowerCalls, c.FasterCalls
	}
	return c.Slower, c.Faster
}

// SameCalls lists why other does not look like the same work as base, call by call:
// counts of each kind of system call but those in skip, bytes read (read and
// copy_file_range) and bytes written (write and copy_file_range) that differ by more than
// tol (a fraction of the larger value). Counts that differ by a single call are ignored.
func SameCalls(base, other *stats.Stats, tol float64, skip ...fold.Syscall) []string {
	var out []string
	off := func(a, b uint64) bool {
		hi := max(a, b)
		return hi > 0 && hi-min(a, b) > 1 && float64(hi-min(a, b)) > tol*float64(hi)
	}
	for k := range fold.NumSyscalls {
		if slices.Contains(skip, k) {
			continue
		}
		a, b := base.Calls[k].Count, other.Calls[k].Count
		if off(a, b) {
			out = append(out, fmt.Sprintf("%s calls %d vs %d (%s)", k, a, b, apart(a, b)))
		}
	}
	rb := func(s *stats.Stats) uint64 { return s.Calls[fold.SysRead].Bytes + s.Calls[fold.SysCopyFileRange].Bytes }
	wb := func(s *stats.Stats) uint64 {
		return s.Calls[fold.SysWrite].Bytes + s.Calls[fold.SysCopyFileRange].Bytes
	}
	if off(rb(base), rb(other)) {
		out = append(out, fmt.Sprintf("bytes read %d vs %d (%s)", rb(base), rb(other), apart(rb(base), rb(other))))
	}
	if off(wb(base), wb(other)) {
		out = append(out, fmt.Sprintf("bytes written %d vs %d (%s)", wb(base), wb(other), apart(wb(base), wb(other))))
	}
	return out
}

// compareRow is one row of a comparison's leading view, for the writers.
type compareRow struct {
	Name  string
	Sides []OpSide
}

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
