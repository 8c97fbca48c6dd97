package export

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/iotap/iotap/trace"
)

// Views: what one exported record stands for.
const (
	ViewRequests  = "requests"  // a FUSE request, as recorded
	ViewSyscalls  = "syscalls"  // a system call of the application, folded as the report folds them
	ViewProcesses = "processes" // a process of the job, with its requests' figures
	ViewFiles     = "files"     // a path the job touched, with its requests' figures
)

// view is a view: its columns, and the function that writes its rows.
type view struct {
	name    string
	about   string
	columns []Column
	spans   bool // the formats of spans (fio, Perfetto) take it
	rows    func(ctx context.Context, r *trace.Reader, n *names, rw RowWriter) error
}

// views are the views, in the order the help lists them.
var views = []view{
	{name: ViewRequests, about: "each FUSE request", columns: columnsOf(requestColumns), spans: true, rows: writeRequests},
	{name: ViewSyscalls, about: "the application's system calls, folded as report folds them", columns: columnsOf(syscallColumns), spans: true, rows: writeSyscalls},
	{name: ViewProcesses, about: "a row per process, its requests' figures", columns: columnsOf(processColumns), rows: writeProcesses},
	{name: ViewFiles, about: "a row per path, its requests' figures, first access and re-access", columns: columnsOf(fileColumns), rows: writeFiles},
}

func viewNamed(name string) (view, bool) {
	for _, v := range views {
		if v.name == name {
			return v, true
		}
	}
	return view{}, false
}

// Views returns the views' names and what each row stands for, in order.
func Views() (names, abouts []string) {
	for _, v := range views {
		names, abouts = append(names, v.name), append(abouts, v.about)
	}
	return names, abouts
}

// Options say what to export and how.
type Options struct {
	Format string // a name of Formats
	View   string // ViewRequests (the default) or ViewSyscalls
	// FioSetup asks the fio format for the script that prepares a directory for its iolog
	// (Result.FioSetup).
	FioSetup bool
}

// Result is what an export has to say besides its output.
type Result struct {
	// Note sums up what the output holds and leaves out, for the user (the fio and
	// Perfetto formats; "" for the others).
	Note string
	// FioSetup is the script that prepares a directory for a fio iolog (Options.FioSetup).
	FioSetup string
}

// RowWriter writes the rows of a view in one format. The formats whose records are a
// view's rows (Format.Rows) return one.
type RowWriter interface {
	// Write writes one row: one Value per column, in the columns' order.
	Write(row []Value) error
	// Close ends the output (a trailer, buffered rows); it does not close the writer the
	// RowWriter writes to.
	Close() error
}

// Table is what a row format writes: a view's name and columns.
type Table struct {
	View    string
	Columns []Column
}

// Format is an export format: either a writer of a view's rows, whose columns are the
// view's (Rows), or one of its own shape that takes the view's requests or calls in start
// order (spans).
type Format struct {
	Name  string
	About string // one line for the command's help
	Rows  func(w io.Writer, t Table) (RowWriter, error)
	spans func(ctx context.Context, r *trace.Reader, w io.Writer, o Options) (Result, error)
}

// Formats are the export formats, in the order the help lists them. A new format is a
// file that implements it and an entry here.
var Formats = []Format{
	{Name: "jsonl", About: "one JSON object per line", Rows: newJSONL},
	{Name: "csv", About: "with a header row", Rows: newCSV},
	{Name: "parquet", About: "Apache Parquet, zstd, for DuckDB, Spark, Trino, Athena", Rows: newParquet},
	{Name: "fio", About: "fio's iolog version 3, for fio --read_iolog", spans: writeFio},
	{Name: "perfetto", About: "Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing", spans: writePerfetto},
}

