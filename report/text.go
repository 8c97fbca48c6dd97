package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// maxTextIntervals bounds the interval rows printed in text form.
const maxTextIntervals = 30

// WriteText renders r for a terminal: one screen of summary first, then details.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	v := r.Total
	b.WriteString(r.Verdict + "\n")
	fmt.Fprintf(&b, "iotap report: %d trace(s), %s events over %s; job I/O time %s (sum of op durations)\n",
		len(r.Traces), format.Count(v.Events), format.Dur(v.DurationNs), format.Dur(v.TotalNs))
	if !v.Start.IsZero() {
		fmt.Fprintf(&b, "first op at %s\n", v.Start.Format(time.RFC3339Nano))
	}
	b.WriteString("\n")
	writeTraces(&b, r)
	writeUsage(&b, r)
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", wn)
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n")
	}
	writeCallTable(&b, v)
	writeOpTable(&b, v)
	writeSummaryLines(&b, v)
	writeGroupTable(&b, r)
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "\n-- %s: %d trace(s), %s events over %s; job I/O time %s\n",
			termsafe.Name(g.Name), len(g.Traces), format.Count(g.Events), format.Dur(g.DurationNs), format.Dur(g.TotalNs))
		fmt.Fprintf(&b, "%s\n", g.Verdict.Text)
		if ByProgram(r.By) && len(g.Commands) > 0 {
			fmt.Fprintf(&b, "%s\n", commandsLine(g.Commands, g.CommandsTotal))
		}
		writeCallTable(&b, g)
		writeOpTable(&b, g)
		writeSummaryLines(&b, g)
	}
	if len(r.Stragglers) > 0 {
		b.WriteString("\n")
		for _, l := range r.Stragglers {
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("\n== Details ==\n")
	writeDetails(&b, v)
	_, err := io.WriteString(w, termsafe.Text(b.String()))
	return err
}

func writeTraces(b *strings.Builder, r *Report) {
	t := newTable("trace", "host", "kind", "fs", "target", "cache", "events", "dropped", "status")
	for _, tr := range r.Traces {
		status := "complete"
		switch {
		case len(tr.Damage) > 0:
			status = "DAMAGED"
		case !tr.Complete:
			status = "no footer"
		case tr.Lost > 0:
			status = "cut short"
		}
		cache := tr.Cache
		if cache == "" {
			cache = "-"
		}
		if tr.Passthrough {
			cache += "+passthrough"
		}
		if tr.Data == trace.DataKernel {
			cache += " (data timed by the kernel)"
		}
		t.add(tr.File, orDash(tr.Host), orDash(tr.Kind), orDash(tr.Target.FSName), orDash(tr.Target.Path), cache,
			format.Count(tr.Events), format.Count(tr.Dropped), status)
	}
	b.WriteString(t.String())
	for _, tr := range r.Traces {
		var extra []string
		if len(tr.Command) > 0 {
			extra = append(extra, "command: "+quoteAll(tr.Command))
		}
		if len(tr.Labels) > 0 {
			keys := make([]string, 0, len(tr.Labels))
			for k := range tr.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var ls []string
			for _, k := range keys {
				ls = append(ls, termsafe.Name(k)+"="+termsafe.Name(tr.Labels[k]))
			}
			extra = append(extra, "labels: "+strings.Join(ls, " "))
		}
		if tr.BlockedNs > 0 {
			extra = append(extra, "job blocked on the recorder for "+format.Dur(tr.BlockedNs))
		}
		if tr.Cost != nil {
			extra = append(extra, "recording cost: "+tr.Cost.Summary())
		}
		for _, d := range tr.Damage {
			extra = append(extra, "damage: "+d)
		}
		if len(extra) > 0 {
			fmt.Fprintf(b, "  %s: %s\n", termsafe.Name(tr.File), strings.Join(extra, "; "))
		}
	}
	b.WriteString("\n")
}

// quoteAll joins words with spaces, each escaped for a terminal.
func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = termsafe.Name(w)
	}
	return strings.Join(q, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func writeOpTable(b *strings.Builder, v *View) {
	if len(v.Ops) == 0 {
		b.WriteString("(no events)\n")
		return
	}
	t := opRows.table(v.Ops, false)
	b.WriteString(t.String())
	b.WriteString("  rate (of the requests that succeeded) and MB/s: per second of the time at least one request of the op was in flight (MB = 10^6 B)\n")
	for _, a := range t.Access {
		fmt.Fprintf(b, "  %s\n", a)
	}
}

// accessLine is the first-access split of reads ("" when there were none).
func accessLine(what string, first, again *AccessRow) string {
	if first == nil && again == nil {
		return ""
	}
	part := func(name string, a *AccessRow) string {
		if a == nil {
			return name + " none"
		}
		return fmt.Sprintf("%s %s (%s) mean %s p50 %s p99 %s", name, format.Count(a.Count), format.Bytes(a.Bytes),
			format.Dur(int64(a.MeanNs)), format.Dur(a.P50), format.Dur(a.P99))
	}
	return fmt.Sprintf("%s: %s; %s", what, part("first access", first), part("re-access", again))
}

func writeSummaryLines(b *strings.Builder, v *View) {
	var cl []string
	for _, c := range v.Classes {
		if c.Class != "data" {
			cl = append(cl, fmt.Sprintf("%s %s", c.Class, format.Pct(c.Share)))
		}
	}
	b.WriteString("\n" + jobLine(v.Job))
	fmt.Fprintf(b, "job I/O time: data %s, metadata %s (%s)\n", format.Pct(v.Patterns.DataShare), format.Pct(v.Patterns.MetaShare), strings.Join(cl, ", "))
	p := v.Patterns
	if p.ReadBytes > 0 || p.SeqReads+p.RandReads > 0 {
		fmt.Fprintf(b, "reads: %s, %s sequential by bytes (%s seq / %s random ops)",
			format.Bytes(p.ReadBytes), format.Pct(p.SeqReadShare), format.Count(p.SeqReads), format.Count(p.RandReads))
		if p.RereadBytes > 0 {
			lb := ""
			if p.RereadApprox {
				lb = " at least"
			}
			fmt.Fprintf(b, "; re-read%s %s of already read ranges (%s of reads: a cache would help)", lb, format.Bytes(p.RereadBytes), format.Pct(share(int64(p.RereadBytes), int64(p.ReadBytes))))
		}
		b.WriteString("\n")
	}
	if p.WriteBytes > 0 || p.SeqWrites+p.RandWrites > 0 {
		fmt.Fprintf(b, "writes: %s, %s sequential by bytes (%s seq / %s random ops)\n",
			format.Bytes(p.WriteBytes), format.Pct(p.SeqWriteShare), format.Count(p.SeqWrites), format.Count(p.RandWrites))
	}
	if v.TTFB != nil {
		fmt.Fprintf(b, "time to first byte (each file's first read, its own latency): n=%s p50 %s p99 %s max %s\n",
			format.Count(v.TTFB.Count), format.Dur(v.TTFB.P50), format.Dur(v.TTFB.P99), format.Dur(v.TTFB.MaxNs))
	}
	if v.Unused.Count > 0 {
		fmt.Fprintf(b, "files opened but never read or written: %s\n", format.Count(uint64(v.Unused.Count)))
	}
	writeInflightLine(b, v)
}

func writeDetails(b *strings.Builder, v *View) {
	writeErrnos(b, "system call errors by errno", v.Syscalls)
	writeErrnos(b, "errors by errno", v.Ops)
	for _, x := range []struct {
		name string
		rows []SizeRow
	}{{"read latency by request size", v.ReadBySize}, {"write latency by request size", v.WriteBySize}} {
		if len(x.rows) == 0 {
			continue
		}
		fmt.Fprintf(b, "\n%s\n", x.name)
		t := newTable("size", "count", "bytes", "mean", "p50", "p90", "p99", "p99.9")
		for _, r := range x.rows {
			t.add(r.Bucket, format.Count(r.Count), format.Bytes(r.Bytes), format.Dur(int64(r.MeanNs)), format.Dur(r.P50), format.Dur(r.P90), format.Dur(r.P99), format.Dur(r.P999))
		}
		b.WriteString(t.String())
	}
	writeInflight(b, v)
	if v.TTFB != nil {
		b.WriteString("\ntime to first byte\n")
		t := newTable("count", "mean", "p50", "p90", "p99", "p99.9", "max")
		t.left = map[int]bool{}
		l := v.TTFB
		t.add(format.Count(l.Count), format.Dur(int64(l.MeanNs)), format.Dur(l.P50), format.Dur(l.P90), format.Dur(l.P99), format.Dur(l.P999), format.Dur(l.MaxNs))
		b.WriteString(t.String())
	}
	writeAccessSizes(b, v.AccessSizes)
	if len(v.Processes) > 0 {
		b.WriteString("\nprocesses by time\n")
		t := newTable("comm", "pid", "host", "ops", "errors", "total", "share", "meta", "data", "read", "written", "command line")
		t.left[11] = true
		for _, p := range v.Processes {
			t.add(orDash(p.Comm), fmt.Sprint(p.Pid), orDash(p.Host), format.Count(p.Ops), format.Count(p.Errors), format.Dur(p.TotalNs), format.Pct(p.Share),
				format.Dur(p.MetaNs), format.Dur(p.DataNs), format.Bytes(p.ReadBytes), format.Bytes(p.WriteBytes), orDash(cmdlineCell(p.Cmdline, 60)))
		}
		b.WriteString(t.String())
	}
	if len(v.Commands) > 0 {
		b.WriteString("\ncommand lines, by their processes' time\n")
		t := newTable("comm", "processes", "total", "command line")
		t.left[3] = true
		for _, c := range v.Commands {
			t.add(orDash(c.Comm), format.Count(uint64(c.Processes)), format.Dur(c.TotalNs), cmdlineCell(c.Cmdline, 100))
		}
		b.WriteString(t.String())
	}
	writeFiles(b, "files by time", v.FilesByTime, false)
	writeFileAccess(b, v.FilesByTime)
	writeFiles(b, "files by bytes", v.FilesByBytes, false)
	writeFiles(b, "directories by time", v.DirsByTime, true)
	writeFiles(b, "directories by bytes", v.DirsByBytes, true)
	if v.Unused.Count > 0 {
		fmt.Fprintf(b, "\nfiles opened but never read or written (%s)\n", format.Count(uint64(v.Unused.Count)))
		for _, p := range v.Unused.Paths {
			fmt.Fprintf(b, "  %s\n", termsafe.Name(displayPath(p)))
		}
		if v.Unused.Count > len(v.Unused.Paths) {
			fmt.Fprintf(b, "  ... %d more\n", v.Unused.Count-len(v.Unused.Paths))
		}
	}
	writeIntervals(b, &v.Intervals)
}

func writeFiles(b *strings.Builder, title string, rows []FileRow, dirs bool) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s\n", title)
	t := newTable("path", "ops", "total", "share", "meta", "data", "read", "written", "seq", "re-read", "size", "opens", "unused")
	for _, f := range rows {
		size := "-"
		if !dirs {
			size = format.Bytes(uint64(f.Size))
		}
		seq := "-"
		if f.ReadOps+f.WriteOps > 0 {
			seq = format.Pct(f.SeqShare)
		}
		rr := "-"
		if f.RereadBytes > 0 {
			rr = format.Bytes(f.RereadBytes)
			if f.RereadApprox {
				rr = ">=" + rr
			}
		}
		t.add(f.Path, format.Count(f.Ops), format.Dur(f.TotalNs), format.Pct(f.Share), format.Dur(f.MetaNs), format.Dur(f.DataNs), format.Bytes(f.ReadBytes),
			format.Bytes(f.WriteBytes), seq, rr, size, format.Count(f.Opens), format.Count(f.UnusedOpens))
	}
	b.WriteString(t.String())
}

