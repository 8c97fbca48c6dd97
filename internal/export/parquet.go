package export

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/iotap/iotap/trace"
)

// Apache Parquet, as DuckDB, Spark, Trino and Athena read it: one column per Column in the
// view's order, then a <name>_raw column per Name column, compressed with zstd, strings
// dictionary-encoded, in row groups of ParquetRowGroupRows rows.
//
// Types: Int is INT64; Bool BOOLEAN; Time TIMESTAMP (UTC, nanoseconds); String STRING
// (UTF-8); Labels MAP<STRING, STRING>; a Nullable column is OPTIONAL, the others REQUIRED.
// Name columns (paths, command names, hosts) hold bytes from the traced system, which
// need not be UTF-8 while a Parquet STRING must be: the STRING column holds the name with
// each byte of invalid UTF-8 replaced by U+FFFD, and <name>_raw (BYTE_ARRAY, OPTIONAL) its
// exact bytes when it is not valid UTF-8 (NULL otherwise), so every name survives exactly:
// coalesce(path_raw, encode(path)) in DuckDB gives the bytes.
//
// The file's key-value metadata holds iotap.schema_version (SchemaVersion) and iotap.view.
// Memory: the writer holds the row group being written (its pages, compressed, and each
// column's dictionary), not the trace.

// ParquetRowGroupRows is the number of rows of a row group: engines read a row group per
// thread, and DuckDB, Spark and Trino read groups of 100,000 to 1,000,000 rows best.
const ParquetRowGroupRows = 1 << 19

// RawSuffix ends the name of the column that holds a Name column's exact bytes.
const RawSuffix = "_raw"

type parquetRows struct {
	w      *parquet.GenericWriter[any]
	cols   []Column
	leaves []int         // leaves[i]: the leaf column index of cols[i] (labels: of its key)
	raw    []int         // raw[i]: the leaf of cols[i]'s _raw column, -1 for none
	rows   []parquet.Row // rows[:n] are written in one call, their slices reused
	n      int
	bad    []bool // bad[i]: the row's name in cols[i] is not UTF-8
	// The labels last seen (a trace's, the same for all its rows) and their keys and values
	// as UTF-8 bytes.
	labels     []trace.Label
	labelBytes [2][][]byte
}

// parquetBatch is the number of rows handed to the writer at once.
const parquetBatch = 512

func newParquet(w io.Writer, t Table) (RowWriter, error) {
	p := &parquetRows{cols: t.Columns, leaves: make([]int, len(t.Columns)), raw: make([]int, len(t.Columns)),
		rows: make([]parquet.Row, parquetBatch), bad: make([]bool, len(t.Columns))}
	var fields, raws []parquet.Field
	leaf := 0
	for i, c := range t.Columns {
		p.leaves[i] = leaf
		node, n := parquetNode(c)
		fields = append(fields, field{node, c.Name})
		leaf += n
		p.raw[i] = -1
		if c.Type == Name {
			raws = append(raws, field{parquet.Optional(parquet.Leaf(parquet.ByteArrayType)), c.Name + RawSuffix})
		}
	}
	for i, c := range t.Columns {
		if c.Type == Name {
			p.raw[i] = leaf
			leaf++
		}
	}
	schema := parquet.NewSchema("iotap_"+t.View, group(append(fields, raws...)))
	p.w = parquet.NewGenericWriter[any](w, schema,
		parquet.Compression(&zstd.Codec{Level: zstd.DefaultLevel}),
		parquet.MaxRowsPerRowGroup(ParquetRowGroupRows),
		parquet.CreatedBy("iotap", "", ""),
		parquet.KeyValueMetadata("iotap.schema_version", strconv.Itoa(SchemaVersion)),
		parquet.KeyValueMetadata("iotap.view", t.View))
	return p, nil
}

// parquetNode returns the node of a column and its number of leaf columns.
func parquetNode(c Column) (parquet.Node, int) {
	var n parquet.Node
	leaves := 1
	switch c.Type {
	case Int:
		n = parquet.Int(64)
	case Bool:
		n = parquet.Leaf(parquet.BooleanType)
	case Time:
		n = parquet.Timestamp(parquet.Nanosecond)
	case Labels:
		n = parquet.Map(parquet.Encoded(parquet.String(), &parquet.RLEDictionary), parquet.Encoded(parquet.String(), &parquet.RLEDictionary))
		leaves = 2
	default:
		n = parquet.Encoded(parquet.String(), &parquet.RLEDictionary)
	}
	if c.Nullable {
		n = parquet.Optional(n)
	}
	return n, leaves
}

