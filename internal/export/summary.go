package export

import (
	"fmt"
	"io"
	"strconv"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// The summary (iotap summary): a row per trace, or per job (its traces' figures merged),
// from the figures the report shows (package trace/stats). A Summary keeps only its row's
// values, so that a summary over thousands of traces holds a row per trace, not their
// statistics.

// SummaryView names the summary's table (in a Parquet file's iotap.view).
const SummaryView = "summary"

// summaryCalls are the kinds of system call with a count column.
var summaryCalls = []fold.Syscall{fold.SysOpen, fold.SysStat, fold.SysRead, fold.SysWrite, fold.SysClose, fold.SysGetdents,
	fold.SysFsync, fold.SysFdatasync, fold.SysMkdir, fold.SysUnlink, fold.SysRename}

// summaryLatencies are the kinds of call whose p50 and p99 the summary gives.
var summaryLatencies = []fold.Syscall{fold.SysOpen, fold.SysStat, fold.SysRead, fold.SysWrite}

// Summary is one row of the summary.
type Summary struct {
	Name    string // the trace (as named), or "job J"
	Traces  int
	first   string    // the name of the row's first trace (in name order)
	id      *identity // its identity
	hosts   map[string]bool
	st      *stats.Stats
	Damaged bool
}

// NewSummary starts the row of one trace (named name, with header h) from its statistics.
// The statistics must hold the per-system-call view (stats.Options.Names).
func NewSummary(name string, h *trace.Header, st *stats.Stats, damaged bool) *Summary {
	return &Summary{Name: name, Traces: 1, first: name, id: identityOf(h), hosts: map[string]bool{h.Hostname: true}, st: st, Damaged: damaged}
}

// Merge adds o's trace (or traces) to s: a job's row.
func (s *Summary) Merge(o *Summary) {
	if o.first < s.first {
		s.first, s.id = o.first, o.id
	}
	s.Traces += o.Traces
	for h := range o.hosts {
		s.hosts[h] = true
	}
	s.st.Merge(o.st)
	s.Damaged = s.Damaged || o.Damaged
}

// Job returns the Slurm job of s's (first) trace, "" outside Slurm.
func (s *Summary) Job() string { return s.id.job }

// summaryColumns are the summary's columns, in order (schema SchemaVersion).
var summaryColumns = func() []column[Summary] {
	cols := []column[Summary]{
		nameCol("name", `the trace, as named (a file, an s3:// URL), or "job J" for a job's row`, func(s *Summary) string { return s.Name }),
		intCol("traces", "the traces in the row", func(s *Summary) int64 { return int64(s.Traces) }),
		optStr("trace_id", "the trace's identity (NULL for a row of several)", func(s *Summary) string {
			if s.Traces > 1 {
				return ""
			}
			return s.id.traceID
		}),
		nameCol("host", "the host (for a row of several, the first trace's in name order)", func(s *Summary) string { return s.id.host }),
		intCol("hosts", "the hosts the row's traces were made on", func(s *Summary) int64 { return int64(len(s.hosts)) }),
		optStr("job", "the Slurm job id (label SLURM_JOB_ID), NULL outside Slurm", func(s *Summary) string { return s.id.job }),
		optTime("start_time", "the first request's start (NULL: no request)", func(s *Summary) (int64, bool) {
			var first int64
			ok := false
			for i := range s.st.Sources {
				src := &s.st.Sources[i]
				if src.Events == 0 {
					continue
				}
				t := src.Header.WallStart.UnixNano() + src.FirstNs
				if !ok || t < first {
					first, ok = t, true
				}
			}
			return first, ok
		}),
		intCol("runtime_ns", "wall time from the first request's start to the last one's end (the union over the row's traces)",
			func(s *Summary) int64 { return s.st.WallNs() }),
		intCol("node_ns", "the traces' wall times summed: node time", func(s *Summary) int64 {
			var t int64
			for i := range s.st.Sources {
				if src := &s.st.Sources[i]; src.Events > 0 {
					t += max(0, src.LastNs-src.FirstNs)
				}
			}
			return t
		}),
		intCol("io_ns", "I/O-active time: the time with at least one request in flight, summed over the traces",
			func(s *Summary) int64 { return s.st.BusyNs() }),
		intCol("requests", "FUSE requests", func(s *Summary) int64 { return int64(s.st.Events) }),
		intCol("calls", "system calls (the requests folded as report folds them)", func(s *Summary) int64 {
			var n uint64
			for i := range s.st.Calls {
				n += s.st.Calls[i].Count
			}
			return int64(n)
		}),
		intCol("errors", "system calls that failed", func(s *Summary) int64 {
			var n uint64
			for i := range s.st.Calls {
				n += s.st.Calls[i].Errors
			}
			return int64(n)
		}),
		intCol("read_bytes", "bytes read (and copied with copy_file_range)", func(s *Summary) int64 {
			return int64(s.st.Ops[trace.OpRead].Bytes + s.st.Ops[trace.OpCopyFileRange].Bytes)
		}),
		intCol("write_bytes", "bytes written (and copied with copy_file_range)", func(s *Summary) int64 {
			return int64(s.st.Ops[trace.OpWrite].Bytes + s.st.Ops[trace.OpCopyFileRange].Bytes)
		}),
		intCol("dur_ns", "the requests' time, summed", func(s *Summary) int64 { return s.st.TotalNs() }),
		intCol("meta_ns", "of which in metadata requests (its share: meta_ns / dur_ns)", func(s *Summary) int64 {
			return s.st.Classes[trace.ClassMeta].TotalNs
		}),
	}
	for _, k := range summaryCalls {
		cols = append(cols, intCol("calls_"+k.String(), k.String()+" calls", func(s *Summary) int64 { return int64(s.st.Calls[k].Count) }))
	}
	for _, k := range summaryLatencies {
		for _, p := range []float64{50, 99} {
			pn := strconv.Itoa(int(p))
			name := "p" + pn + "_" + k.String() + "_ns"
			cols = append(cols, optInt(name, "the p"+pn+" of the "+k.String()+" calls' time in the storage (rank ⌈p·n⌉; NULL: none)",
				func(s *Summary) (int64, bool) {
					c := &s.st.Calls[k]
					return c.Percentile(p), c.Count > 0
				}))
		}
	}
	cols = append(cols,
		optName("top_program", "the command name whose requests took the most time", func(s *Summary) string { n, _ := s.topProgram(); return n }),
		optInt("top_program_ns", "its requests' time", func(s *Summary) (int64, bool) { n, t := s.topProgram(); return t, n != "" }),
		optName("top_file", "the file whose requests took the most time", func(s *Summary) string { n, _ := s.topFile(); return n }),
		optInt("top_file_ns", "its requests' time", func(s *Summary) (int64, bool) { n, t := s.topFile(); return t, n != "" }),
		intCol("first_read_bytes", "first access: bytes read that were never read before from their file in the trace",
			func(s *Summary) int64 { return int64(s.st.FirstReads.Bytes) }),
		intCol("reread_bytes", "re-access: bytes of reads that returned only bytes read before",
			func(s *Summary) int64 { return int64(s.st.Rereads.Bytes) }),
		intCol("dropped", "events the recorders dropped (not in the figures)", func(s *Summary) int64 {
			var n uint64
			for i := range s.st.Sources {
				if f := s.st.Sources[i].Footer; f != nil {
					n += f.Dropped
				}
			}
			return int64(n)
		}),
		boolCol("damaged", "a trace was damaged: the figures are of its readable part", func(s *Summary) bool { return s.Damaged }),
		strCol("iotap_version", "the iotap version that wrote the (first) trace", func(s *Summary) string { return s.id.version }),
		column[Summary]{Column: Column{Name: "labels", Type: Labels, Doc: "the (first) trace's labels"},
			get: func(s *Summary) Value { return Value{Labels: s.id.labels} }},
	)
	return cols
}()

// topProgram returns the command name whose requests took the most time, and that time.
func (s *Summary) topProgram() (string, int64) {
	by := map[string]int64{}
	for k, p := range s.st.Procs {
		by[k.Comm] += p.TotalNs
	}
	return top(by)
}

// topFile returns the file whose requests took the most time (directories left out), and
// that time.
func (s *Summary) topFile() (string, int64) {
	by := map[string]int64{}
	for _, f := range s.st.Files {
		if !f.IsDir {
			by[f.Path] += f.TotalNs
		}
	}
	return top(by)
}

// top returns the key of the largest value (ties: the smallest key).
func top(by map[string]int64) (string, int64) {
	var name string
	var t int64
	found := false
	for k, v := range by {
		if !found || v > t || (v == t && k < name) {
			name, t, found = k, v, true
		}
	}
	return name, t
}

// SummaryColumns returns the summary's columns.
func SummaryColumns() []Column { return columnsOf(summaryColumns) }

// SummaryWriter writes summary rows in a row format.
type SummaryWriter struct {
	rw  RowWriter
	row []Value
}

// NewSummaryWriter starts writing the summary to w in format (a row format: jsonl, csv,
// parquet).
func NewSummaryWriter(w io.Writer, format string) (*SummaryWriter, error) {
	f, ok := FormatNamed(format)
	if !ok || f.Rows == nil {
		return nil, fmt.Errorf("--format %s: the summary is written as %s", format, RowFormatNames("or"))
	}
	rw, err := f.Rows(w, Table{View: SummaryView, Columns: SummaryColumns()})
	if err != nil {
		return nil, writeError(err)
	}
	return &SummaryWriter{rw: rw, row: make([]Value, len(summaryColumns))}, nil
}

// Values returns s's row: a Value per column of SummaryColumns.
func (s *Summary) Values() []Value {
	row := make([]Value, len(summaryColumns))
	fill(summaryColumns, s, row, false)
	return row
}

// Write writes s's row.
func (sw *SummaryWriter) Write(s *Summary) error {
	fill(summaryColumns, s, sw.row, false)
	return sw.WriteValues(sw.row)
}

// WriteValues writes a row Values returned.
func (sw *SummaryWriter) WriteValues(row []Value) error {
	if err := sw.rw.Write(row); err != nil {
		return writeError(err)
	}
	return nil
}

// Close ends the output.
func (sw *SummaryWriter) Close() error {
	if err := sw.rw.Close(); err != nil {
		return writeError(err)
	}
	return nil
}
