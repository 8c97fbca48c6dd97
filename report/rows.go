package report

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// row is a row of a view of any kind (OpRow, CallRow): its name and the figures every row
// has (Totals, Latency and Pace, which each kind embeds). Building, sorting and printing
// rows need no more of them.
type row interface {
	name() string
	totals() *Totals
	lat() *Latency
	pace() *Pace
}

// rowKind is an axis with the rows it makes (R) and the columns those rows add to the
// figures every row has.
type rowKind[R row] struct {
	*axis
	newRow func(s *stats.Stats, k int) R // a row of kind k of s with its own fields filled in
	// mid and end are the columns of text and HTML tables after the share and at the end;
	// csvHead and csvMid those of CSV after the name and after max_ns.
	mid, end, csvHead, csvMid []column[R]
	// rates, when set, are the columns in place of rate and MB/s (over the row's
	// I/O-active time; MB/s for data ops and calls).
	rates []column[R]
}

// column is a column a kind of row adds to a table.
type column[R row] struct {
	head string // in text and CSV
	html string // in HTML, when it says more than head
	cell func(R) string
}

// opRows are the rows of a report's ops[], one per kind of FUSE request.
var opRows = rowKind[*OpRow]{
	axis:    &requestAxis,
	newRow:  newOpRow,
	csvHead: []column[*OpRow]{{head: "class", cell: func(o *OpRow) string { return o.Class }}},
}

// callRows are the rows of a report's syscalls[], one per kind of system call.
var callRows = rowKind[*CallRow]{
	axis:   &callAxis,
	newRow: newCallRow,
	mid: []column[*CallRow]{
		{head: "meta", cell: func(c *CallRow) string { return format.Dur(c.MetaNs) }},
		{head: "data", cell: func(c *CallRow) string { return format.Dur(c.DataNs) }},
	},
	end: []column[*CallRow]{{head: "req/call", html: "requests per call", cell: func(c *CallRow) string {
		if c.Requests == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", c.PerCall)
	}}},
	csvMid: []column[*CallRow]{
		{head: "requests", cell: func(c *CallRow) string { return strconv.FormatUint(c.Requests, 10) }},
		{head: "requests_per_call", cell: func(c *CallRow) string { return csvFloat(c.PerCall) }},
		{head: "max_requests", cell: func(c *CallRow) string { return strconv.FormatUint(c.MaxRequests, 10) }},
		{head: "meta_ns", cell: func(c *CallRow) string { return strconv.FormatInt(c.MetaNs, 10) }},
		{head: "data_ns", cell: func(c *CallRow) string { return strconv.FormatInt(c.DataNs, 10) }},
	},
}

// build makes the rows of the kinds s has (a count above 0), by total time, the largest
// first (then by name).
func (rk *rowKind[R]) build(s *stats.Stats) []R {
	total := rk.total(s)
	var rows []R
	for k := range rk.kinds {
		in := rk.in(s, k)
		if in.o.Count == 0 {
			continue
		}
		r := rk.newRow(s, k)
		*r.totals(), *r.lat(), *r.pace() = figures(rk.name(k), in, total)
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if a, b := rows[i].totals().TotalNs, rows[j].totals().TotalNs; a != b {
			return a > b
		}
		return rows[i].name() < rows[j].name()
	})
	return rows
}

// figures are the figures every row has, of a row named name with figures in, whose time
// is a share of total.
func figures(name string, in rowIn, total int64) (Totals, Latency, Pace) {
	o := in.o
	t := Totals{Errors: o.Errors, Errnos: errnoNames(o.Errnos), Bytes: o.Bytes, TotalNs: o.TotalNs, Share: share(o.TotalNs, total)}
	p := Pace{Rates: rowRates(name, in), AccessSplit: accessSplit(in), CDF: cdf(o.Hist, o.MaxNs), Hist: histBins(o.Hist)}
	return t, latency(o.Hist, o.Count, o.TotalNs, o.MaxNs), p
}

// errnoNames keys counts by errno name; nil when there are none.
func errnoNames(m map[uint16]uint64) map[string]uint64 {
	if len(m) == 0 {
		return nil
	}
	out := map[string]uint64{}
	for e, n := range m {
		out[trace.ErrnoName(e)] += n
	}
	return out
}

// rowTable is rows as the text and HTML tables show them.
type rowTable struct {
	Unit  string   // the name column's header
	Heads []string // the other columns' headers
	Rows  []rowLine
	// Access are the rows' first-access lines (accessLine).
	Access []string
}

// rowLine is one row of a rowTable: its name, its other cells, and its failures by errno
// (HTML only).
type rowLine struct {
	Name   string
	Cells  []string
	Errnos string
}