func (p *parquetRows) Write(row []Value) error {
	r := p.rows[p.n][:0]
	for i, c := range p.cols {
		v := &row[i]
		p.bad[i] = false
		leaf := p.leaves[i]
		def := 0
		if c.Nullable {
			def = 1
		}
		if v.Null {
			r = append(r, parquet.NullValue().Level(0, 0, leaf))
			continue
		}
		switch c.Type {
		case Int:
			r = append(r, parquet.Int64Value(v.Int).Level(0, def, leaf))
		case Bool:
			r = append(r, parquet.BooleanValue(v.Int != 0).Level(0, def, leaf))
		case Time:
			r = append(r, parquet.Int64Value(v.Int).Level(0, def, leaf))
		case Labels:
			r = p.appendLabels(r, v, leaf, def)
		default:
			s := v.Str
			if c.Type == Name && !utf8.ValidString(s) {
				p.bad[i] = true
				s = strings.ToValidUTF8(s, "\uFFFD") // rare: a new string, kept by the row
			}
			r = append(r, parquet.ByteArrayValue(bytesOf(s)).Level(0, def, leaf))
		}
	}
	for i := range p.cols {
		if p.raw[i] < 0 {
			continue
		}
		if p.bad[i] {
			r = append(r, parquet.ByteArrayValue(bytesOf(row[i].Str)).Level(0, 1, p.raw[i]))
		} else {
			r = append(r, parquet.NullValue().Level(0, 0, p.raw[i]))
		}
	}
	p.rows[p.n] = r
	p.n++
	if p.n == len(p.rows) {
		return p.flush()
	}
	return nil
}

// flush hands the rows batched to the writer.
func (p *parquetRows) flush() error {
	if p.n == 0 {
		return nil
	}
	_, err := p.w.WriteRows(p.rows[:p.n])
	p.n = 0
	return err
}

// appendLabels appends a MAP's two leaves, keys then values (a key given twice keeps its
// first value); an empty map is one null of each.
func (p *parquetRows) appendLabels(r parquet.Row, v *Value, leaf, def int) parquet.Row {
	ls := v.Labels
	if len(ls) != len(p.labels) || (len(ls) > 0 && &ls[0] != &p.labels[0]) {
		p.labels = ls
		p.labelBytes = [2][][]byte{}
		for i, l := range ls {
			if firstKey(ls, i) {
				p.labelBytes[0] = append(p.labelBytes[0], []byte(strings.ToValidUTF8(l.Key, "\uFFFD")))
				p.labelBytes[1] = append(p.labelBytes[1], []byte(strings.ToValidUTF8(l.Value, "\uFFFD")))
			}
		}
	}
	for k := range 2 {
		if len(p.labelBytes[k]) == 0 {
			r = append(r, parquet.NullValue().Level(0, def, leaf+k))
			continue
		}
		for i, b := range p.labelBytes[k] {
			rep := 1
			if i == 0 {
				rep = 0
			}
			r = append(r, parquet.ByteArrayValue(b).Level(rep, def+1, leaf+k))
		}
	}
	return r
}

func (p *parquetRows) Close() error {
	if err := p.flush(); err != nil {
		return err
	}
	return p.w.Close()
}

// bytesOf returns the bytes of s without copying them: the writer copies a value into its
// page before WriteRows returns, and never writes to it.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// group is a parquet group node whose fields keep their order (parquet.Group sorts them by
// name).
type group []parquet.Field

func (g group) ID() int                     { return 0 }
func (g group) String() string              { return fmt.Sprintf("group(%d fields)", len(g)) }
func (g group) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g group) Optional() bool              { return false }
func (g group) Repeated() bool              { return false }
func (g group) Required() bool              { return true }
func (g group) Leaf() bool                  { return false }
func (g group) Fields() []parquet.Field     { return g }
func (g group) Encoding() encoding.Encoding { return nil }
func (g group) Compression() compress.Codec { return nil }
func (g group) GoType() reflect.Type        { return reflect.TypeOf(map[string]any{}) }

// field is a named node of a group.
type field struct {
	parquet.Node
	name string
}

func (f field) Name() string                           { return f.name }
func (f field) Value(base reflect.Value) reflect.Value { return base.MapIndex(reflect.ValueOf(f.name)) }
