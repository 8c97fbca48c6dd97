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
// column's dictionary) and parquetBatches batches of parquetBatch rows' values, not the
// trace.
//
// Speed: the values of a batch of rows are made leaf column by leaf column and handed to
// each leaf's ColumnWriter in one call, by a goroutine of the writer's while the caller
// makes the next batch (making values, and encoding and compressing pages, each take about
// half the work: BenchmarkExport). parquet-go's typed writes (GenericWriter[T] of a
// struct) would need a Go type per view, beside the column tables.

// ParquetRowGroupRows is the number of rows of a row group: engines read a row group per
// thread, and DuckDB, Spark and Trino read groups of 100,000 to 1,000,000 rows best.
const ParquetRowGroupRows = 1 << 19

// RawSuffix ends the name of the column that holds a Name column's exact bytes.
const RawSuffix = "_raw"

type parquetRows struct {
	w    *parquet.GenericWriter[any]
	cw   []*parquet.ColumnWriter // the leaf columns' writers
	cols []Column
	// leaves[i]: the leaf column index of cols[i] (labels: of its key); raw[i]: the leaf of
	// cols[i]'s _raw column, -1 for none.
	leaves, raw []int
	def         []byte          // def[i]: the definition level of a value of cols[i]
	pc          []pqCol         // pc[i]: what appendColumn needs of cols[i]
	null        []parquet.Value // null[l]: NULL in leaf l
	// The batch being filled, and its values (cur.vals).
	cur  *pqBatch
	vals [][]parquet.Value
	// Once a first batch is full, a goroutine (write) hands the batches to the column writers
	// while the next rows are made: it takes them from full and gives them back on free;
	// done is closed when it has ended, err then says why (nil: full was closed). While it
	// runs, w, cw and groupRows are its own; the channels order everything else.
	started, ended bool
	full, free     chan *pqBatch
	done           chan struct{}
	err            error
	// The PerTrace columns' values on the last row (haveLast), their leaves' values, and each
	// column's leaves.
	last      []Value
	haveLast  []bool
	traceVals [][]parquet.Value
	leavesOf  [][]int
	groupRows int // rows in the row group being written (write's)
	// The labels last seen (a trace's, the same for all its rows), and the values they are
	// in the key and value leaves.
	labels      []trace.Label
	labelValues [2][]parquet.Value
}

// pqCol is a column as appendColumn writes it.
type pqCol struct {
	typ       Type
	perTrace  bool
	def       uint8 // the definition level of a value
	leaf, raw int32 // its leaf column, and that of its _raw column (-1: none)
}

// pqBatch is rows batched: each leaf's values.
type pqBatch struct {
	vals [][]parquet.Value
	n    int // rows
}

// parquetBatch is the number of rows batched before each leaf's values are handed to its
// column writer: a writer ends a page only between two batches, so a batch is small next to
// a page. It divides ParquetRowGroupRows. parquetBatches batches are in use at most: the one
// being filled, and those the writing goroutine has not written yet.
const (
	parquetBatch   = 64
	parquetBatches = 4
)

func newPQBatch(leaves int) *pqBatch {
	b := &pqBatch{vals: make([][]parquet.Value, leaves)}
	for l := range b.vals {
		b.vals[l] = make([]parquet.Value, 0, parquetBatch)
	}
	return b
}