func writeIntervals(b *strings.Builder, in *Intervals) {
	if len(in.Points) == 0 {
		return
	}
	// At most maxTextIntervals rows: group k consecutive intervals per row.
	k := (len(in.Points) + maxTextIntervals - 1) / maxTextIntervals
	if k == 1 {
		fmt.Fprintf(b, "\nper interval (%s each, from %s; p99 within 12.5%%)\n", format.Dur(in.WidthNs), in.Start.Format(time.RFC3339))
	} else {
		fmt.Fprintf(b, "\nper interval (%s each, from %s, %d per row: rates are averages, p99 and max the worst of the row)\n",
			format.Dur(in.WidthNs), in.Start.Format(time.RFC3339), k)
	}
	t := newTable("t", "ops/s", "read MB/s", "write MB/s", "p99", "max", "errors")
	for i := 0; i < len(in.Points); i += k {
		g := in.Points[i:min(i+k, len(in.Points))]
		var r IntervalRow
		for _, p := range g {
			r.OpsPerSec += p.OpsPerSec / float64(len(g))
			r.ReadMBps += p.ReadMBps / float64(len(g))
			r.WriteMBps += p.WriteMBps / float64(len(g))
			r.P99 = max(r.P99, p.P99)
			r.MaxNs = max(r.MaxNs, p.MaxNs)
			r.Errors += p.Errors
		}
		t.add(secs(g[0].T, in.WidthNs), fmt.Sprintf("%.1f", r.OpsPerSec), fmt.Sprintf("%.2f", r.ReadMBps), fmt.Sprintf("%.2f", r.WriteMBps), format.Dur(r.P99), format.Dur(r.MaxNs), format.Count(r.Errors))
	}
	b.WriteString(t.String())
	// The slowest intervals, so stalls show even when the table is cut.
	idx := make([]int, 0, len(in.Points))
	for i, p := range in.Points {
		if p.Ops > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) < 3 {
		return
	}
	sort.SliceStable(idx, func(a, c int) bool { return in.Points[idx[a]].MaxNs > in.Points[idx[c]].MaxNs })
	var parts []string
	for _, i := range idx[:min(5, len(idx))] {
		parts = append(parts, fmt.Sprintf("%s (max %s, p99 %s)", secs(in.Points[i].T, in.WidthNs), format.Dur(in.Points[i].MaxNs), format.Dur(in.Points[i].P99)))
	}
	fmt.Fprintf(b, "slowest intervals (longest op): %s\n", strings.Join(parts, ", "))
}

