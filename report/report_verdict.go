package report

import (
	"fmt"
	"sort"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace/stats"
)

// ReportVerdict is a report's answer in one line (Text) and in figures, e.g.
// "I/O 26.0% of 4.75s; 73.0% of it fdatasync on db.sqlite-journal; p99 open 7.70ms". The
// rule, over the view's rows (its system calls; its FUSE requests when it has no
// per-system-call view):
//
//   - I/O share: the time at least one request was in flight (I/O-active time, ActiveNs)
//     over the wall time (WallNs), each summed over the view's traces (Traces), every trace
//     from its first op's start to its last op's end: "I/O 6.5% of 6.17s summed over 2
//     traces" for two nodes of a job;
//   - where it went: the kind of row with the most time (Top; ties by name) and its share
//     of the rows' summed time (IONs: call_ns, or the job I/O time). When one path holds at
//     least half of Top's time (TopPath, the path with the most of it; calls view only),
//     the line gives that path's share instead: "73.0% of it fdatasync on db.sqlite-journal";
//     else Top's and over how many paths: "80.0% of it read (over 1,000 paths)";
//   - the worst tail of a frequent call: of the kinds of row with at least MinTailCount
//     calls (or requests), the one with the highest p99 (ties by name).
type ReportVerdict struct {
	Text string `json:"text"`
	// View is what the rows are: ViewSyscalls or ViewRequests.
	View     string  `json:"view"`
	Traces   int     `json:"traces"`
	WallNs   int64   `json:"wall_ns"`
	ActiveNs int64   `json:"active_ns"`
	IOShare  float64 `json:"io_share"` // ActiveNs / WallNs
	IONs     int64   `json:"io_ns"`
	Top      string  `json:"top,omitempty"`
	TopNs    int64   `json:"top_ns,omitempty"`
	TopShare float64 `json:"top_share,omitempty"` // TopNs / IONs
	// TopPaths is the number of paths Top's calls were on; TopPath the one with the most of
	// its time, TopPathNs that time, TopPathShare TopPathNs / IONs (calls view only).
	TopPaths     int     `json:"top_paths,omitempty"`
	TopPath      string  `json:"top_path,omitempty"`
	TopPathNs    int64   `json:"top_path_ns,omitempty"`
	TopPathShare float64 `json:"top_path_share,omitempty"`
	// Tail is the kind of row with the highest p99 among those of at least MinTailCount;
	// TailCount its count and TailP99Ns its p99. Empty when no kind is that frequent.
	Tail      string `json:"tail,omitempty"`
	TailCount uint64 `json:"tail_count,omitempty"`
	TailP99Ns int64  `json:"tail_p99_ns,omitempty"`
}

// MinTailCount is how many calls (or requests) a kind needs for its p99 to stand in a
// verdict: with fewer, the p99 is the slowest one or two.
const MinTailCount = 100

// reportVerdict makes the verdict of view v of s.
func reportVerdict(v *View, s *stats.Stats) *ReportVerdict {
	rv := &ReportVerdict{View: ViewRequests, ActiveNs: v.Job.ActiveNs, IONs: v.TotalNs}
	for i := range s.Sources {
		if src := &s.Sources[i]; src.Events > 0 {
			rv.WallNs += max(0, src.LastNs-src.FirstNs)
			rv.Traces++
		}
	}
	rv.IOShare = share(rv.ActiveNs, rv.WallNs)
	type row struct {
		name  string
		total int64
		count uint64
		p99   int64
	}
	var rows []row
	if v.Syscalls != nil {
		rv.View, rv.IONs = ViewSyscalls, v.CallNs
		for _, c := range v.Syscalls {
			rows = append(rows, row{c.Call, c.TotalNs, c.Count, c.P99})
		}
	} else {
		for _, o := range v.Ops {
			rows = append(rows, row{o.Op, o.TotalNs, o.Count, o.P99})
		}
	}
	// The rows come by total time, the largest first, then by name.
	if len(rows) > 0 && rows[0].total > 0 {
		rv.Top, rv.TopNs = rows[0].name, rows[0].total
		rv.TopShare = round3(share(rv.TopNs, rv.IONs))
		if rv.View == ViewSyscalls {
			rv.topPath(s)
		}
	}
	for _, r := range rows {
		if r.count < MinTailCount {
			continue
		}
		if r.p99 > rv.TailP99Ns || (r.p99 == rv.TailP99Ns && r.name < rv.Tail) || rv.Tail == "" {
			rv.Tail, rv.TailCount, rv.TailP99Ns = r.name, r.count, r.p99
		}
	}
	rv.IOShare = round3(rv.IOShare)
	rv.Text = rv.text()
	return rv
}

// topPath finds the path with the most of Top's time in s.
func (rv *ReportVerdict) topPath(s *stats.Stats) {
	type pathNs struct {
		path string
		ns   int64
	}
	var ps []pathNs
	for k, ns := range s.CallPaths {
		if k.Call.String() == rv.Top {
			ps = append(ps, pathNs{k.Path, ns})
		}
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].ns != ps[j].ns {
			return ps[i].ns > ps[j].ns
		}
		return ps[i].path < ps[j].path
	})
	rv.TopPaths = len(ps)
	if len(ps) > 0 && 2*ps[0].ns >= rv.TopNs {
		rv.TopPath, rv.TopPathNs = displayPath(ps[0].path), ps[0].ns
		rv.TopPathShare = round3(share(rv.TopPathNs, rv.IONs))
	}
}

// text is the verdict in one line.
func (rv *ReportVerdict) text() string {
	if rv.IONs == 0 && rv.ActiveNs == 0 {
		return "no I/O"
	}
	t := fmt.Sprintf("I/O %s of %s", format.Pct(rv.IOShare), format.Dur(rv.WallNs))
	if rv.Traces > 1 {
		t += fmt.Sprintf(" summed over %d traces", rv.Traces)
	}
	switch {
	case rv.TopPath != "":
		t += fmt.Sprintf("; %s of it %s on %s", format.Pct(rv.TopPathShare), rv.Top, rv.TopPath)
	case rv.Top != "" && rv.TopPaths > 1:
		t += fmt.Sprintf("; %s of it %s (over %s paths)", format.Pct(rv.TopShare), rv.Top, format.Count(uint64(rv.TopPaths)))
	case rv.Top != "":
		t += fmt.Sprintf("; %s of it %s", format.Pct(rv.TopShare), rv.Top)
	}
	if rv.Tail != "" {
		t += fmt.Sprintf("; p99 %s %s", rv.Tail, format.Dur(rv.TailP99Ns))
	}
	return t
}