// table lays rows out for text (html false) or HTML: count, errors, bytes, total and
// share, the kind's mid columns, rate, MB/s, mean, p50, p90, p99, p99.9 and max, and its
// end columns.
func (rk *rowKind[R]) table(rows []R, html bool) rowTable {
	heads := func(cs []column[R]) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.head
			if html && c.html != "" {
				out[i] = c.html
			}
		}
		return out
	}
	cells := func(r R, cs []column[R]) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.cell(r)
		}
		return out
	}
	t := rowTable{Unit: rk.unit}
	rates := []string{"rate", "MB/s"}
	if rk.rates != nil {
		rates = heads(rk.rates)
	}
	t.Heads = append([]string{"count", "errors", "bytes", "total", "share"}, heads(rk.mid)...)
	t.Heads = append(append(t.Heads, rates...), "mean", "p50", "p90", "p99", "p99.9", "max")
	t.Heads = append(t.Heads, heads(rk.end)...)
	for _, r := range rows {
		n, tot, l, p := r.name(), r.totals(), r.lat(), r.pace()
		bytes := "-"
		if tot.Bytes > 0 {
			bytes = format.Bytes(tot.Bytes)
		}
		line := rowLine{Name: n, Errnos: errnoList(tot.Errnos)}
		rates := []string{rateCell(n, p.OpsPerS), mbCell(n, p.MBps)}
		if rk.rates != nil {
			rates = cells(r, rk.rates)
		}
		line.Cells = append([]string{format.Count(l.Count), format.Count(tot.Errors), bytes, format.Dur(tot.TotalNs), format.Pct(tot.Share)},
			cells(r, rk.mid)...)
		line.Cells = append(append(line.Cells, rates...), format.Dur(int64(l.MeanNs)),
			format.Dur(l.P50), format.Dur(l.P90), format.Dur(l.P99), format.Dur(l.P999), format.Dur(l.MaxNs))
		line.Cells = append(line.Cells, cells(r, rk.end)...)
		t.Rows = append(t.Rows, line)
		if a := accessLine(n+" "+rk.plural, p.FirstAccess, p.Reaccess); a != "" {
			t.Access = append(t.Access, a)
		}
	}
	return t
}

// String is the table in text.
func (t *rowTable) String() string {
	tt := newTable(append([]string{t.Unit}, t.Heads...)...)
	for _, l := range t.Rows {
		tt.add(append([]string{l.Name}, l.Cells...)...)
	}
	return tt.String()
}

// csv is the CSV table of the rows of views (rowsOf picks them): view, name, the kind's
// head columns, count, errors, bytes, total_ns, share, mean_ns, p50_ns, p90_ns, p99_ns,
// p99_9_ns, max_ns, the kind's mid columns, busy_ns, ops_per_s and mb_per_s.
func (rk *rowKind[R]) csv(views []*View, rowsOf func(*View) []R) [][]string {
	head := []string{"view", rk.unit}
	for _, c := range rk.csvHead {
		head = append(head, c.head)
	}
	head = append(head, "count", "errors", "bytes", "total_ns", "share", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns", "max_ns")
	for _, c := range rk.csvMid {
		head = append(head, c.head)
	}
	out := [][]string{append(head, "busy_ns", "ops_per_s", "mb_per_s")}
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, v := range views {
		for _, r := range rowsOf(v) {
			t, l, p := r.totals(), r.lat(), r.pace()
			line := []string{v.Name, r.name()}
			for _, c := range rk.csvHead {
				line = append(line, c.cell(r))
			}
			line = append(line, u(l.Count), u(t.Errors), u(t.Bytes), i64(t.TotalNs), csvFloat(t.Share), csvFloat(l.MeanNs),
				i64(l.P50), i64(l.P90), i64(l.P99), i64(l.P999), i64(l.MaxNs))
			for _, c := range rk.csvMid {
				line = append(line, c.cell(r))
			}
			out = append(out, append(line, i64(p.BusyNs), csvFloat(p.OpsPerS), csvFloat(p.MBps)))
		}
	}
	return out
}

// csvFloat is a float as CSV has it: as few digits as say it exactly.
func csvFloat(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// writeErrnos lists the failures of each of rows by errno, under title.
func writeErrnos[R row](b *strings.Builder, title string, rows []R) {
	var lines []string
	for _, r := range rows {
		if m := r.totals().Errnos; len(m) > 0 {
			lines = append(lines, fmt.Sprintf("  %-12s %s\n", r.name(), errnoList(m)))
		}
	}
	if len(lines) > 0 {
		b.WriteString("\n" + title + "\n")
		b.WriteString(strings.Join(lines, ""))
	}
}

// plotted are the names and latency histograms of the rows plotted: the first
// maxPlotOps (the busiest by total time).
func plotted[R row](rows []R) (names []string, bins [][]HistBin) {
	for _, r := range rows[:min(len(rows), maxPlotOps)] {
		names = append(names, r.name())
		bins = append(bins, r.pace().Hist)
	}
	return names, bins
}