// secs formats an interval start: whole seconds for 1 s intervals and wider, else
// milliseconds resolution.
func secs(t float64, widthNs int64) string {
	if widthNs >= 1e9 {
		return fmt.Sprintf("%gs", t)
	}
	return fmt.Sprintf("%.3fs", t)
}

// writeFileAccess writes, for the files by time that were read, their reads of bytes
// never read before against re-reads, and the latency of their first read.
func writeFileAccess(b *strings.Builder, rows []FileRow) {
	t := newTable("path", "first access", "bytes", "mean", "re-access", "bytes", "mean", "first byte")
	n := 0
	for _, f := range rows {
		if f.FirstReads+f.Rereads == 0 {
			continue
		}
		mean := meanDur
		fb := "-"
		if f.FirstByteNs != nil {
			fb = format.Dur(*f.FirstByteNs)
		}
		t.add(f.Path, format.Count(f.FirstReads), format.Bytes(f.FirstReadBytes), mean(f.FirstReadNs, f.FirstReads),
			format.Count(f.Rereads), format.Bytes(f.RereadOnly), mean(f.RereadNs, f.Rereads), fb)
		n++
	}
	if n == 0 {
		return
	}
	b.WriteString("\nreads per file: first access (bytes never read before) and re-access (only bytes read before); first byte: the file's first read\n")
	b.WriteString(t.String())
}

