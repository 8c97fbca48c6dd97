package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Groups of a report (--by): per trace, by its host or a label's value (GroupKey), or per
// event, by the program or user that made it (EventGroup).

// ByEvent reports whether --by by splits the events of a trace (comm, exe, uid) rather than
// the traces (host, label:KEY).
func ByEvent(by string) bool { return by == "comm" || by == "exe" || by == "uid" }

// ByProgram reports whether --by by groups processes by what they ran (comm, exe): the
// groups need each process's name before its events are aggregated (EventGroup).
func ByProgram(by string) bool { return by == "comm" || by == "exe" }

// checkBy checks a --by value.
func checkBy(by string) error {
	if ByEvent(by) {
		return nil
	}
	_, err := GroupKey(by, &trace.Header{})
	return err
}

// EventGroup returns the function that names an event's group under --by comm, exe or
// uid: "comm=NAME" and "exe=PATH" by the process's record that stats.ProcessNames picks
// from names (a process that exec'd another program is in the group of the last; pid 0,
// the requests the kernel makes on its own, is "(kernel)"; a process without a record,
// or one whose executable could not be read, "(unknown)"), "uid=N" by the event's user.
// names are the trace's process records (trace.Reader.Processes), needed for comm and exe.
func EventGroup(by string, names []trace.Process) func(ev *trace.Event) string {
	if by == "uid" {
		return func(ev *trace.Event) string { return "uid=" + strconv.FormatUint(uint64(ev.Uid), 10) }
	}
	procs := stats.ProcessNames(names)
	return func(ev *trace.Event) string {
		p, ok := procs[ev.Pid]
		name := ""
		if ok {
			name = p.Comm
			if by == "exe" {
				name = p.Exe
			}
		}
		if ev.Pid == 0 {
			name = "(kernel)"
		} else if name == "" {
			name = "(unknown)"
		}
		return by + "=" + name
	}
}

// GroupRow is one group of a report in the table of groups: its processes and command
// lines, and, over all its calls (requests without the per-system-call view), what every
// row has. Bytes are those it read and wrote; MB/s their rate over its I/O-active time
// (busy_ns). WallNs is the group's wall time (its view's duration_ns) and Wall its rates
// over it, as its view's job has them (IOPS: reads and writes that succeeded): the table
// shows those, so that groups that are runs of one job at different settings (a queue
// depth each) read as the runs' IOPS.
type GroupRow struct {
	Group     string `json:"group"`
	Processes int    `json:"processes"`
	Totals
	Latency
	Pace
	WallNs int64   `json:"wall_ns"`
	Wall   JobRate `json:"wall"`
}

func (r *GroupRow) name() string { return r.Group }

// groupRows are the rows of a report's group table, one per group.
func groupRows(views []*View, groups []*stats.Stats) []*GroupRow {
	if len(views) == 0 {
		return nil
	}
	all := make([]stats.OpStats, len(groups))
	var total int64
	for i, g := range groups {
		if views[i].Syscalls != nil {
			for k := range g.Calls {
				all[i].Add(&g.Calls[k].OpStats)
			}
		} else {
			for k := range g.Ops {
				all[i].Add(&g.Ops[k])
			}
		}
		all[i].Bytes = views[i].Job.ReadBytes + views[i].Job.WriteBytes
		total += all[i].TotalNs
	}
	ax := &axis{
		unit:   groupKind(views[0].Name),
		plural: "calls",
		kinds:  len(groups),
		name:   func(k int) string { return views[k].Name },
		in: func(_ *stats.Stats, k int) rowIn {
			return rowIn{o: &all[k], busy: views[k].Job.ActiveNs}
		},
		total: func(*stats.Stats) int64 { return total },
	}
	procs := map[string]int{}
	byName := map[string]*View{}
	for i, g := range groups {
		procs[views[i].Name] = len(g.Procs)
		byName[views[i].Name] = views[i]
	}
	rows := groupRowKind(ax).build(nil)
	for _, r := range rows {
		r.Processes = procs[r.Group]
		r.MBps = perSec(float64(r.Bytes)/1e6, r.BusyNs)
		if v := byName[r.Group]; v.Job != nil {
			r.WallNs, r.Wall = v.Job.WallNs, v.Job.Wall
		}
	}
	return rows
}

// groupRowKind is the kind of row of the group table over ax: the groups of a report.
func groupRowKind(ax *axis) *rowKind[*GroupRow] {
	return &rowKind[*GroupRow]{
		axis: ax,
		newRow: func(_ *stats.Stats, k int) *GroupRow {
			return &GroupRow{Group: ax.name(k)}
		},
		mid: []column[*GroupRow]{{head: "processes", cell: func(r *GroupRow) string { return format.Count(uint64(r.Processes)) }}},
		rates: []column[*GroupRow]{
			{head: "IOPS", cell: func(r *GroupRow) string { return rateText(r.Wall.IOPS) }},
			{head: "meta/s", cell: func(r *GroupRow) string { return rateText(r.Wall.MetaOps) }},
			{head: "MB/s", cell: func(r *GroupRow) string { return mbText(r.Wall.MBps) }},
		},
	}
}

// mbText is a rate in MB/s, "-" when zero.
func mbText(mbps float64) string {
	if mbps == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", mbps)
}

// groupTable is the group table in text (html false) or HTML.
func groupTable(rows []*GroupRow, html bool) rowTable {
	if len(rows) == 0 {
		return rowTable{}
	}
	ax := &axis{unit: groupKind(rows[0].Group), plural: "calls"}
	return groupRowKind(ax).table(rows, html)
}

// maxCommandsLine bounds the command lines commandsLine names.
const maxCommandsLine = 3

// commandsLine is a group's command lines in one line of text, the busiest first: "command
// lines: 3× sqlite3 db.sqlite 'insert …'; 1× sh job.sh; and 18 more".
func commandsLine(cs []CommandRow, total int) string {
	var parts []string
	for _, c := range cs[:min(len(cs), maxCommandsLine)] {
		parts = append(parts, fmt.Sprintf("%d× %s", c.Processes, cmdlineText(c.Cmdline, 70)))
	}
	line := "command lines: " + strings.Join(parts, "; ")
	if n := total - min(len(cs), maxCommandsLine); n > 0 {
		line += fmt.Sprintf("; and %d more", n)
	}
	return line
}
