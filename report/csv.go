package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CSVTables names the tables WriteCSV can write.
var CSVTables = []string{"ops", "syscalls", "sizes", "procs", "files", "dirs", "intervals"}

// WriteCSV writes one table of r as CSV with a header row. Every row starts with the view
// name ("all", or a group such as "host=node1"). Durations are in ns, bytes in bytes,
// shares are fractions.
func WriteCSV(w io.Writer, r *Report, tableName string) error {
	cw := csv.NewWriter(w)
	views := append([]*View{r.Total}, r.Groups...)
	u := func(n uint64) string { return strconv.FormatUint(n, 10) }
	i64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	var rows [][]string
	switch tableName {
	case "", "ops":
		rows = opRows.csv(views, func(v *View) []*OpRow { return v.Ops })
	case "syscalls":
		rows = callRows.csv(views, func(v *View) []*CallRow { return v.Syscalls })
	case "sizes":
		rows = append(rows, []string{"view", "op", "bucket", "max_bytes", "count", "bytes", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p99_9_ns"})
		for _, v := range views {
			for _, x := range []struct {
				op   string
				rows []SizeRow
			}{{"read", v.ReadBySize}, {"write", v.WriteBySize}} {
				for _, s := range x.rows {
					rows = append(rows, []string{v.Name, x.op, s.Bucket, u(uint64(s.MaxBytes)), u(s.Count), u(s.Bytes), f(s.MeanNs), i64(s.P50), i64(s.P90), i64(s.P99), i64(s.P999)})
				}
			}
		}
	case "procs":
		rows = append(rows, []string{"view", "host", "pid", "comm", "exe", "ops", "errors", "total_ns", "share", "meta_ns", "data_ns", "read_bytes", "write_bytes", "cmdline"})
		for _, v := range views {
			for _, p := range v.Processes {
				rows = append(rows, []string{v.Name, p.Host, u(uint64(p.Pid)), p.Comm, p.Exe, u(p.Ops), u(p.Errors), i64(p.TotalNs), f(p.Share), i64(p.MetaNs), i64(p.DataNs), u(p.ReadBytes), u(p.WriteBytes), shellJoin(p.Cmdline)})
			}
		}
	case "files", "dirs":
		rows = append(rows, []string{"view", "order", "path", "ops", "errors", "total_ns", "share", "meta_ns", "data_ns", "read_ops", "write_ops", "read_bytes", "write_bytes", "seq_share", "reread_bytes", "opens", "unused_opens", "extent"})
		for _, v := range views {
			byTime, byBytes := v.FilesByTime, v.FilesByBytes
			if tableName == "dirs" {
				byTime, byBytes = v.DirsByTime, v.DirsByBytes
			}
			for _, x := range []struct {
				order string
				rows  []FileRow
			}{{"time", byTime}, {"bytes", byBytes}} {
				for _, r := range x.rows {
					rows = append(rows, []string{v.Name, x.order, r.Path, u(r.Ops), u(r.Errors), i64(r.TotalNs), f(r.Share), i64(r.MetaNs), i64(r.DataNs), u(r.ReadOps), u(r.WriteOps), u(r.ReadBytes), u(r.WriteBytes), f(r.SeqShare), u(r.RereadBytes), u(r.Opens), u(r.UnusedOpens), i64(r.Extent)})
				}
			}
		}
	case "intervals":
		rows = append(rows, []string{"view", "start", "width_ns", "t_s", "ops", "errors", "ops_per_s", "read_mb_s", "write_mb_s", "p99_ns", "max_ns", "busy_ns"})
		for _, v := range views {
			in := &v.Intervals
			for _, p := range in.Points {
				rows = append(rows, []string{v.Name, in.Start.Format("2006-01-02T15:04:05.999999999Z07:00"), i64(in.WidthNs), f(p.T), u(p.Ops), u(p.Errors), f(p.OpsPerSec), f(p.ReadMBps), f(p.WriteMBps), i64(p.P99), i64(p.MaxNs), i64(p.BusyNs)})
			}
		}
	default:
		return fmt.Errorf("report: unknown csv table %q (want one of %s)", tableName, strings.Join(CSVTables, ", "))
	}
	if err := cw.WriteAll(rows); err != nil {
		return fmt.Errorf("report: write csv: %w", err)
	}
	return nil
}