// meanDur is ns / k as a duration, "-" when k is 0.
func meanDur(ns int64, k uint64) string {
	if k == 0 {
		return "-"
	}
	return format.Dur(ns / int64(k))
}

// writeGroupTable writes the table of r's groups (--by), one row each.
func writeGroupTable(b *strings.Builder, r *Report) {
	if len(r.GroupRows) == 0 {
		return
	}
	what := "calls"
	if r.Total.Syscalls == nil {
		what = "requests"
	}
	fmt.Fprintf(b, "\nby %s: each group's %s together (bytes read and written; IOPS: reads and writes that succeeded, meta/s: its other %s that succeeded, and MB/s, each per second of the group's wall time, from its first %s's start to its last one's end)\n",
		r.By, what, what, strings.TrimSuffix(what, "s"))
	t := groupTable(r.GroupRows, false)
	b.WriteString(t.String())
}

// writeAccessSizes writes the read and write calls by access size.
func writeAccessSizes(b *strings.Builder, rows []AccessSizeRow) {
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nread and write calls by size (Darshan's buckets; the calls that succeeded, by the bytes each moved; time in the storage)\n")
	t := newTable("size", "reads", "read", "read time", "writes", "written", "write time")
	dash := func(n uint64, s string) string {
		if n == 0 {
			return "-"
		}
		return s
	}
	for _, r := range rows {
		t.add(r.Bucket, format.Count(r.Reads), dash(r.Reads, format.Bytes(r.ReadBytes)), dash(r.Reads, format.Dur(r.ReadNs)),
			format.Count(r.Writes), dash(r.Writes, format.Bytes(r.WriteBytes)), dash(r.Writes, format.Dur(r.WriteNs)))
	}
	b.WriteString(t.String())
}
