package export

import (
	"cmp"
	"context"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// The processes and files views are tables of the trace's aggregates: a row per process and
// per path, from the figures the report shows (package trace/stats), written once the
// whole trace is read.

// process is one record of the processes view.
type process struct {
	p  *stats.ProcStats
	pr trace.Process // the process's record (its main thread's, else the first thread seen)
	n  *names
}

// processColumns are the columns of the processes view, in order (schema SchemaVersion).
var processColumns = append([]column[process]{
	intCol("pid", "the process id (thread group id)", func(p *process) int64 { return int64(p.p.Pid) }),
	nonZero("ppid", "its parent's process id (NULL: unknown)", func(p *process) int64 { return int64(p.pr.PPid) }),
	optName("comm", "its command name", func(p *process) string { return p.p.Comm }),
	optName("exe", "its executable", func(p *process) string { return p.p.Exe }),
	optName("cmdline", "its command line, the arguments joined by spaces (as far as the trace keeps it; NULL: unknown)",
		func(p *process) string { return strings.Join(p.p.Cmdline, " ") }),
	optInt("first_seen_ns", "when the trace first saw it, ns since the trace's start (NULL: unknown)",
		func(p *process) (int64, bool) { return p.pr.FirstSeen, p.pr.Tid != 0 }),
	intCol("requests", "its requests", func(p *process) int64 { return int64(p.p.Ops) }),
	intCol("errors", "its requests that failed", func(p *process) int64 { return int64(p.p.Errors) }),
	intCol("dur_ns", "its requests' time, ns", func(p *process) int64 { return p.p.TotalNs }),
	intCol("meta_ns", "of which in metadata requests", func(p *process) int64 { return p.p.ClassNs[trace.ClassMeta] }),
	intCol("data_ns", "of which in data requests", func(p *process) int64 { return p.p.ClassNs[trace.ClassData] }),
	intCol("read_bytes", "bytes it read (and copied with copy_file_range)", func(p *process) int64 { return int64(p.p.ReadBytes) }),
	intCol("write_bytes", "bytes it wrote (and copied with copy_file_range)", func(p *process) int64 { return int64(p.p.WriteBytes) }),
}, identityColumns(func(p *process) *identity { return p.n.id })...)

// file is one record of the files view.
type file struct {
	f *stats.FileStats
	n *names
}

// fileColumns are the columns of the files view, in order (schema SchemaVersion).
var fileColumns = append([]column[file]{
	nameCol("path", `the path, relative to the traced directory ("" = the directory itself)`, func(f *file) string { return f.f.Path }),
	boolCol("is_dir", "a directory", func(f *file) bool { return f.f.IsDir }),
	intCol("requests", "requests on the path", func(f *file) int64 { return int64(f.f.Ops) }),
	intCol("errors", "of which failed", func(f *file) int64 { return int64(f.f.Errors) }),
	intCol("dur_ns", "their time, ns", func(f *file) int64 { return f.f.TotalNs }),
	intCol("meta_ns", "of which in metadata requests", func(f *file) int64 { return f.f.ClassNs[trace.ClassMeta] }),
	intCol("data_ns", "of which in data requests", func(f *file) int64 { return f.f.ClassNs[trace.ClassData] }),
	intCol("opens", "successful opens and creates", func(f *file) int64 { return int64(f.f.Opens) }),
	intCol("unused_opens", "handles released without a read, write or copy", func(f *file) int64 { return int64(f.f.UnusedOpen) }),
	intCol("reads", "read requests", func(f *file) int64 { return int64(f.f.ReadOps) }),
	intCol("read_bytes", "bytes read (and copied from it)", func(f *file) int64 { return int64(f.f.ReadBytes) }),
	intCol("read_ns", "time in reads, ns", func(f *file) int64 { return f.f.ReadNs }),
	intCol("writes", "write requests", func(f *file) int64 { return int64(f.f.WriteOps) }),
	intCol("write_bytes", "bytes written (and copied to it)", func(f *file) int64 { return int64(f.f.WriteBytes) }),
	intCol("write_ns", "time in writes, ns", func(f *file) int64 { return f.f.WriteNs }),
	intCol("first_reads", "first access: reads that returned bytes never read before from the file", func(f *file) int64 { return int64(f.f.FirstReads) }),
	intCol("first_read_bytes", "the bytes they returned", func(f *file) int64 { return int64(f.f.FirstReadBytes) }),
	intCol("first_read_ns", "their time, ns", func(f *file) int64 { return f.f.FirstReadNs }),
	intCol("rereads", "re-access: reads that returned only bytes read before", func(f *file) int64 { return int64(f.f.Rereads) }),
	intCol("reread_bytes", "the bytes they returned", func(f *file) int64 { return int64(f.f.RereadOnlyBytes) }),
	intCol("reread_ns", "their time, ns", func(f *file) int64 { return f.f.RereadNs }),
	optInt("first_byte_ns", "time to first byte: the latency of the file's first read that returned data (NULL: none)",
		func(f *file) (int64, bool) { return f.f.FirstByteNs, f.f.FirstByte }),
	intCol("size_bytes", "the largest size it was seen to have (attributes, or the end of its furthest read or write)",
		func(f *file) int64 { return f.f.Size() }),
}, identityColumns(func(f *file) *identity { return f.n.id })...)

// aggregate reads the whole trace into its statistics.
func aggregate(ctx context.Context, r *trace.Reader) (*stats.Stats, error) {
	acc := stats.NewAccumulator("", r.Header(), stats.Options{})
	src := &events{r: r}
	for n := 0; ; n++ {
		if n%stopEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		ev, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return acc.Finish(r, nil, nil), err
		}
		acc.Add(ev)
	}
	return acc.Finish(r, nil, nil), nil
}

// writeProcesses writes a row per process, by pid.
func writeProcesses(ctx context.Context, r *trace.Reader, n *names, rw RowWriter) error {
	return writeAggregate(ctx, r, rw, processColumns, func(st *stats.Stats) []process {
		keys := slices.SortedFunc(maps.Keys(st.Procs), func(a, b stats.ProcKey) int {
			return cmp.Or(cmp.Compare(a.Pid, b.Pid), strings.Compare(a.Comm, b.Comm))
		})
		out := make([]process, len(keys))
		for i, k := range keys {
			out[i] = process{p: st.Procs[k], n: n}
			out[i].pr, _ = r.Process(k.Pid) // the zero record when there is none
		}
		return out
	})
}

// writeFiles writes a row per path, by path.
func writeFiles(ctx context.Context, r *trace.Reader, n *names, rw RowWriter) error {
	return writeAggregate(ctx, r, rw, fileColumns, func(st *stats.Stats) []file {
		keys := slices.Sorted(maps.Keys(st.Files))
		out := make([]file, len(keys))
		for i, k := range keys {
			out[i] = file{f: st.Files[k], n: n}
		}
		return out
	})
}

// writeAggregate reads the whole trace into its statistics and writes the records rows
// makes of them; an error reading the trace comes after the rows of what was read.
func writeAggregate[R any](ctx context.Context, r *trace.Reader, rw RowWriter, table []column[R], rows func(*stats.Stats) []R) error {
	st, readErr := aggregate(ctx, r)
	if st == nil {
		return readErr
	}
	recs := rows(st)
	i := 0
	err := copyRows(ctx, rw, table, func() (*R, error) {
		if i == len(recs) {
			return nil, io.EOF
		}
		i++
		return &recs[i-1], nil
	})
	if err != nil {
		return err
	}
	return readErr
}
