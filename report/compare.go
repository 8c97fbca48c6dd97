package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"gonum.org/v1/plot/vg"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// CompareSchema identifies the JSON form of a comparison.
const CompareSchema = "iotap.compare/v1"

// Views of a comparison (Comparison.View): per system call, or per FUSE request.
const (
	ViewSyscalls = "syscalls"
	ViewRequests = "requests"
)

// Comparison puts traces of the same work on different storage side by side. Side 0 is the
// baseline; ratios are side / baseline (above 1: slower or more).
type Comparison struct {
	Schema string `json:"schema"`
	// Verdict is the answer in one line per side but the baseline (compare_verdict.go),
	// with its figures in Verdicts.
	Verdict   []string         `json:"verdict"`
	Verdicts  []CompareVerdict `json:"verdict_figures"`
	Tolerance float64          `json:"tolerance"`
	// View is the view that leads (ViewSyscalls or ViewRequests): its rows come first in
	// text and HTML, and the same-work check and the most slower and faster lists use it.
	View       string   `json:"view"`
	Forced     bool     `json:"forced,omitempty"`
	Mismatches []string `json:"mismatches,omitempty"` // why the sides are not the same work
	// Excluded are the ops the same-work check left out because one side is a recording
	// and another a replay of it (see ReplayFolded), with ExcludedWhy saying why.
	Excluded    []string      `json:"excluded_ops,omitempty"`
	ExcludedWhy string        `json:"excluded_why,omitempty"`
	Warnings    []string      `json:"warnings,omitempty"`
	Sides       []CompareSide `json:"sides"`
	Calls       []CompareCall `json:"syscalls,omitempty"` // per kind of system call (see CompareCalls)
	Ops         []CompareOp   `json:"ops"`
	Slower      []Change      `json:"slower"` // ops that lost the most time against the baseline
	Faster      []Change      `json:"faster"` // ops that gained the most
	// SlowerCalls and FasterCalls are the kinds of system call that lost and gained the
	// most (see CompareCalls); Change.Op names the call.
	SlowerCalls []Change `json:"slower_calls,omitempty"`
	FasterCalls []Change `json:"faster_calls,omitempty"`

	diffWarnings []string // the warnings verdict added (it may run again for another view)
}

// CompareSide is one side: one trace, or several merged (a directory of per-node traces).
type CompareSide struct {
	Name       string  `json:"name"`
	Traces     []Trace `json:"traces"`
	Events     uint64  `json:"events"`
	DurationNs int64   `json:"duration_ns"`
	TotalNs    int64   `json:"total_ns"` // job I/O time
	Ratio      float64 `json:"total_ratio"`
	// WorkNs is the time of the ops SameWork counts (all but lookup, forget, release,
	// releasedir, flush): comparable between a recorded trace and its replay.
	WorkNs    int64   `json:"work_ns"`
	WorkRatio float64 `json:"work_ratio"`
	DataShare float64 `json:"data_share"`
	// Use is the side's throughput beside what its storage client and iotap used
	// (client.go); nil when its traces were not sampled.
	Use *SideUse `json:"resources,omitempty"`
	// CallNs is the summed time of the side's system calls (the per-system-call view);
	// CallRatio is it over the baseline's.
	CallNs    int64   `json:"call_ns,omitempty"`
	CallRatio float64 `json:"call_ratio,omitempty"`
	// Job is the side's bytes and rates over its wall and I/O-active time, counted in the
	// comparison's view (as in a report's view).
	Job *JobRates `json:"job"`
}

// CompareOp is one operation across sides.
type CompareOp struct {
	Op    string   `json:"op"`
	Sides []OpSide `json:"sides"`
}

// CompareCall is one kind of system call across sides.
type CompareCall struct {
	Call  string   `json:"call"`
	Sides []OpSide `json:"sides"`
}

