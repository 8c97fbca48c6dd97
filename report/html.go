package report

import (
	"cmp"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/iotap/iotap/internal/format"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// figure is one inline SVG plot.
type figure struct {
	Title string
	SVG   template.HTML
}

// maxPlotOps bounds the operations plotted (the busiest by total time).
const maxPlotOps = 8

// WriteHTML renders r as one self-contained HTML file: inline CSS and SVG, no scripts, no
// network access needed to view it.
func WriteHTML(w io.Writer, r *Report) error {
	figs, err := reportFigures(r.Total, r.Groups, r.Traces)
	if err != nil {
		return err
	}
	views, err := darshanFigures(r.Total, r.GroupRows)
	if err != nil {
		return err
	}
	data := struct {
		R       *Report
		V       *View
		Figures []figure
		Views   darshanViews
	}{r, r.Total, figs, views}
	return pageTmpl().Execute(w, data)
}

// darshanViews are the figures of the heat maps, the access sizes and the groups.
type darshanViews struct {
	Heat   []figure
	Sizes  []figure
	Groups []figure
}

// darshanFigures draws v's heat maps (by file, then by program: time, then bytes) and
// access sizes, and with --by the latency CDF of each group's calls.
func darshanFigures(v *View, groups []*GroupRow) (darshanViews, error) {
	var out darshanViews
	for _, m := range []*HeatMap{v.HeatFiles, v.HeatPrograms} {
		if m == nil {
			continue
		}
		for _, byBytes := range []bool{false, true} {
			f, err := heatFigure(m, byBytes)
			if err != nil {
				return out, err
			}
			if f.SVG != "" {
				out.Heat = append(out.Heat, f)
			}
		}
	}
	sizes := figureSet{}
	p, err := accessSizePlot(v.AccessSizes)
	sizes.add(p, err, 18*vg.Centimeter, 9*vg.Centimeter)
	out.Sizes = sizes.figs
	if len(groups) > 1 {
		gs := figureSet{}
		names, bins := plotted(groups)
		p, err := cdfPlot("Latency CDF of each group's calls", names, bins, false)
		gs.add(p, err, 16*vg.Centimeter, 10*vg.Centimeter)
		out.Groups = gs.figs
		if gs.err != nil {
			return out, gs.err
		}
	}
	return out, sizes.err
}

func reportFigures(v *View, groups []*View, traces []Trace) ([]figure, error) {
	s := figureSet{traces: traces}
	s.syscalls(v)
	ops := v.Ops[:min(len(v.Ops), maxPlotOps)]
	names, bins := plotted(ops)
	if len(ops) > 0 {
		p, err := cdfPlot("Latency CDF per operation", names, bins, false)
		s.add(p, err, 16*vg.Centimeter, 10*vg.Centimeter)
		p, err = tailPlot("Latency tail: share of ops slower than x", names, bins)
		s.add(p, err, 16*vg.Centimeter, 10*vg.Centimeter)
	}
	s.intervals(v)
	p, err := inflightPlot(v.InflightIntervals)
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
	// With --by: the busiest operations' CDFs, one line per group.
	for _, o := range ops[:min(len(ops), 2)] {
		if len(groups) < 2 {
			break
		}
		var gn []string
		var gb [][]HistBin
		for _, g := range groups {
			for _, go_ := range g.Ops {
				if go_.Op == o.Op {
					gn = append(gn, g.Name)
					gb = append(gb, go_.Hist)
				}
			}
		}
		p, err := cdfPlot(o.Op+" latency CDF by "+groupKind(groups[0].Name), gn, gb, true)
		s.add(p, err, 16*vg.Centimeter, 10*vg.Centimeter)
	}
	// The histograms share one latency axis, so that they can be compared at a glance.
	lo, hi := histRange(bins...)
	for i, o := range ops {
		p, err := histPlot(fmt.Sprintf("%s latency histogram (%s ops)", o.Op, format.Count(o.Count)), o.Hist, color8(i), lo, hi)
		s.add(p, err, 12*vg.Centimeter, 7*vg.Centimeter)
	}
	for _, t := range v.Offsets[:min(len(v.Offsets), 4)] {
		p, err := offsetPlot(t)
		s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
	}
	return s.figs, s.err
}

// figureSet collects rendered figures; the first error, from building a plot or
// rendering it, ends the set.
type figureSet struct {
	figs   []figure
	err    error
	traces []Trace // the report's traces, for their resource series
}

// add renders p (built with err) at w x h; a nil plot adds nothing.
func (s *figureSet) add(p *plot.Plot, err error, w, h vg.Length) {
	if s.err != nil || err != nil {
		s.err = cmp.Or(s.err, err)
		return
	}
	if p == nil {
		return
	}
	svg, err := svg(p, w, h)
	if err != nil {
		s.err = err
		return
	}
	s.figs = append(s.figs, figure{Title: p.Title.Text, SVG: template.HTML(svg)})
}

// intervals adds the figures over time: throughput, ops per second, and the p99 and max
// latency per interval.
func (s *figureSet) intervals(v *View) {
	pts := v.Intervals.Points
	if len(pts) == 0 {
		return
	}
	var ops, rd, wr, p99, mx plotter.XYs
	for _, pt := range pts {
		ops = append(ops, plotter.XY{X: pt.T, Y: pt.OpsPerSec})
		rd = append(rd, plotter.XY{X: pt.T, Y: pt.ReadMBps})
		wr = append(wr, plotter.XY{X: pt.T, Y: pt.WriteMBps})
		l99, lmx := math.NaN(), math.NaN() // no ops: a gap, not a fast interval
		if pt.Ops > 0 {
			l99, lmx = float64(max(pt.P99, 1000)), float64(max(pt.MaxNs, 1000))
		}
		p99 = append(p99, plotter.XY{X: pt.T, Y: l99})
		mx = append(mx, plotter.XY{X: pt.T, Y: lmx})
	}
	// Close the last step so the final interval has a width.
	end := pts[len(pts)-1].T + float64(v.Intervals.WidthNs)/1e9
	last := pts[len(pts)-1]
	ops = append(ops, plotter.XY{X: end, Y: last.OpsPerSec})
	rd = append(rd, plotter.XY{X: end, Y: last.ReadMBps})
	wr = append(wr, plotter.XY{X: end, Y: last.WriteMBps})
	p99 = append(p99, plotter.XY{X: end, Y: p99[len(p99)-1].Y})
	mx = append(mx, plotter.XY{X: end, Y: mx[len(mx)-1].Y})
	p, err := seriesPlot("Throughput over time: MB/s", "MB/s", []string{"read MB/s", "write MB/s"}, []plotter.XYs{rd, wr})
	if err == nil {
		p.X.Min, p.X.Max = 0, end
	}
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
	s.usage(v, end) // memory and CPU of the storage client and iotap, on the same time axis
	p, err = seriesPlot("Operations per second", "ops/s", []string{"ops/s"}, []plotter.XYs{ops})
	if err == nil {
		p.X.Min, p.X.Max = 0, end
	}
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
	p, err = seriesPlot("Latency per interval, all ops (log scale): p99 and max", "latency", []string{"p99", "max"}, []plotter.XYs{p99, mx})
	if err == nil {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = durTicks{}
		p.Y.Min = 1000
		p.Y.Max *= 8 // undo the linear headroom; a decade of headroom for the legend
		p.X.Min, p.X.Max = 0, end
	}
	s.add(p, err, 16*vg.Centimeter, 8*vg.Centimeter)
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func errnoList(m map[string]uint64) string {
	var parts []string
	for _, k := range byCount(m) {
		parts = append(parts, fmt.Sprintf("%s %s", k, format.Count(m[k])))
	}
	return strings.Join(parts, ", ")
}

var funcs = template.FuncMap{
	"dur":   format.Dur,
	"bytes": format.Bytes,
	"pct":   format.Pct,
	"count": format.Count,
	"durf":  func(f float64) string { return format.Dur(int64(f)) },
	"join":  strings.Join,
	"labels": func(m map[string]string) string {
		var parts []string
		for _, k := range sortedKeys(m) {
			parts = append(parts, k+"="+m[k])
		}
		return strings.Join(parts, " ")
	},
	"errnos":   errnoList,
	"rate":     rateCell,
	"rateText": rateText,
	"meanDur":  meanDur,
	"fileAccess": func(rows []FileRow) []FileRow {
		var out []FileRow
		for _, f := range rows {
			if f.FirstReads+f.Rereads > 0 {
				out = append(out, f)
			}
		}
		return out
	},
	"mb":     mbCell,
	"access": accessLine,
	"job":    jobLine,
	"u64": func(i any) uint64 {
		switch v := i.(type) {
		case int:
			return uint64(v)
		case int64:
			return uint64(max(v, 0))
		}
		return 0
	},
	"fileTable": func(rows []FileRow, dirs bool) fileTable { return fileTable{rows, dirs} },
	"opTable":   func(rows []*OpRow) rowTable { return opRows.table(rows, true) },
	"callTable": func(rows []*CallRow) rowTable { return callRows.table(rows, true) },
	"orDash":    orDash,
	"classes": func(cs []ClassRow) string {
		var parts []string
		for _, c := range cs {
			if c.Class != "data" {
				parts = append(parts, c.Class+" "+format.Pct(c.Share))
			}
		}
		return strings.Join(parts, ", ")
	},
	"contains":   strings.Contains,
	"groupTable": groupTable,
	"byProgram":  ByProgram,
	"cmdline":    func(args []string) string { return cmdlineText(args, 120) },
	"inflight":   inflightSummary,
	"overlapped": overlapped,
}

const css = `
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;margin:24px;color:#222;max-width:1500px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-variant-numeric:tabular-nums}
th,td{padding:3px 9px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f4f5f7;font-weight:600;white-space:normal} td.wrap{white-space:normal;min-width:8em} td.l,th.l{text-align:left} td.path{text-align:left;white-space:normal;word-break:break-all;max-width:480px}
.warn{background:#fff4e5;border:1px solid #f0b45b;padding:8px 12px;margin:10px 0;border-radius:4px}
.bad{background:#fdecea;border-color:#e57373}
.facts{color:#555} .muted{color:#777}
.figs{display:flex;flex-wrap:wrap;gap:14px} .fig{border:1px solid #e3e3e3;border-radius:4px;padding:6px;background:#fff}
.fig svg{display:block;max-width:100%;height:auto}
.verdict{font-size:16px;margin:6px 0} .answer{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start} .answer>div:first-child{flex:1 1 420px} td.cmd{text-align:left;white-space:normal;word-break:break-all;max-width:520px;font-family:ui-monospace,monospace;font-size:12px}
`

// pageTmpl is parsed when first used: a command that prints no page does not pay for it as
// it starts.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="iotap">
<title>iotap report</title>
<style>` + css + `</style></head>
<body>
{{- $v := .V}}
<h1>iotap report</h1>
<p class="verdict"><b>{{.R.Verdict}}</b></p>
<div class="facts">{{len .R.Traces}} trace(s), {{count $v.Events}} events over {{dur $v.DurationNs}}; job I/O time {{dur $v.TotalNs}} (sum of op durations){{if not $v.Start.IsZero}}; first op at {{$v.Start.Format "2006-01-02 15:04:05.000 MST"}}{{end}}. Schema {{.R.Schema}}.</div>

<h2>Traces</h2>
<table><tr><th class="l">trace</th><th class="l">host</th><th class="l">kind</th><th class="l">fs</th><th class="l">target</th><th class="l">cache (fidelity)</th><th class="l">command</th><th class="l">labels</th><th>events</th><th>dropped</th><th class="l">status</th></tr>
{{range .R.Traces}}<tr><td class="l">{{.File}}</td><td class="l">{{orDash .Host}}</td><td class="l">{{orDash .Kind}}</td><td class="l">{{orDash .Target.FSName}}</td><td class="l">{{orDash .Target.Path}}</td><td class="l">{{if .Cache}}{{.Cache}}{{else}}-{{end}}{{if .Passthrough}} +passthrough{{end}}{{if .Writeback}} +writeback{{end}}</td><td class="path">{{join .Command " "}}</td><td class="l">{{labels .Labels}}</td><td>{{count .Events}}</td><td>{{count .Dropped}}</td><td class="l">{{if .Damage}}<b>DAMAGED</b>: {{join .Damage "; "}}{{else if .Lost}}<b>cut short</b>: {{.WriteError}}{{else if .Complete}}complete{{else}}no footer{{end}}</td></tr>
{{end}}</table>
{{range $t := .R.Traces}}{{with $t.Cost}}<div class="facts">Recording cost of {{$t.File}}: {{.Summary}}.</div>
{{end}}{{end}}{{range .R.Warnings}}<div class="warn{{if or (contains . "damaged") (contains . "dropped")}} bad{{end}}">⚠ {{.}}</div>
{{end}}

{{if $v.Syscalls}}{{$calls := callTable $v.Syscalls}}<h2>System calls</h2>
<p class="muted">As the application made them: FUSE requests folded into the calls they belong to, as replay folds them. Time is each call's time in the storage (its requests' durations summed). Sorted by total time.</p>
{{template "rows" $calls}}
{{range $v.CallNotes}}<div class="facts">{{.}}</div>
{{end}}{{range $calls.Access}}<div class="facts">{{.}}</div>
{{end}}{{end}}
<h2>FUSE requests (operations)</h2>
<p class="muted">What the storage saw. Sorted by total time. Percentiles from HDR histograms (3 significant digits); mean, total and max are exact.</p>
{{$ops := opTable $v.Ops}}{{template "rows" $ops}}
{{range $ops.Access}}<div class="facts">{{.}}</div>
{{end}}<p class="muted">Rate and MB/s: per second of the time at least one request (or call) of the kind was in flight; MB = 10^6 B.</p>
<pre>{{job $v.Job}}</pre>
<p>Job I/O time: data {{pct $v.Patterns.DataShare}}, metadata {{pct $v.Patterns.MetaShare}} ({{classes $v.Classes}}).
{{with $v.Patterns}}{{if .ReadBytes}}<br>Reads: {{bytes .ReadBytes}}, {{pct .SeqReadShare}} sequential by bytes ({{count .SeqReads}} sequential / {{count .RandReads}} random ops){{if .RereadBytes}}; re-read {{if .RereadApprox}}at least {{end}}{{bytes .RereadBytes}} of already read ranges — a cache would help{{end}}.{{end}}
{{if .WriteBytes}}<br>Writes: {{bytes .WriteBytes}}, {{pct .SeqWriteShare}} sequential by bytes ({{count .SeqWrites}} sequential / {{count .RandWrites}} random ops).{{end}}{{end}}
{{with $v.TTFB}}<br>Time to first byte (each file's first read, its own latency): n={{count .Count}}, p50 {{dur .P50}}, p99 {{dur .P99}}, max {{dur .MaxNs}}.{{end}}
{{if $v.Unused.Count}}<br>Files opened but never read or written: {{$v.Unused.Count}}.{{end}}
{{with inflight $v}}<br>In flight at once (requests each found being served, itself included): {{.}}.{{end}}</p>

<h2>Plots</h2>
<div class="figs">{{range .Figures}}<div class="fig">{{.SVG}}</div>{{end}}</div>
{{with .Views.Heat}}<h2>Heat maps</h2>
<p class="muted">The busiest files and programs (processes by name) over time: each cell is the time the requests that started in it spent in the storage, or the bytes they read and wrote, on a log colour scale; blank cells held nothing.</p>
<div class="figs">{{range .}}<div class="fig">{{.SVG}}</div>{{end}}</div>
{{end}}{{with $v.AccessSizes}}<h2>Access sizes</h2>
<p class="muted">Read and write calls that succeeded, by the bytes each moved, in Darshan's buckets (upper bounds inclusive: 100 B, 1 KiB, 10 KiB, ...); time is their time in the storage.</p>
<div class="figs"><div>{{template "access" .}}</div>{{range $.Views.Sizes}}<div class="fig">{{.SVG}}</div>{{end}}</div>
{{end}}
{{with .R.GroupRows}}<h2>By {{$.R.By}}</h2>
<p class="muted">Each group's {{if $v.Syscalls}}calls{{else}}requests{{end}} together; bytes read and written; IOPS (reads and writes that succeeded), meta/s (the others that succeeded) and MB/s, each per second of the group's wall time, from its first {{if $v.Syscalls}}call{{else}}request{{end}}'s start to its last one's end.</p>
{{template "rows" (groupTable . true)}}
<div class="figs">{{range $.Views.Groups}}<div class="fig">{{.SVG}}</div>{{end}}</div>
{{end}}{{$byProgram := byProgram .R.By}}{{range .R.Groups}}<h2>{{.Name}}</h2>
<p class="verdict"><b>{{.Verdict.Text}}</b></p>
<p class="facts">{{len .Traces}} trace(s), {{count .Events}} events over {{dur .DurationNs}}; job I/O time {{dur .TotalNs}}.</p>
{{if and $byProgram .Commands}}{{template "commands" .Commands}}{{end}}
{{if .Syscalls}}{{template "rows" (callTable .Syscalls)}}{{end}}
{{template "rows" (opTable .Ops)}}
{{end}}
{{range .R.Stragglers}}<div class="warn">⚠ {{.}}</div>
{{end}}
<h2>Details</h2>
{{if $v.ReadBySize}}<h3>Read latency by request size</h3>{{template "sizes" $v.ReadBySize}}{{end}}
{{if $v.WriteBySize}}<h3>Write latency by request size</h3>{{template "sizes" $v.WriteBySize}}{{end}}
{{if overlapped $v}}<h3>In-flight depth of the operations that overlapped</h3>
<p class="muted">The requests each found being served at its start, itself included; busy mean: averaged over the time at least one was in flight.</p>
<table><tr><th class="l">op</th><th>requests</th><th>max</th><th>mean</th><th>busy mean</th><th>p50</th><th>p90</th><th>p99</th></tr>
{{range $o := $v.Ops}}{{with $o.Inflight}}{{if .Overlapped}}<tr><td class="l">{{$o.Op}}</td><td>{{count $o.Count}}</td><td>{{if .LowerBound}}≥{{end}}{{.Max}}</td><td>{{printf "%.2f" .Mean}}</td><td>{{printf "%.2f" .BusyMean}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td></tr>
{{end}}{{end}}{{end}}</table>{{end}}
{{if $v.Processes}}<h3>Processes by time</h3>
<table><tr><th class="l">comm</th><th>pid</th><th class="l">host</th><th>ops</th><th>errors</th><th>total</th><th>share</th><th>meta</th><th>data</th><th>read</th><th>written</th><th class="l">command line</th></tr>
{{range $v.Processes}}<tr><td class="l">{{orDash .Comm}}</td><td>{{.Pid}}</td><td class="l">{{orDash .Host}}</td><td>{{count .Ops}}</td><td>{{count .Errors}}</td><td>{{dur .TotalNs}}</td><td>{{pct .Share}}</td><td>{{dur .MetaNs}}</td><td>{{dur .DataNs}}</td><td>{{bytes .ReadBytes}}</td><td>{{bytes .WriteBytes}}</td><td class="cmd">{{orDash (cmdline .Cmdline)}}</td></tr>
{{end}}</table>{{end}}
{{with $v.Commands}}<h3>Command lines, by their processes' time</h3>{{template "commands" .}}{{end}}
<h3>Files by time</h3>{{template "files" (fileTable $v.FilesByTime false)}}
{{with fileAccess $v.FilesByTime}}<h3>Reads per file: first access and re-access</h3>
<p class="muted">First access: reads that returned bytes never read before from the file; re-access: reads of bytes read before only. First byte: the file's first read, its own latency.</p>
<table><tr><th class="l">path</th><th>first access</th><th>bytes</th><th>mean</th><th>re-access</th><th>bytes</th><th>mean</th><th>first byte</th></tr>
{{range .}}<tr><td class="path">{{.Path}}</td><td>{{count .FirstReads}}</td><td>{{bytes .FirstReadBytes}}</td><td>{{meanDur .FirstReadNs .FirstReads}}</td><td>{{count .Rereads}}</td><td>{{bytes .RereadOnly}}</td><td>{{meanDur .RereadNs .Rereads}}</td><td>{{with .FirstByteNs}}{{dur .}}{{else}}-{{end}}</td></tr>
{{end}}</table>{{end}}
<h3>Files by bytes</h3>{{template "files" (fileTable $v.FilesByBytes false)}}
<h3>Directories by time</h3>{{template "files" (fileTable $v.DirsByTime true)}}
<h3>Directories by bytes</h3>{{template "files" (fileTable $v.DirsByBytes true)}}
{{if $v.Unused.Count}}<h3>Files opened but never read or written ({{$v.Unused.Count}})</h3>
<ul>{{range $v.Unused.Paths}}<li>{{.}}</li>{{end}}{{if gt $v.Unused.Count (len $v.Unused.Paths)}}<li class="muted">… {{count (u64 $v.Unused.Count)}} in all</li>{{end}}</ul>{{end}}
</body></html>
{{define "rows"}}<table><tr><th class="l">{{.Unit}}</th>{{range .Heads}}<th>{{.}}</th>{{end}}<th class="l">errnos</th></tr>
{{range .Rows}}<tr><td class="l">{{.Name}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}<td class="l wrap">{{.Errnos}}</td></tr>
{{end}}</table>{{end}}

{{define "commands"}}<table><tr><th class="l">comm</th><th>processes</th><th>total</th><th class="l">command line</th></tr>
{{range .}}<tr><td class="l">{{orDash .Comm}}</td><td>{{count (u64 .Processes)}}</td><td>{{dur .TotalNs}}</td><td class="cmd">{{cmdline .Cmdline}}</td></tr>
{{end}}</table>{{end}}
{{define "access"}}<table><tr><th class="l">size</th><th>reads</th><th>read</th><th>read time</th><th>writes</th><th>written</th><th>write time</th></tr>
{{range .}}<tr><td class="l">{{.Bucket}}</td><td>{{count .Reads}}</td><td>{{if .Reads}}{{bytes .ReadBytes}}{{else}}-{{end}}</td><td>{{if .Reads}}{{dur .ReadNs}}{{else}}-{{end}}</td><td>{{count .Writes}}</td><td>{{if .Writes}}{{bytes .WriteBytes}}{{else}}-{{end}}</td><td>{{if .Writes}}{{dur .WriteNs}}{{else}}-{{end}}</td></tr>
{{end}}</table>{{end}}
{{define "sizes"}}<table><tr><th class="l">size</th><th>count</th><th>bytes</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th></tr>
{{range .}}<tr><td class="l">{{.Bucket}}</td><td>{{count .Count}}</td><td>{{bytes .Bytes}}</td><td>{{durf .MeanNs}}</td><td>{{dur .P50}}</td><td>{{dur .P90}}</td><td>{{dur .P99}}</td><td>{{dur .P999}}</td></tr>
{{end}}</table>{{end}}
{{define "files"}}<table><tr><th class="l">path</th><th>ops</th><th>total</th><th>share</th><th>meta</th><th>data</th><th>read</th><th>written</th><th>sequential</th><th>re-read</th><th>size</th><th>opens</th><th>unused opens</th></tr>
{{$dirs := .Dirs}}{{range .Rows}}<tr><td class="path">{{.Path}}</td><td>{{count .Ops}}</td><td>{{dur .TotalNs}}</td><td>{{pct .Share}}</td><td>{{dur .MetaNs}}</td><td>{{dur .DataNs}}</td><td>{{bytes .ReadBytes}}</td><td>{{bytes .WriteBytes}}</td><td>{{if or .ReadOps .WriteOps}}{{pct .SeqShare}}{{else}}-{{end}}</td><td>{{if .RereadBytes}}{{if .RereadApprox}}≥{{end}}{{bytes .RereadBytes}}{{else}}-{{end}}</td><td>{{if $dirs}}-{{else}}{{bytes (u64 .Size)}}{{end}}</td><td>{{count .Opens}}</td><td>{{count .UnusedOpens}}</td></tr>
{{end}}</table>{{end}}
`))
})

// fileTable is a files or directories table for the HTML template.
type fileTable struct {
	Rows []FileRow
	Dirs bool
}

// groupKind returns "host" for a group named "host=node1", "rank" for "rank=0".
func groupKind(name string) string {
	if k, _, ok := strings.Cut(name, "="); ok {
		return k
	}
	return "group"
}
