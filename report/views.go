package report

import (
	"sort"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace/stats"
)

// CommandRow is one command line a view's processes ran: how many processes ran it (by
// their main thread, stats.ProcessNames) and their time in the storage.
type CommandRow struct {
	Comm      string   `json:"comm"`
	Cmdline   []string `json:"cmdline"`
	Processes int      `json:"processes"`
	TotalNs   int64    `json:"total_ns"`
}

// commandRows are the command lines of s's processes, by their processes' total time, the
// largest first (then by processes, then by command line), at most top; and how many
// distinct ones there are.
func commandRows(s *stats.Stats, top int) ([]CommandRow, int) {
	byKey := map[string]*CommandRow{}
	for _, p := range s.Procs {
		if p.Cmdline == nil {
			continue
		}
		k := p.Comm + "\x00" + strings.Join(p.Cmdline, "\x00")
		c := byKey[k]
		if c == nil {
			c = &CommandRow{Comm: p.Comm, Cmdline: p.Cmdline}
			byKey[k] = c
		}
		c.Processes++
		c.TotalNs += p.TotalNs
	}
	out := make([]CommandRow, 0, len(byKey))
	for _, c := range byKey {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.TotalNs != b.TotalNs {
			return a.TotalNs > b.TotalNs
		}
		if a.Processes != b.Processes {
			return a.Processes > b.Processes
		}
		return strings.Join(a.Cmdline, " ") < strings.Join(b.Cmdline, " ")
	})
	return out[:min(len(out), top)], len(out)
}

