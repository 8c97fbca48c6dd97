package export

import (
	"strconv"

	"github.com/iotap/iotap/trace"
)

// SchemaVersion is the version of the views' columns: their names, types and meanings.
// It changes when a column is renamed, removed, retyped or means something else; a column
// added at the end of a view keeps it. Parquet files carry it in their key-value metadata
// (iotap.schema_version).
const SchemaVersion = 1

// Type is the type of a column's values.
type Type uint8

// Column types.
const (
	Int    Type = iota // a signed 64-bit integer
	String             // text (UTF-8)
	Name               // bytes from the traced system (a path, a command name): not necessarily UTF-8
	Bool               // true or false
	Time               // an absolute time: Value.Int holds ns since the Unix epoch, UTC
	Labels             // key=value pairs: Value.Labels
)

// Column is one column of a view: its name and type, whether a row may have no value in
// it (NULL: unknown, or not applicable to the record), and what it holds.
type Column struct {
	Name     string
	Type     Type
	Nullable bool
	Doc      string
	// PerTrace: the value is the trace's (an identity column), the same on every row of it.
	PerTrace bool
}

// Value is one cell of a row.
type Value struct {
	Int    int64  // Int, Time (ns since the Unix epoch), Bool (0 or 1)
	Str    string // String, Name
	Null   bool   // no value (a Nullable column only)
	Labels []trace.Label
}

// Text returns v as text: a number in decimal, a time in RFC 3339 with nanoseconds (UTC),
// a string as it is, labels as a JSON object, and NULL as "".
func (v Value) Text(t Type) string {
	if v.Null {
		return ""
	}
	switch t {
	case Int:
		return strconv.FormatInt(v.Int, 10)
	case Bool:
		return strconv.FormatBool(v.Int != 0)
	case Time:
		return string(appendTime(nil, v.Int))
	case Labels:
		return string(appendLabels(nil, v.Labels))
	}
	return v.Str
}

// column is a column of the view whose records are R, with the function that gives its
// value for a record: one of num, opt, str and get, by what the column holds (fill calls it).
type column[R any] struct {
	Column
	num func(r *R) int64         // Int, Time, Bool (0 or 1); NULL when it gives 0 and zeroNull
	opt func(r *R) (int64, bool) // Int, Time: the value, and whether there is one
	str func(r *R) string        // String, Name; NULL when it gives "" and the column is Nullable
	get func(r *R) Value         // any other (Labels)
	// zeroNull: num's 0 is NULL.
	zeroNull bool
}

func intCol[R any](name, doc string, get func(r *R) int64) column[R] {
	return column[R]{Column: Column{Name: name, Type: Int, Doc: doc}, num: get}
}

// optInt is a nullable integer column: get's second result says whether there is a value.
func optInt[R any](name, doc string, get func(r *R) (int64, bool)) column[R] {
	return column[R]{Column: Column{Name: name, Type: Int, Nullable: true, Doc: doc}, opt: get}
}

// nonZero is a nullable integer column whose zero means "none" or "not measured".
func nonZero[R any](name, doc string, get func(r *R) int64) column[R] {
	return column[R]{Column: Column{Name: name, Type: Int, Nullable: true, Doc: doc}, num: get, zeroNull: true}
}

func strCol[R any](name, doc string, get func(r *R) string) column[R] {
	return column[R]{Column: Column{Name: name, Type: String, Doc: doc}, str: get}
}

func nameCol[R any](name, doc string, get func(r *R) string) column[R] {
	return column[R]{Column: Column{Name: name, Type: Name, Doc: doc}, str: get}
}

// optName is a nullable name column whose "" means "none" or "unknown".
func optName[R any](name, doc string, get func(r *R) string) column[R] {
	c := optStr(name, doc, get)
	c.Type = Name
	return c
}

// optStr is a nullable string column whose "" means "none" or "unknown".
func optStr[R any](name, doc string, get func(r *R) string) column[R] {
	return column[R]{Column: Column{Name: name, Type: String, Nullable: true, Doc: doc}, str: get}
}

func boolCol[R any](name, doc string, get func(r *R) bool) column[R] {
	return column[R]{Column: Column{Name: name, Type: Bool, Doc: doc}, num: func(r *R) int64 {
		if get(r) {
			return 1
		}
		return 0
	}}
}

// optTime is a nullable time column: get's second result says whether there is a value.
func optTime[R any](name, doc string, get func(r *R) (int64, bool)) column[R] {
	c := optInt(name, doc, get)
	c.Type = Time
	return c
}

func timeCol[R any](name, doc string, get func(r *R) int64) column[R] {
	return column[R]{Column: Column{Name: name, Type: Time, Doc: doc}, num: get}
}

// identityColumns are the columns every view ends with: which trace a row comes from, so
// that the exports of many traces query as one table. of gives a record's trace.
func identityColumns[R any](of func(r *R) *identity) []column[R] {
	cols := []column[R]{
		strCol("trace_id", "the trace's identity: 16 hex digits of a hash of its header (host, start, kind), the same for every export of the trace",
			func(r *R) string { return of(r).traceID }),
		strCol("trace_kind", `"record" (recorded through the FUSE layer) or "replay"`, func(r *R) string { return of(r).kind }),
		timeCol("trace_start_time", "when the trace started (its origin: start_ns 0)", func(r *R) int64 { return of(r).start }),
		nameCol("host", "the host the trace was made on", func(r *R) string { return of(r).host }),
		optStr("job", "the Slurm job id (label SLURM_JOB_ID), NULL outside Slurm", func(r *R) string { return of(r).job }),
		optStr("step", "the Slurm step id (label SLURM_STEP_ID), NULL outside Slurm", func(r *R) string { return of(r).step }),
		nameCol("target", "the traced directory: the absolute path the job used", func(r *R) string { return of(r).target.Path }),
		strCol("target_fs_type", `its file system's type ("ext4", "fuse.s3fs", "nfs4", "lustre"; "s3" for a replay on S3)`,
			func(r *R) string { return of(r).target.FSType }),
		nameCol("target_source", `its mount's source: the device, or the storage client's name ("s3fs", a bucket)`,
			func(r *R) string { return of(r).target.Source }),
		strCol("iotap_version", "the iotap version that wrote the trace", func(r *R) string { return of(r).version }),
		{Column: Column{Name: "labels", Type: Labels, Doc: "the trace's labels (--label key=value, Slurm's placement), a map from key to value"},
			get: func(r *R) Value { return Value{Labels: of(r).labels} }},
	}
	for i := range cols {
		cols[i].PerTrace = true
	}
	return cols
}

// columnsOf returns the columns of a table.
func columnsOf[R any](table []column[R]) []Column {
	out := make([]Column, len(table))
	for i, c := range table {
		out[i] = c.Column
	}
	return out
}

// fill sets row (one Value per column of table) to record r's values; with same, r is of
// the trace of the record row holds, and the columns whose value is the trace's keep it.
// A column's Value keeps the fields other columns' types use unset.
func fill[R any](table []column[R], r *R, row []Value, same bool) {
	for i := range table {
		c, v := &table[i], &row[i]
		if same && c.PerTrace {
			continue
		}
		switch {
		case c.num != nil:
			v.Int = c.num(r)
			v.Null = c.zeroNull && v.Int == 0
		case c.opt != nil:
			var ok bool
			v.Int, ok = c.opt(r)
			v.Null = !ok
		case c.str != nil:
			v.Str = c.str(r)
			v.Null = c.Nullable && v.Str == ""
		default:
			*v = c.get(r)
		}
	}
}