// FormatNamed returns the format of that name.
func FormatNamed(name string) (Format, bool) {
	for _, f := range Formats {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// FormatNames returns the formats' names: "jsonl, csv, fio or perfetto".
func FormatNames() string {
	var names []string
	for _, f := range Formats {
		names = append(names, f.Name)
	}
	return joinNames(names, "or")
}

// RowFormatNames returns the names of the row formats (Format.Rows), which make datasets
// and summaries, the last joined with conj: "jsonl, csv or parquet".
func RowFormatNames(conj string) string {
	var names []string
	for _, f := range Formats {
		if f.Rows != nil {
			names = append(names, f.Name)
		}
	}
	return joinNames(names, conj)
}

// joinNames joins names with commas, the last with conj.
func joinNames(names []string, conj string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " " + conj + " " + names[len(names)-1]
}

// Columns returns the columns of a view (ViewRequests, ...), nil for another.
func Columns(name string) []Column {
	v, _ := viewNamed(name)
	return v.columns
}

// ColumnNames returns the names of cols.
func ColumnNames(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}

// Check says whether format writes view: an error naming what is wrong, nil when it does.
func Check(format, view string) error {
	f, ok := FormatNamed(format)
	if !ok {
		return fmt.Errorf("--format %q: want %s", format, FormatNames())
	}
	v, ok := viewNamed(view)
	if !ok {
		names, _ := Views()
		return fmt.Errorf("--view %q: want %s", view, strings.Join(names, ", "))
	}
	if f.Rows == nil && !v.spans {
		return fmt.Errorf("--format %s takes the requests or syscalls view, not %s", f.Name, v.name)
	}
	return nil
}

// ReadError is an error reading the trace, as opposed to writing the export. Write returns
// it once the records read before it are written, in an output that is complete as a file
// of its format.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// writeError wraps an error writing the export.
func writeError(err error) error { return fmt.Errorf("write output: %w", err) }

// stopEvery is how many records an export writes between two looks at its context.
const stopEvery = 1 << 16

// Write exports r's requests, calls, processes or files (o.View) to w in o.Format. It stops
// with ctx's error when ctx is done. An error reading r is a *ReadError; one writing w wraps
// w's.
func Write(ctx context.Context, r *trace.Reader, w io.Writer, o Options) (Result, error) {
	if o.View == "" {
		o.View = ViewRequests
	}
	if err := Check(o.Format, o.View); err != nil {
		return Result{}, err
	}
	f, _ := FormatNamed(o.Format)
	v, _ := viewNamed(o.View)
	bw := bufio.NewWriterSize(w, 1<<16)
	var res Result
	var err error
	if f.Rows != nil {
		err = writeRows(ctx, r, bw, f, v)
	} else {
		res, err = f.spans(ctx, r, bw, o)
	}
	if _, isRead := err.(*ReadError); err != nil && !isRead {
		return res, err
	}
	if ferr := bw.Flush(); ferr != nil {
		return res, writeError(ferr)
	}
	return res, err
}

// writeRows writes the view's rows in format f.
func writeRows(ctx context.Context, r *trace.Reader, w io.Writer, f Format, v view) error {
	rw, err := f.Rows(w, Table{View: v.name, Columns: v.columns})
	if err != nil {
		return writeError(err)
	}
	err = v.rows(ctx, r, newNames(r), rw)
	if _, isRead := err.(*ReadError); err != nil && !isRead {
		if a, ok := rw.(interface{ abort() }); ok {
			a.abort() // ends what the writer started (the Parquet writer's goroutine)
		}
		return err
	}
	if cerr := rw.Close(); cerr != nil {
		return writeError(cerr)
	}
	return err
}

func writeRequests(ctx context.Context, r *trace.Reader, n *names, rw RowWriter) error {
	src := &events{r: r}
	rec := request{n: n}
	return copyRows(ctx, rw, requestColumns, func() (*request, error) {
		ev, err := src.Next()
		if err != nil {
			return nil, err
		}
		rec.ev = *ev
		rec.path, rec.path2, rec.proc = r.PathName(ev.Path), n.path(ev.Path2), n.proc(ev.Tid)
		return &rec, nil
	})
}

func writeSyscalls(ctx context.Context, r *trace.Reader, n *names, rw RowWriter) error {
	return copyRows(ctx, rw, syscallColumns, newSyscalls(&events{r: r}, n).Next)
}

// copyRows writes the records next yields, as rows of table, until io.EOF. A record holds
// all its columns' functions read (the names of its paths and process, resolved as it is
// read), so that it can be copied and written later, by another goroutine (copyParquet).
func copyRows[R any](ctx context.Context, rw RowWriter, table []column[R], next func() (*R, error)) error {
	switch w := rw.(type) {
	case *parquetRows:
		return copyParquet(ctx, w, table, next)
	case *jsonl:
		return copyDirect(ctx, table, next, func(x *R, same bool, v []Value) error { return writeRecordJSONL(w, table, x, same, v) })
	}
	row := make([]Value, len(table))
	return copyDirect(ctx, table, next, func(x *R, same bool, _ []Value) error {
		fill(table, x, row, same)
		return rw.Write(row)
	})
}

// copyDirect is copyRows to a writer that takes the table's records without their rows:
// write writes one (same: of the trace of the one before), with v a Value to use.
func copyDirect[R any](ctx context.Context, table []column[R], next func() (*R, error), write func(x *R, same bool, v []Value) error) error {
	v := make([]Value, 1)
	for n := 0; ; n++ {
		if n%stopEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		x, err := next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := write(x, n > 0, v); err != nil {
			return writeError(err)
		}
	}
}