// shellJoin joins a command line's arguments as a shell would need them typed: an argument
// with anything but letters, digits and -_./=:,+@% in it quoted: in single quotes, or in
// double quotes when it holds a single quote and nothing a shell expands in double
// quotes, else in single quotes with each of its own as '\”; an empty one as ”.
func shellJoin(args []string) string {
	plain := func(a string) bool {
		safe := func(r rune) bool {
			return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r)
		}
		return a != "" && strings.IndexFunc(a, func(r rune) bool { return !safe(r) }) < 0
	}
	q := make([]string, len(args))
	for i, a := range args {
		switch {
		case plain(a):
			q[i] = a
		case strings.Contains(a, "'") && !strings.ContainsAny(a, "\"$`\\!"):
			q[i] = `"` + a + `"`
		default:
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// cutRunes cuts s to n runes, "…" last when cut (n 0: no limit).
func cutRunes(s string, n int) string {
	r := []rune(s)
	if n > 0 && len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// cmdlineCell is a command line for a table cell, which escapes it for a terminal
// (shellJoin, cut to n runes).
func cmdlineCell(args []string, n int) string { return cutRunes(shellJoin(args), n) }

// cmdlineText is a command line in a line of text or HTML: shellJoin, with bytes a terminal
// could act on escaped (termsafe.Name), cut to n runes.
func cmdlineText(args []string, n int) string {
	return cutRunes(termsafe.Name(shellJoin(args)), n)
}

// AccessSizeRow counts the read and write calls that succeeded, of one of Darshan's
// access-size buckets, by the bytes each moved: how many, their bytes and their time in
// the storage.
type AccessSizeRow struct {
	Bucket     string `json:"bucket"`
	MaxBytes   int64  `json:"max_bytes"` // the bucket's upper bound, inclusive; 0 for "1G+"
	Reads      uint64 `json:"reads"`
	ReadBytes  uint64 `json:"read_bytes"`
	ReadNs     int64  `json:"read_ns"`
	Writes     uint64 `json:"writes"`
	WriteBytes uint64 `json:"write_bytes"`
	WriteNs    int64  `json:"write_ns"`
}

// accessSizeRows are the ten buckets of s's read and write calls; nil when there were none.
func accessSizeRows(s *stats.Stats) []AccessSizeRow {
	var n uint64
	out := make([]AccessSizeRow, stats.NumAccessSizes)
	for b := range stats.NumAccessSizes {
		r, w := s.AccessSizes[0][b], s.AccessSizes[1][b]
		out[b] = AccessSizeRow{Reads: r.Count, ReadBytes: r.Bytes, ReadNs: r.TotalNs, Writes: w.Count, WriteBytes: w.Bytes, WriteNs: w.TotalNs}
		out[b].Bucket, out[b].MaxBytes = stats.AccessSizeLabel(b)
		n += r.Count + w.Count
	}
	if n == 0 {
		return nil
	}
	return out
}

// HeatMap is a view's time in the storage and bytes moved over time, by file or by
// program (stats.Heat): one row each for the busiest, Columns columns of WidthNs from
// Start (the view's intervals' start). An event counts in the column its start falls in.
type HeatMap struct {
	By      string    `json:"by"` // "file" or "program"
	Start   time.Time `json:"start"`
	WidthNs int64     `json:"width_ns"`
	Columns int       `json:"columns"`
	Rows    []HeatRow `json:"rows"`
}

// HeatRow is one row of a heat map: its time in the storage and bytes per column.
type HeatRow struct {
	Name    string   `json:"name"`
	TotalNs int64    `json:"total_ns"`
	Bytes   uint64   `json:"bytes"`
	Ns      []int64  `json:"ns"`
	ByCol   []uint64 `json:"bytes_per_column"`
}

// Heat maps have at most maxHeatRows rows and about maxHeatColumns columns.
const (
	maxHeatRows    = 12
	maxHeatColumns = 100
)

// heatMap lays out rows (name and heat, the busiest first) from start: its columns are as
// narrow as every row's cells allow, and the power of two of stats.HeatBase that keeps
// them to about maxHeatColumns. Nil when no row has a cell.
func heatMap(by string, start time.Time, names []string, heats []*stats.Heat) *HeatMap {
	var width time.Duration
	var end int64
	for _, h := range heats {
		width = max(width, h.Width)
		if n := len(h.Cells); n > 0 {
			end = max(end, h.Cells[n-1].Start+int64(h.Width))
		}
	}
	if width == 0 || start.IsZero() {
		return nil
	}
	span := end - start.UnixNano()
	for span > int64(width)*maxHeatColumns {
		width *= 2
	}
	m := &HeatMap{By: by, Start: start, WidthNs: int64(width), Columns: int(max((span+int64(width)-1)/int64(width), 1))}
	for i, h := range heats {
		r := HeatRow{Name: names[i], Ns: make([]int64, m.Columns), ByCol: make([]uint64, m.Columns)}
		for _, c := range h.Cells {
			col := int(max(c.Start-start.UnixNano(), 0) / int64(width))
			col = min(col, m.Columns-1)
			r.Ns[col] += c.Ns
			r.ByCol[col] += c.Bytes
			r.TotalNs += c.Ns
			r.Bytes += c.Bytes
		}
		m.Rows = append(m.Rows, r)
	}
	return m
}

// heatMaps makes v's heat maps of s: the busiest files (those of files_by_time) and the
// busiest programs (processes by name).
func heatMaps(v *View, s *stats.Stats) (files, programs *HeatMap) {
	start := v.Intervals.Start
	var names []string
	var heats []*stats.Heat
	for _, f := range v.FilesByTime[:min(len(v.FilesByTime), maxHeatRows)] {
		path := f.Path
		if path == "." {
			path = ""
		}
		if fs := s.Files[stats.FileKey(path, false)]; fs != nil {
			names, heats = append(names, f.Path), append(heats, &fs.Heat)
		}
	}
	files = heatMap("file", start, names, heats)

	progs := map[string]*stats.Heat{}
	total := map[string]int64{}
	for _, p := range s.Procs {
		name := procName(p.Pid, p.Comm)
		h := progs[name]
		if h == nil {
			h = &stats.Heat{}
			progs[name] = h
		}
		h.Merge(&p.Heat)
		total[name] += p.TotalNs
	}
	names = names[:0]
	for n := range progs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if total[names[i]] != total[names[j]] {
			return total[names[i]] > total[names[j]]
		}
		return names[i] < names[j]
	})
	names = names[:min(len(names), maxHeatRows)]
	heats = heats[:0]
	for _, n := range names {
		heats = append(heats, progs[n])
	}
	programs = heatMap("program", start, names, heats)
	return files, programs
}

// procName is how the report names a process's program: its comm, "(kernel)" for the
// requests the kernel makes on its own (release, forget, writeback: pid 0), "(unknown)" for
// a process the trace has no record of (or one without a name: gone before it was read).
func procName(pid uint32, comm string) string {
	switch {
	case comm != "":
		return comm
	case pid == 0:
		return "(kernel)"
	}
	return "(unknown)"
}