func newParquet(w io.Writer, t Table) (RowWriter, error) {
	p := &parquetRows{cols: t.Columns, leaves: make([]int, len(t.Columns)), raw: make([]int, len(t.Columns)), def: make([]byte, len(t.Columns))}
	var fields, raws []parquet.Field
	leaf := 0
	for i, c := range t.Columns {
		p.leaves[i] = leaf
		node, n := parquetNode(c)
		fields = append(fields, field{node, c.Name})
		leaf += n
		p.raw[i] = -1
		if c.Nullable {
			p.def[i] = 1
		}
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
	p.cw = p.w.ColumnWriters()
	if len(p.cw) != leaf {
		return nil, fmt.Errorf("parquet: %d leaf columns, want %d", len(p.cw), leaf)
	}
	p.cur = newPQBatch(leaf)
	p.vals, p.null, p.traceVals = p.cur.vals, make([]parquet.Value, leaf), make([][]parquet.Value, leaf)
	for l := range p.null {
		p.null[l] = parquet.NullValue().Level(0, 0, l)
	}
	for i, c := range t.Columns {
		p.pc = append(p.pc, pqCol{typ: c.Type, perTrace: c.PerTrace, def: p.def[i], leaf: int32(p.leaves[i]), raw: int32(p.raw[i])})
	}
	p.last, p.haveLast, p.leavesOf = make([]Value, len(t.Columns)), make([]bool, len(t.Columns)), make([][]int, len(t.Columns))
	for i, c := range t.Columns {
		p.leavesOf[i] = []int{p.leaves[i]}
		if c.Type == Labels {
			p.leavesOf[i] = append(p.leavesOf[i], p.leaves[i]+1)
		}
		if p.raw[i] >= 0 {
			p.leavesOf[i] = append(p.leavesOf[i], p.raw[i])
		}
	}
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

// Write adds the row's values to their leaves' batches, and hands the batches to the column
// writers once parquetBatch rows are in: the column writers take a leaf's values at a time
// (a row would be split into its leaves by the writer, value by value). The values of the
// PerTrace columns are made once per trace.
func (p *parquetRows) Write(row []Value) error {
	for i := range p.pc {
		if p.pc[i].perTrace {
			p.appendPerTrace(i, &row[i])
		} else {
			p.appendColumn(i, &row[i])
		}
	}
	p.cur.n++
	if p.cur.n == parquetBatch {
		return p.send()
	}
	return nil
}

// writeRecord writes record r of table as Write writes its row, without the row: each
// column's value goes from its function to its leaves. With same, r is of the trace of the
// record before, and the PerTrace columns repeat their values; v is one Value to use.
func writeRecord[R any](p *parquetRows, table []column[R], r *R, same bool, v []Value) error {
	for i := range table {
		c, pc := &table[i], &p.pc[i]
		leaf := int(pc.leaf)
		switch {
		case pc.perTrace && same && p.haveLast[i]:
			for _, l := range p.leavesOf[i] {
				p.vals[l] = append(p.vals[l], p.traceVals[l]...)
			}
		case pc.perTrace:
			fill(table[i:i+1], r, v, false)
			p.appendPerTrace(i, &v[0])
		case c.num != nil:
			n := c.num(r)
			switch {
			case c.zeroNull && n == 0:
				p.vals[leaf] = append(p.vals[leaf], p.null[leaf])
			case pc.typ == Bool:
				p.put(leaf, parquet.BooleanValue(n != 0), pc.def)
			default:
				p.put(leaf, parquet.Int64Value(n), pc.def)
			}
		case c.opt != nil:
			if n, ok := c.opt(r); ok {
				p.put(leaf, parquet.Int64Value(n), pc.def)
			} else {
				p.vals[leaf] = append(p.vals[leaf], p.null[leaf])
			}
		case c.str != nil && pc.typ == String:
			if s := c.str(r); s == "" && c.Nullable {
				p.vals[leaf] = append(p.vals[leaf], p.null[leaf])
			} else {
				p.put(leaf, parquet.ByteArrayValue(bytesOf(s)), pc.def)
			}
		default:
			fill(table[i:i+1], r, v, false)
			p.appendColumn(i, &v[0])
		}
	}
	p.cur.n++
	if p.cur.n == parquetBatch {
		return p.send()
	}
	return nil
}

// send hands the batch filled to the writing goroutine (started by the first call) and
// takes an empty one.
func (p *parquetRows) send() error {
	if !p.started {
		p.started = true
		p.full, p.free, p.done = make(chan *pqBatch, parquetBatches), make(chan *pqBatch, parquetBatches), make(chan struct{})
		for range parquetBatches - 1 {
			p.free <- newPQBatch(len(p.cw))
		}
		go p.write()
	}
	select {
	case p.full <- p.cur:
	case <-p.done:
		return p.err
	}
	select {
	case p.cur = <-p.free:
	case <-p.done:
		return p.err
	}
	p.vals = p.cur.vals
	return nil
}

// write writes the batches of full until it is closed, or one fails.
func (p *parquetRows) write() {
	defer close(p.done)
	for b := range p.full {
		if err := p.writeBatch(b); err != nil {
			p.err = err
			return
		}
		p.free <- b
	}
}

// appendColumn appends column i's values for v to its leaves.
func (p *parquetRows) appendColumn(i int, v *Value) {
	c := &p.pc[i]
	leaf := int(c.leaf)
	if v.Null {
		p.vals[leaf] = append(p.vals[leaf], p.null[leaf])
		if c.raw >= 0 {
			p.vals[c.raw] = append(p.vals[c.raw], p.null[c.raw])
		}
		return
	}
	switch c.typ {
	case Int, Time:
		p.put(leaf, parquet.Int64Value(v.Int), c.def)
	case Bool:
		p.put(leaf, parquet.BooleanValue(v.Int != 0), c.def)
	case Labels:
		p.appendLabels(v.Labels, leaf, int(c.def))
	case Name:
		s := v.Str
		if utf8.ValidString(s) {
			p.vals[c.raw] = append(p.vals[c.raw], p.null[c.raw])
		} else {
			p.put(int(c.raw), parquet.ByteArrayValue(bytesOf(s)), 1)
			s = strings.ToValidUTF8(s, "\uFFFD") // rare: a new string, kept by the value
		}
		p.put(leaf, parquet.ByteArrayValue(bytesOf(s)), c.def)
	default:
		p.put(leaf, parquet.ByteArrayValue(bytesOf(v.Str)), c.def)
	}
}

// put appends v at definition level def to leaf's values. A value handed to a ColumnWriter
// needs no column index, nor a repetition level outside a MAP.
func (p *parquetRows) put(leaf int, v parquet.Value, def uint8) {
	vals := append(p.vals[leaf], v)
	vals[len(vals)-1].SetDefinitionLevel(int(def))
	p.vals[leaf] = vals
}

// appendPerTrace appends PerTrace column i's values for v: those of the last row when v is
// its value, else made by appendColumn and kept for the next rows.
func (p *parquetRows) appendPerTrace(i int, v *Value) {
	leaves := p.leavesOf[i]
	last := &p.last[i]
	if p.haveLast[i] && last.Int == v.Int && last.Null == v.Null && last.Str == v.Str && sameLabels(last.Labels, v.Labels) {
		for _, l := range leaves {
			p.vals[l] = append(p.vals[l], p.traceVals[l]...)
		}
		return
	}
	p.haveLast[i], *last = true, *v
	var n [2]int // a column has one leaf and its _raw, or a MAP's two
	for k, l := range leaves {
		n[k] = len(p.vals[l])
	}
	p.appendColumn(i, v)
	for k, l := range leaves {
		p.traceVals[l] = append(p.traceVals[l][:0], p.vals[l][n[k]:]...)
	}
}

// writeBatch hands the rows of b to the column writers, empties b, and ends the row group
// when it has ParquetRowGroupRows rows.
func (p *parquetRows) writeBatch(b *pqBatch) error {
	if b.n == 0 {
		return nil
	}
	for leaf, vals := range b.vals {
		if _, err := p.cw[leaf].WriteRowValues(vals); err != nil {
			return err
		}
		clear(vals) // the values point into the rows' strings
		b.vals[leaf] = vals[:0]
	}
	p.groupRows += b.n
	b.n = 0
	if p.groupRows == ParquetRowGroupRows {
		p.groupRows = 0
		return p.w.Flush()
	}
	return nil
}

// appendLabels appends a MAP's two leaves, keys then values (a key given twice keeps its
// first value); an empty map is one null of each.
func (p *parquetRows) appendLabels(ls []trace.Label, leaf, def int) {
	if !sameLabels(ls, p.labels) || p.labelValues[0] == nil {
		p.labels = ls
		p.labelValues = [2][]parquet.Value{}
		for i, l := range ls {
			if firstKey(ls, i) {
				rep := min(len(p.labelValues[0]), 1)
				for k, s := range []string{l.Key, l.Value} {
					b := []byte(strings.ToValidUTF8(s, "\uFFFD"))
					p.labelValues[k] = append(p.labelValues[k], parquet.ByteArrayValue(b).Level(rep, def+1, leaf+k))
				}
			}
		}
		for k := range 2 {
			if len(p.labelValues[k]) == 0 {
				p.labelValues[k] = []parquet.Value{parquet.NullValue().Level(0, def, leaf+k)}
			}
		}
	}
	for k := range 2 {
		p.vals[leaf+k] = append(p.vals[leaf+k], p.labelValues[k]...)
	}
}

// Close writes the rows batched and the file's footer.
func (p *parquetRows) Close() error {
	if err := p.stop(); err != nil {
		return err
	}
	if err := p.writeBatch(p.cur); err != nil {
		return err
	}
	return p.w.Close()
}

// stop ends the writing goroutine once it has written the batches sent, and returns its
// error. An export that fails before its Close calls it (abort), so that the goroutine ends.
func (p *parquetRows) stop() error {
	if !p.started || p.ended {
		return p.err
	}
	p.ended = true
	close(p.full)
	<-p.done
	return p.err
}

func (p *parquetRows) abort() { _ = p.stop() }

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
