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
	leaves []int // leaves[i]: the leaf column index of cols[i] (labels: of its key)
	raw    []int // raw[i]: the leaf of cols[i]'s _raw column, -1 for none
	row    parquet.Row
	rows   []parquet.Row
	bufs   [][]byte // the replacement text of names that are not UTF-8, per column
}

func newParquet(w io.Writer, t Table) (RowWriter, error) {
	p := &parquetRows{cols: t.Columns, leaves: make([]int, len(t.Columns)), raw: make([]int, len(t.Columns)),
		bufs: make([][]byte, len(t.Columns))}
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
	p.rows = make([]parquet.Row, 1)
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
	r := p.row[:0]
	for i, c := range p.cols {
		v := &row[i]
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
				p.bufs[i] = append(p.bufs[i][:0], strings.ToValidUTF8(s, "\uFFFD")...)
				r = append(r, parquet.ByteArrayValue(p.bufs[i]).Level(0, def, leaf))
				continue
			}
			r = append(r, parquet.ByteArrayValue(bytesOf(s)).Level(0, def, leaf))
		}
	}
	for i, c := range p.cols {
		if p.raw[i] < 0 {
			continue
		}
		if s := row[i].Str; c.Type == Name && !row[i].Null && !utf8.ValidString(s) {
			r = append(r, parquet.ByteArrayValue(bytesOf(s)).Level(0, 1, p.raw[i]))
		} else {
			r = append(r, parquet.NullValue().Level(0, 0, p.raw[i]))
		}
	}
	p.row = r
	p.rows[0] = r
	_, err := p.w.WriteRows(p.rows)
	return err
}

// appendLabels appends a MAP's two leaves, keys then values; an empty map is one null of
// each.
func (p *parquetRows) appendLabels(r parquet.Row, v *Value, leaf, def int) parquet.Row {
	ls := v.Labels
	for k := range 2 {
		rep := 0
		for i, l := range ls {
			if !firstKey(ls, i) {
				continue
			}
			s := l.Key
			if k == 1 {
				s = l.Value
			}
			r = append(r, parquet.ByteArrayValue([]byte(strings.ToValidUTF8(s, "\uFFFD"))).Level(rep, def+1, leaf+k))
			rep = 1
		}
		if rep == 0 {
			r = append(r, parquet.NullValue().Level(0, def, leaf+k))
		}
	}
	return r
}

func (p *parquetRows) Close() error { return p.w.Close() }

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