// OpSide is one operation or kind of call on one side.
type OpSide struct {
	Count  uint64            `json:"count"`
	Errors uint64            `json:"errors"`
	Errnos map[string]uint64 `json:"errnos,omitempty"` // failures by errno
	Bytes  uint64            `json:"bytes"`
	// MeanNs, P50 and P99 are over the ops that succeeded (failures fail at their own
	// speed); TotalNs is the time of all ops, failed ones included.
	MeanNs  float64 `json:"mean_ns"`
	P50     int64   `json:"p50_ns"`
	P99     int64   `json:"p99_ns"`
	TotalNs int64   `json:"total_ns"`
	// Rates and AccessSplit are as in a report's rows.
	Rates
	AccessSplit
	// Flags say why the side's ratios must be read with care, or are not given:
	// "≠count" (its count differs from the baseline's), "≠bytes" (its bytes differ),
	// "no data" (a data op that moved no bytes on this side or on the baseline: no
	// latency ratio), "all failed" (no op succeeded on this side or on the baseline: no
	// latency ratio).
	Flags []string  `json:"flags,omitempty"`
	Ratio *Ratios   `json:"ratio,omitempty"` // nil on the baseline
	Hist  []HistBin `json:"hist"`
}

// Ratios are side / baseline. The latency ratios (p50, p99, mean) are over the ops that
// succeeded on both sides; 0 when not given (the baseline value is 0, or a flag says
// why). Total is given only when the counts differ (with equal counts the mean ratio
// says the same).
type Ratios struct {
	Count float64 `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	Mean  float64 `json:"mean"`
	Total float64 `json:"total,omitempty"`
}

// Change is an op whose total time moved most between the baseline and a side.
type Change struct {
	Side      string  `json:"side"`
	Op        string  `json:"op"`
	BaseNs    int64   `json:"baseline_total_ns"`
	TotalNs   int64   `json:"total_ns"`
	DeltaNs   int64   `json:"delta_ns"`
	MeanRatio float64 `json:"mean_ratio"`
	P99Ratio  float64 `json:"p99_ratio"`
	// Flags are the side's flags of the row (see OpSide).
	Flags []string `json:"flags,omitempty"`
}

// notWork are operations whose counts depend on the kernel and on the replay engine more
// than on the job: path-walk lookups (the kernel issues them per component, and replay folds
// them into the call they belong to), forgets, and the release/flush of a close (replay
// closes with one call). SameWork does not count them.
var notWork = [trace.NumOps]bool{
	trace.OpLookup: true, trace.OpForget: true, trace.OpRelease: true, trace.OpReleasedir: true, trace.OpFlush: true,
}

// ReplayFolded are the operations whose counts a replay does not reproduce by design, on
// top of notWork: the kernel's getattr and getxattr(security.capability) probes before a
// write or setattr, which the replayed call makes the target's kernel issue again (and a
// system-call target does not record), and ioctl, which replay does not issue. The
// same-work check leaves them out when a recording is compared with a replay.
var ReplayFolded = []trace.Op{trace.OpGetattr, trace.OpGetxattr, trace.OpIoctl}

// SameWork lists why other does not look like the same work as base, per FUSE request:
// counts of the operations the job asked for (all but lookup, forget, release, releasedir
// and flush, and the ops in skip; readdir and readdirplus count together), bytes read or
// bytes written that differ by more than tol (a fraction of the larger value). Counts that
// differ by a single op are ignored.
func SameWork(base, other *stats.Stats, tol float64, skip ...trace.Op) []string {
	return requestAxis.sameWork(base, other, tol, kindNames(skip))
}

// SameCalls lists why other does not look like the same work as base, call by call:
// counts of each kind of system call but those in skip, bytes read (read and
// copy_file_range) and bytes written (write and copy_file_range) that differ by more than
// tol (a fraction of the larger value). Counts that differ by a single call, and bytes by
// a single byte, are ignored.
func SameCalls(base, other *stats.Stats, tol float64, skip ...fold.Syscall) []string {
	return callAxis.sameWork(base, other, tol, kindNames(skip))
}

// sameWork lists why other does not look like the same work as base in ax's rows: the
// counts of ax.work but those named in skip, bytes read or bytes written, that differ by
// more than tol (a fraction of the larger value). Counts that differ by one, and bytes by
// ax.byteSlack or less, are ignored.
func (ax *axis) sameWork(base, other *stats.Stats, tol float64, skip []string) []string {
	var out []string
	off := func(a, b, slack uint64) bool {
		hi, lo := max(a, b), min(a, b)
		return hi-lo > slack && float64(hi-lo) > tol*float64(hi)
	}
	bw, ow := ax.work(base), ax.work(other)
	for i, name := range bw.names {
		if a, b := bw.counts[i], ow.counts[i]; !slices.Contains(skip, name) && off(a, b, 1) {
			out = append(out, fmt.Sprintf("%s %s %d vs %d (%s)", name, ax.countWord, a, b, apart(a, b)))
		}
	}
	if off(bw.read, ow.read, ax.byteSlack) {
		out = append(out, fmt.Sprintf("bytes read %d vs %d (%s)", bw.read, ow.read, apart(bw.read, ow.read)))
	}
	if off(bw.written, ow.written, ax.byteSlack) {
		out = append(out, fmt.Sprintf("bytes written %d vs %d (%s)", bw.written, ow.written, apart(bw.written, ow.written)))
	}
	return out
}

// apart says how far other is from base as a ratio: "4.00× the baseline", "none on the
// baseline".
func apart(base, other uint64) string {
	if base == 0 {
		return "none on the baseline"
	}
	if other == 0 {
		return "none on this side"
	}
	return fmtX(float64(other)/float64(base)) + " the baseline"
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(a/b*1000) / 1000
}

// Compare builds a comparison of sides (side 0 is the baseline) led by the FUSE requests
// (CompareCalls makes the system calls lead). names label the sides. It does not refuse
// anything itself: callers check Mismatches and Forced.
func Compare(names []string, sides []*stats.Stats, tol float64) *Comparison {
	c := &Comparison{Schema: CompareSchema, Tolerance: tol}
	for i, s := range sides {
		r, _ := Build([]*stats.Stats{s}, Options{Top: 1})
		cs := CompareSide{Name: names[i], Traces: r.Traces, Events: s.Events, DurationNs: r.Total.DurationNs, TotalNs: s.TotalNs(),
			WorkNs: workNs(s), DataShare: r.Total.Patterns.DataShare}
		cs.Use = sideUse(&cs)
		c.Sides = append(c.Sides, cs)
		c.Warnings = append(c.Warnings, r.Warnings...)
	}
	c.lead(&requestAxis, sides)
	c.Warnings = dedup(c.Warnings)
	return c
}

// CompareCalls makes c lead with the per-system-call view: it adds each side's calls
// (Calls, CallNs, CallRatio, SlowerCalls, FasterCalls) and bases the same-work check
// (Mismatches), the sides' job figures and the verdict on calls rather than requests.
// Calls are comparable between a recording and its replay: replay issues the calls the
// recording folds into. It returns false, leaving c as it was, when a side has no
// per-system-call view.
func CompareCalls(c *Comparison, sides []*stats.Stats) bool {
	for _, s := range sides {
		if !s.HasCalls() {
			return false
		}
	}
	c.lead(&callAxis, sides)
	return true
}

// lead makes the rows of ax lead c: it compares them side by side, bases the same-work
// check, the sides' job figures and the verdict on them, and sets every view's side
// ratios again (a view's verdict withholds its own from a side that is not the same work).
func (c *Comparison) lead(ax *axis, sides []*stats.Stats) {
	c.View = ax.view
	c.Mismatches, c.Excluded, c.ExcludedWhy = nil, nil, ""
	c.Warnings = slices.DeleteFunc(c.Warnings, func(w string) bool { return w == mixedWarning })
	kinds := map[string]bool{}
	for i, s := range sides {
		cs, base := &c.Sides[i], &c.Sides[0]
		if ax.view == ViewSyscalls {
			cs.CallNs = s.CallTotalNs()
		}
		cs.Ratio = ratio(float64(cs.TotalNs), float64(base.TotalNs))
		cs.WorkRatio = ratio(float64(cs.WorkNs), float64(base.WorkNs))
		cs.CallRatio = ratio(float64(cs.CallNs), float64(base.CallNs))
		cs.Job = jobRates(s, cs.DurationNs, ax)
		for _, t := range cs.Traces {
			kinds[t.Kind] = true
		}
		if i == 0 {
			continue
		}
		var skip []string
		if hasKind(base, "record") != hasKind(cs, "record") && (hasKind(base, "replay") || hasKind(cs, "replay")) {
			// A recording against a replay: leave out what replay does not reproduce.
			skip = ax.replayFolded
			if c.Excluded == nil {
				c.Excluded, c.ExcludedWhy = slices.Clone(ax.replayFolded), ax.replayFoldedWhy
			}
		}
		for _, m := range ax.sameWork(sides[0], s, c.Tolerance, skip) {
			c.Mismatches = append(c.Mismatches, cs.Name+": "+m)
		}
	}
	mixed := kinds["record"] && kinds["replay"]
	if mixed && ax.notWork != nil {
		c.Warnings = append(c.Warnings, mixedWarning)
	}
	rows, slower, faster := compareRows(ax, c.Sides, sides, mixed)
	c.put(ax.view, rows, slower, faster)
	c.verdict()
}

// mixedWarning says how to read requests of a recording against those of a replay.
const mixedWarning = "recorded and replayed traces side by side: replay folds path-walk lookups and closes with one call, so compare the work time (without lookup, forget, release, releasedir, flush) rather than the job I/O time"

// hasKind reports whether a trace of the side has header kind k.
func hasKind(s *CompareSide, k string) bool {
	for _, t := range s.Traces {
		if t.Kind == k {
			return true
		}
	}
	return false
}

func workNs(s *stats.Stats) int64 {
	var t int64
	for i := range s.Ops {
		if !notWork[i] {
			t += s.Ops[i].TotalNs
		}
	}
	return t
}

func dedup(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func fmtRatio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmtX(r)
}

// fmtX formats a ratio with three significant digits or more: "0.0412×", "3.10×",
// "19.2×", "141×", "20100×".
func fmtX(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0f×", r)
	case r >= 10:
		return fmt.Sprintf("%.1f×", r)
	case r >= 0.1:
		return fmt.Sprintf("%.2f×", r)
	}
	return fmt.Sprintf("%.3g×", r)
}

// WriteCompareText renders c for a terminal: the verdict first, then the sides, their
// throughput, and each row side by side.
func WriteCompareText(w io.Writer, c *Comparison) error {
	var b strings.Builder
	for _, v := range c.Verdict {
		b.WriteString(v + "\n")
	}
	if len(c.Verdict) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "iotap compare: %d sides, baseline %s; %s; ratios are side / baseline (>1 = slower)\n\n", len(c.Sides), termsafe.Name(c.Sides[0].Name), axisOf(c.View).line)
	t := compareSidesTable(c.View)
	for _, s := range c.Sides {
		var kinds, hosts, fss, caches []string
		for _, tr := range s.Traces {
			kinds = append(kinds, tr.Kind)
			hosts = append(hosts, tr.Host)
			fss = append(fss, fsName(&tr))
			caches = append(caches, tr.Cache)
		}
		cells := []string{s.Name, orDash(strings.Join(dedup(kinds), ",")), orDash(strings.Join(dedup(hosts), ",")), orDash(strings.Join(dedup(fss), ",")), orDash(strings.Join(dedup(caches), ",")),
			format.Count(s.Events), format.Dur(s.DurationNs)}
		t.add(append(cells, compareSideTimes(c.View, &s)...)...)
	}
	b.WriteString(t.String())
	writeSideUse(&b, c)
	if len(c.Excluded) > 0 {
		fmt.Fprintf(&b, "NOTE: same-work check of recorded against replayed traces leaves out %s: %s\n", strings.Join(c.Excluded, ", "), c.ExcludedWhy)
	}
	for _, m := range c.Mismatches {
		fmt.Fprintf(&b, "NOT THE SAME WORK (--force): %s\n", m)
	}
	for _, wn := range c.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", wn)
	}
	fmt.Fprintf(&b, "\nper %s: latencies, their ratios and the rate are over the %ss that succeeded; failures by errno, with their own rate; rates and MB/s per second of the time at least one was in flight (MB = 10^6 B); total ratio only where counts differ\n",
		axisOf(c.View).unit, axisOf(c.View).unit)
	for _, o := range c.rows() {
		fmt.Fprintf(&b, "\n%s\n", o.Name)
		t := newTable("side", "count", "failures", "bytes", "rate", "MB/s", "p50", "p99", "mean", "total", "p50 ratio", "p99 ratio", "mean ratio", "total ratio", "flags")
		for i, s := range o.Sides {
			r := Ratios{}
			if s.Ratio != nil {
				r = *s.Ratio
			}
			fails, bytes := "-", "-"
			if s.Errors > 0 {
				fails = errnoCounts(s.Errnos) + " (" + rateCell(o.Name, s.FailsPerS) + ")"
			}
			if s.Bytes > 0 {
				bytes = format.Bytes(s.Bytes)
			}
			cells := []string{c.Sides[i].Name, format.Count(s.Count), fails, bytes, rateCell(o.Name, s.OpsPerS), mbCell(o.Name, s.MBps),
				format.Dur(s.P50), format.Dur(s.P99), format.Dur(int64(s.MeanNs)), format.Dur(s.TotalNs)}
			if i == 0 {
				cells = append(cells, "base", "base", "base", "base", "")
			} else {
				cells = append(cells, fmtRatio(r.P50), fmtRatio(r.P99), fmtRatio(r.Mean), fmtRatio(r.Total), strings.Join(s.Flags, " "))
			}
			t.add(cells...)
		}
		b.WriteString(t.String())
		for i, s := range o.Sides {
			if l := accessLine(c.Sides[i].Name, s.FirstAccess, s.Reaccess); l != "" {
				b.WriteString("  " + l + "\n")
			}
		}
	}
	writeChanges := func(title string, chs []Change) {
		if len(chs) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n", title)
		t := newTable("side", axisOf(c.View).unit, "baseline total", "total", "change", "mean ratio", "p99 ratio", "flags")
		for _, ch := range chs {
			t.add(ch.Side, ch.Op, format.Dur(ch.BaseNs), format.Dur(ch.TotalNs), signedDur(ch.DeltaNs), fmtRatio(ch.MeanRatio), fmtRatio(ch.P99Ratio), strings.Join(ch.Flags, " "))
		}
		b.WriteString(t.String())
	}
	slower, faster := c.changes()
	writeChanges("most slower (time lost against the baseline; rows with at least 1% of either side's time)", slower)
	writeChanges("most faster (time gained against the baseline; rows with at least 1% of either side's time)", faster)
	_, err := io.WriteString(w, termsafe.Text(b.String()))
	return err
}

// errnoCounts lists failures by errno, the most frequent first: "2,048 EACCES, 3 ENOENT".
func errnoCounts(m map[string]uint64) string {
	ks := byCount(m)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = format.Count(m[k]) + " " + k
	}
	return strings.Join(parts, ", ")
}

// byCount returns m's keys, the largest count first, then by name.
func byCount(m map[string]uint64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	return ks
}

// fsName names a trace's storage: its file system type, with the S3 profile of a replay
// onto s3:// ("s3 (mountpoint)"), or the daemon of a FUSE mount without a subtype, which
// names it in the mount source the way mfsmount does ("mfs#10.0.0.1:9421": "fuse (mfs)").
func fsName(t *Trace) string {
	switch t.Target.FSType {
	case "s3":
		for _, f := range strings.Fields(t.Target.Mount) {
			if p, ok := strings.CutPrefix(f, "profile="); ok {
				return "s3 (" + p + ")"
			}
		}
	case "fuse", "fuseblk":
		if d, _, ok := strings.Cut(t.Target.Source, "#"); ok && d != "" && !strings.ContainsAny(d, "/ ") {
			return t.Target.FSType + " (" + d + ")"
		}
	}
	return t.Target.FSType
}

// WriteCompareJSON renders c as JSON (schema iotap.compare/v1).
func WriteCompareJSON(w io.Writer, c *Comparison) error {
	return writeJSON(w, c)
}

// WriteCompareHTML renders c as a self-contained HTML page with overlaid latency CDFs.
func WriteCompareHTML(w io.Writer, c *Comparison) error {
	var figs []figure
	var names []string
	for _, s := range c.Sides {
		names = append(names, s.Name)
	}
	rows := c.rows()
	for _, o := range rows[:min(len(rows), maxPlotOps)] {
		var bins [][]HistBin
		for _, s := range o.Sides {
			bins = append(bins, s.Hist)
		}
		p, err := cdfPlot(o.Name+" latency CDF", names, bins, true)
		if err != nil {
			return err
		}
		s, err := svg(p, 13*vg.Centimeter, 9*vg.Centimeter)
		if err != nil {
			return err
		}
		figs = append(figs, figure{Title: o.Name, SVG: template.HTML(s)})
	}
	slower, faster := c.changes()
	lost := figureSet{}
	bars := lostBars(c)
	p, err := lostPlot(c, bars)
	lost.add(p, err, 13*vg.Centimeter, lostPlotHeight(len(bars), len(c.Sides)))
	if lost.err != nil {
		return lost.err
	}
	return compareTmpl().Execute(w, struct {
		C              *Comparison
		Figures        []figure
		Lost           []figure
		Rows           []compareRow
		Slower, Faster []Change
	}{c, figs, lost.figs, rows, slower, faster})
}

// compareTmpl is parsed when first used: a command that prints no comparison page does not pay
// for it as it starts.
var compareTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("compare").Funcs(funcs).Funcs(template.FuncMap{
		"ratio":       fmtRatio,
		"fsName":      fsName,
		"errnoCounts": errnoCounts,
		"viewLine":    func(view string) string { return axisOf(view).line },
		"join":        strings.Join,
		"side":        func(c *Comparison, i int) string { return c.Sides[i].Name },
		"delta": func(ns int64) string {
			if ns > 0 {
				return "+" + format.Dur(ns)
			}
			return format.Dur(ns)
		},
	}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="iotap">
<title>iotap compare</title>
<style>` + css + `</style></head>
<body>
{{- $c := .C}}
<h1>iotap compare</h1>
<div class="answer"><div>{{range $c.Verdict}}<p class="verdict"><b>{{.}}</b></p>
{{end}}</div>{{range .Lost}}<div class="fig">{{.SVG}}</div>{{end}}</div>
<div class="facts">{{len $c.Sides}} sides; baseline <b>{{(index $c.Sides 0).Name}}</b>; {{viewLine $c.View}}. Ratios are side / baseline: above 1 is slower (or more). Schema {{$c.Schema}}.</div>
{{if $c.Excluded}}<div class="warn">same-work check of recorded against replayed traces leaves out {{join $c.Excluded ", "}}: {{$c.ExcludedWhy}}</div>
{{end}}{{range $c.Mismatches}}<div class="warn bad">⚠ not the same work (compared with --force): {{.}}</div>
{{end}}{{range $c.Warnings}}<div class="warn">⚠ {{.}}</div>
{{end}}
<h2>Sides</h2>
{{$calls := eq $c.View "syscalls"}}<table><tr><th class="l">side</th><th class="l">traces</th><th>events</th><th>duration</th>{{if $calls}}<th>call time</th><th>ratio</th>{{else}}<th>job I/O time</th><th>ratio</th><th>work time</th><th>ratio</th>{{end}}<th>data share</th></tr>
{{range $c.Sides}}<tr><td class="l">{{.Name}}</td><td class="l">{{range $i, $t := .Traces}}{{if $i}}<br>{{end}}{{$t.File}} ({{orDash $t.Kind}}, {{orDash $t.Host}}, {{orDash (fsName $t)}}, cache {{orDash $t.Cache}}){{end}}</td><td>{{count .Events}}</td><td>{{dur .DurationNs}}</td>{{if $calls}}<td>{{dur .CallNs}}</td><td>{{ratio .CallRatio}}</td>{{else}}<td>{{dur .TotalNs}}</td><td>{{ratio .Ratio}}</td><td>{{dur .WorkNs}}</td><td>{{ratio .WorkRatio}}</td>{{end}}<td>{{pct .DataShare}}</td></tr>
{{end}}</table>
<h2>Throughput</h2>
<p class="muted">Over each side's wall time, and "active": over its I/O-active time, when at least one op was in flight. IOPS: reads and writes; meta/s: every other op. MB = 10^6 B.</p>
<table><tr><th class="l">side</th><th>read</th><th>written</th><th>MB/s</th><th>active MB/s</th><th>IOPS</th><th>active IOPS</th><th>meta/s</th><th>active meta/s</th></tr>
{{range $s := $c.Sides}}{{with $s.Job}}<tr><td class="l">{{$s.Name}}</td><td>{{bytes .ReadBytes}}</td><td>{{bytes .WriteBytes}}</td><td>{{printf "%.1f" .Wall.MBps}}</td><td>{{printf "%.1f" .Active.MBps}}</td><td>{{rateText .Wall.IOPS}}</td><td>{{rateText .Active.IOPS}}</td><td>{{rateText .Wall.MetaOps}}</td><td>{{rateText .Active.MetaOps}}</td></tr>
{{end}}{{end}}</table>
{{if .Slower}}<h2>Most slower</h2>{{template "changes" .Slower}}{{end}}
{{if .Faster}}<h2>Most faster</h2>{{template "changes" .Faster}}{{end}}
<h2>Latency CDFs</h2>
<div class="figs">{{range .Figures}}<div class="fig">{{.SVG}}</div>{{end}}</div>
<h2>{{if $calls}}Per system call{{else}}Per FUSE request (operation){{end}}</h2>
{{range .Rows}}<h3>{{.Name}}</h3>
<table><tr><th class="l">side</th><th>count</th><th class="l">failures</th><th>bytes</th><th>rate</th><th>MB/s</th><th>p50</th><th>p99</th><th>mean</th><th>total</th><th>p50 ratio</th><th>p99 ratio</th><th>mean ratio</th><th>total ratio</th><th class="l">flags</th></tr>
{{$row := .}}{{range $i, $s := .Sides}}<tr><td class="l">{{side $c $i}}</td><td>{{count $s.Count}}</td><td class="l">{{if $s.Errors}}{{errnoCounts $s.Errnos}}{{else}}-{{end}}</td><td>{{if $s.Bytes}}{{bytes $s.Bytes}}{{else}}-{{end}}</td><td>{{rate $row.Name $s.OpsPerS}}</td><td>{{mb $row.Name $s.MBps}}</td><td>{{dur $s.P50}}</td><td>{{dur $s.P99}}</td><td>{{durf $s.MeanNs}}</td><td>{{dur $s.TotalNs}}</td>{{with $s.Ratio}}<td>{{ratio .P50}}</td><td>{{ratio .P99}}</td><td>{{ratio .Mean}}</td><td>{{ratio .Total}}</td>{{else}}<td>base</td><td>base</td><td>base</td><td>base</td>{{end}}<td class="l">{{join $s.Flags " "}}</td></tr>
{{end}}</table>
{{range $i, $s := .Sides}}{{with access (side $c $i) $s.FirstAccess $s.Reaccess}}<div class="facts">{{.}}</div>
{{end}}{{end}}{{end}}
</body></html>
{{define "changes"}}<table><tr><th class="l">side</th><th class="l">op or call</th><th>baseline total</th><th>total</th><th>change</th><th>mean ratio</th><th>p99 ratio</th><th class="l">flags</th></tr>
{{range .}}<tr><td class="l">{{.Side}}</td><td class="l">{{.Op}}</td><td>{{dur .BaseNs}}</td><td>{{dur .TotalNs}}</td><td>{{delta .DeltaNs}}</td><td>{{ratio .MeanRatio}}</td><td>{{ratio .P99Ratio}}</td><td class="l">{{join .Flags " "}}</td></tr>
{{end}}</table>{{end}}
`))
})
