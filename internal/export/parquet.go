package export

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// dictionary-encoded, numbers and times DELTA_BINARY_PACKED (a trace's times, offsets and
// ids differ little from row to row, and most of its numbers are the same on every row:
// delta-packed they are a fifth of their plain size before zstd, which then has a fifth of
// the bytes to compress), in row groups of ParquetRowGroupRows rows.
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
// column's dictionary) and parquetBatches batches of parquetBatch records, not the trace.
//
// Speed: the caller only reads the trace and copies each record, with the names it needs
// resolved, into a batch (copyParquet); encoders, one goroutine per CPU, make each column's
// values for a batch's rows and hand them to the column's ColumnWriter in one call, which
// encodes and compresses its pages. The columns of a batch are shared out one at a time, so
// the encoders keep every CPU busy whatever the columns cost; each column is written in the
// batches' order, so the bytes do not depend on which goroutine writes it
// (TestParquetSameWithEncoders). A PerTrace column's values are made once per batch.

// ParquetRowGroupRows is the number of rows of a row group: engines read a row group per
// thread, and DuckDB, Spark and Trino read groups of 100,000 to 1,000,000 rows best.
const ParquetRowGroupRows = 1 << 19

// parquetGroupRows is the number of rows of a row group the writers make: a variable for
// the tests (a multiple of parquetBatch).
var parquetGroupRows = ParquetRowGroupRows

// parquetCodec compresses every file's pages: its encoders (each a megabyte and more of
// tables) are kept in its pool and serve the next file of a dataset. zstd's fastest level
// (level 1, Arrow's default): on delta-packed numbers its default level makes files 1–2 %
// smaller for a twentieth more of the export's time.
var parquetCodec = &zstd.Codec{Level: zstd.SpeedFastest}

// RawSuffix ends the name of the column that holds a Name column's exact bytes.
const RawSuffix = "_raw"

type parquetRows struct {
	w    *parquet.GenericWriter[any]
	cw   []*parquet.ColumnWriter // the leaf columns' writers
	cols []Column
	// leaves[i]: the leaf column index of cols[i] (labels: of its key); raw[i]: the leaf of
	// cols[i]'s _raw column, -1 for none.
	leaves, raw []int
	pc          []pqCol         // pc[i]: what an encoder needs of cols[i]
	null        []parquet.Value // null[l]: NULL in leaf l
	leavesOf    [][]int         // leavesOf[i]: cols[i]'s leaves
	// newRows makes the rows of a batch: of Write's rows, or of a view's records
	// (copyParquet). cur is the batch being filled.
	newRows func() pqRows
	cur     *pqBatch
	// Once a first batch is full, encoders (encode) turn the batches' rows into each leaf's
	// values and hand them to its column writer while the next rows are made. A batch goes
	// to every encoder (full[k]); each takes the batch's columns one at a time, in the order
	// of order (the heaviest first), until none is left, and writes a column once the
	// column of the batch before is written (written[i] counts the batches whose column i
	// is): a column writer is used by one goroutine at a time, in the batches' order, and its
	// pages come out the same whichever goroutine writes them. The last encoder done with a
	// batch gives it back on free. A row group ends (w.Flush) once every batch is back. fail
	// is closed at the first error (err); done once every encoder has ended. While they run,
	// cw and the PerTrace columns' state are theirs; the channels and written order
	// everything else.
	started, ended bool
	order          []int
	written        []atomic.Int64
	// An encoder waiting for a column of the batch before waits on turn (under turnMu),
	// counted in waiting.
	turnMu       sync.Mutex
	turn         *sync.Cond
	waiting      atomic.Int32
	sent         int64 // batches sent
	full         []chan *pqBatch
	free         chan *pqBatch
	made         int // batches made
	fail, done   chan struct{}
	errOnce      sync.Once
	err          error
	groupRows    int // rows of the row group being written, in the batches sent
	maxGroupRows int // rows of a row group
	// A PerTrace column's value on the last row (haveLast) and its leaves' values for it, by
	// column: its encoder's.
	last      []Value
	haveLast  []bool
	traceVals [][]parquet.Value
	traceRun  [][]parquet.Value // by leaf: traceVals[leaf] parquetBatch times, once made
}

// pqCol is a column as an encoder writes it.
type pqCol struct {
	typ       Type
	perTrace  bool
	def       uint8 // the definition level of a value
	leaf, raw int32 // its leaf column, and that of its _raw column (-1: none)
}

// pqBatch is a batch of rows.
type pqBatch struct {
	rows    pqRows
	n       int          // rows
	seq     int64        // batches sent before it
	next    atomic.Int32 // the next column to take (an index of order)
	pending atomic.Int32 // encoders not yet done with it
}

// pqRows are the rows of a batch, kept as they came (a copy of each row or record) until
// the encoders make their columns' values.
type pqRows interface {
	// appendColumn appends column i's values on the batch's rows to e's leaves.
	appendColumn(e *pqEncoder, i int)
	// reset empties the rows.
	reset()
}

// parquetBatch is the number of rows batched before each leaf's values are handed to its
// column writer: a writer ends a page only between two batches, so a batch is small next to
// a page. It divides ParquetRowGroupRows. parquetBatches batches are in use at most: the one
// being filled, and those the encoders have not written yet.
const (
	parquetBatch   = 256
	parquetBatches = 8
)

func newParquet(w io.Writer, t Table) (RowWriter, error) {
	p := &parquetRows{cols: t.Columns, leaves: make([]int, len(t.Columns)), raw: make([]int, len(t.Columns)), maxGroupRows: parquetGroupRows}
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
	opts := []parquet.WriterOption{
		schema,
		parquet.Compression(parquetCodec),
		parquet.MaxRowsPerRowGroup(int64(parquetGroupRows)),
		parquet.CreatedBy("iotap", "", ""),
		parquet.KeyValueMetadata("iotap.schema_version", strconv.Itoa(SchemaVersion)),
		parquet.KeyValueMetadata("iotap.view", t.View),
	}
	for _, c := range t.Columns {
		if c.PerTrace && c.Type != Int && c.Type != Time && c.Type != Bool {
			// The same string on every row: its bounds (two comparisons of the whole string
			// per row) say what the dictionary of one entry says.
			for _, path := range perTracePaths(c) {
				opts = append(opts, parquet.SkipPageBounds(path...), parquet.SkipPageStatistics(path...))
			}
		}
	}
	p.w = parquet.NewGenericWriter[any](w, opts...)
	p.cw = p.w.ColumnWriters()
	if len(p.cw) != leaf {
		return nil, fmt.Errorf("parquet: %d leaf columns, want %d", len(p.cw), leaf)
	}
	p.null, p.traceVals, p.traceRun = make([]parquet.Value, leaf), make([][]parquet.Value, leaf), make([][]parquet.Value, leaf)
	for l := range p.null {
		p.null[l] = parquet.NullValue().Level(0, 0, l)
	}
	p.last, p.haveLast, p.leavesOf = make([]Value, len(t.Columns)), make([]bool, len(t.Columns)), make([][]int, len(t.Columns))
	for i, c := range t.Columns {
		var def uint8
		if c.Nullable {
			def = 1
		}
		p.pc = append(p.pc, pqCol{typ: c.Type, perTrace: c.PerTrace, def: def, leaf: int32(p.leaves[i]), raw: int32(p.raw[i])})
		p.leavesOf[i] = []int{p.leaves[i]}
		if c.Type == Labels {
			p.leavesOf[i] = append(p.leavesOf[i], p.leaves[i]+1)
		}
		if p.raw[i] >= 0 {
			p.leavesOf[i] = append(p.leavesOf[i], p.raw[i])
		}
	}
	p.order, p.written = heaviestFirst(t.Columns), make([]atomic.Int64, len(t.Columns))
	p.newRows = func() pqRows { return &pqValueRows{} }
	return p, nil
}

// parquetEncoders is the number of goroutines that encode a file's columns: one per CPU,
// up to 3 (beyond, the rows are not made faster than they encode). A variable for the
// tests: the bytes written do not depend on it.
var parquetEncoders = func() int { return min(runtime.GOMAXPROCS(0), 3) }

// heaviestFirst returns the columns' indexes, the columns with the most work first (a
// labels map, a name and its _raw column, a string and its dictionary, a number, a
// boolean), so that the encoders end a batch at about the same time.
func heaviestFirst(cols []Column) []int {
	weight := func(c Column) int {
		switch c.Type {
		case Labels:
			return 6
		case Name:
			return 4
		case String:
			return 3
		case Bool:
			return 1
		}
		return 2
	}
	order := make([]int, len(cols))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(weight(cols[b]), weight(cols[a])) })
	return order
}

// perTracePaths returns the paths of a column's leaves in the schema, but its _raw one.
func perTracePaths(c Column) [][]string {
	if c.Type == Labels {
		return [][]string{{c.Name, "key_value", "key"}, {c.Name, "key_value", "value"}}
	}
	return [][]string{{c.Name}}
}

// parquetNode returns the node of a column and its number of leaf columns.
func parquetNode(c Column) (parquet.Node, int) {
	var n parquet.Node
	leaves := 1
	switch c.Type {
	case Int:
		n = parquet.Encoded(parquet.Int(64), &parquet.DeltaBinaryPacked)
	case Bool:
		n = parquet.Leaf(parquet.BooleanType)
	case Time:
		n = parquet.Encoded(parquet.Timestamp(parquet.Nanosecond), &parquet.DeltaBinaryPacked)
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

// Write adds a copy of the row to the batch, and hands the batch to the encoders once
// parquetBatch rows are in.
func (p *parquetRows) Write(row []Value) error {
	if p.cur == nil {
		p.cur = &pqBatch{rows: p.newRows()}
		p.made = 1
	}
	r := p.cur.rows.(*pqValueRows)
	if len(r.rows) < cap(r.rows) {
		r.rows = r.rows[:len(r.rows)+1]
	} else {
		r.rows = append(r.rows, nil)
	}
	r.rows[len(r.rows)-1] = append(r.rows[len(r.rows)-1][:0], row...)
	p.cur.n++
	if p.cur.n == parquetBatch {
		return p.send()
	}
	return nil
}

// pqValueRows are rows given to Write.
type pqValueRows struct{ rows [][]Value }

func (b *pqValueRows) appendColumn(e *pqEncoder, i int) {
	perTrace := e.p.pc[i].perTrace
	for _, row := range b.rows {
		if perTrace {
			e.appendPerTrace(i, &row[i], false)
		} else {
			e.appendValue(i, &row[i])
		}
	}
}

func (b *pqValueRows) reset() {
	for _, row := range b.rows {
		clear(row) // the values point into the rows' strings
	}
	b.rows = b.rows[:0]
}

// pqRecords are records of a view (copies, each holding what its columns' functions read):
// the columns' values are made from them by the encoders. The records of one export are
// of one trace.
type pqRecords[R any] struct {
	table []column[R]
	recs  []R
	first bool // recs[0] is the export's first record
}

func (b *pqRecords[R]) appendColumn(e *pqEncoder, i int) {
	c, pc := &b.table[i], &e.p.pc[i]
	leaf := int(pc.leaf)
	vals := e.vals[leaf]
	switch {
	case pc.perTrace:
		var v [1]Value
		fill(b.table[i:i+1], &b.recs[0], v[:], false)
		e.appendPerTrace(i, &v[0], !b.first)
		e.repeatPerTrace(i, len(b.recs)-1)
		return
	case c.num != nil:
		for j := range b.recs {
			n := c.num(&b.recs[j])
			switch {
			case c.zeroNull && n == 0:
				vals = append(vals, e.p.null[leaf])
			case pc.typ == Bool:
				vals = appendLevel(vals, parquet.BooleanValue(n != 0), pc.def)
			default:
				vals = appendLevel(vals, parquet.Int64Value(n), pc.def)
			}
		}
	case c.opt != nil:
		for j := range b.recs {
			if n, ok := c.opt(&b.recs[j]); ok {
				vals = appendLevel(vals, parquet.Int64Value(n), pc.def)
			} else {
				vals = append(vals, e.p.null[leaf])
			}
		}
	case c.str != nil && pc.typ == String:
		for j := range b.recs {
			if s := c.str(&b.recs[j]); s == "" && c.Nullable {
				vals = append(vals, e.p.null[leaf])
			} else {
				vals = appendLevel(vals, parquet.ByteArrayValue(bytesOf(s)), pc.def)
			}
		}
	default:
		var v [1]Value
		for j := range b.recs {
			fill(b.table[i:i+1], &b.recs[j], v[:], false)
			e.appendValue(i, &v[0])
		}
		return
	}
	e.vals[leaf] = vals
}

func (b *pqRecords[R]) reset() {
	clear(b.recs) // the records point into the trace's names
	b.recs = b.recs[:0]
	b.first = false
}

// copyParquet writes the records next yields as rows of table, until io.EOF: each record
// is copied into the batch, and the encoders make the columns' values from the copies.
// Every function of table reads only the record (and what no other goroutine writes).
func copyParquet[R any](ctx context.Context, p *parquetRows, table []column[R], next func() (*R, error)) error {
	p.newRows = func() pqRows { return &pqRecords[R]{table: table, recs: make([]R, 0, parquetBatch)} }
	p.cur, p.made = &pqBatch{rows: p.newRows()}, 1
	return copyDirect(ctx, table, next, func(x *R, same bool, _ []Value) error {
		b := p.cur.rows.(*pqRecords[R])
		b.first = b.first || !same
		b.recs = append(b.recs, *x)
		p.cur.n++
		if p.cur.n == parquetBatch {
			return p.send()
		}
		return nil
	})
}

// pqEncoder makes the values of a batch's columns and writes them.
type pqEncoder struct {
	p    *parquetRows
	vals [][]parquet.Value // by leaf: the values of the column being written
}

// encoderVals keeps the leaves' value slices of the encoders of ended files, for the next.
var encoderVals sync.Pool // *[][]parquet.Value

func (p *parquetRows) newEncoder() *pqEncoder {
	e := &pqEncoder{p: p}
	if v, ok := encoderVals.Get().(*[][]parquet.Value); ok {
		e.vals = *v
	}
	for len(e.vals) < len(p.cw) {
		e.vals = append(e.vals, make([]parquet.Value, 0, parquetBatch))
	}
	e.vals = e.vals[:len(p.cw)]
	return e
}

// release gives e's value slices back for another file's encoders.
func (e *pqEncoder) release() {
	vals := e.vals[:cap(e.vals)] // each emptied by write
	e.vals = nil
	encoderVals.Put(&vals)
}

// write makes the values of column i on b's rows and hands them to its column writers.
func (e *pqEncoder) write(b *pqBatch, i int) error {
	b.rows.appendColumn(e, i)
	for _, l := range e.p.leavesOf[i] {
		vals := e.vals[l]
		if _, err := e.p.cw[l].WriteRowValues(vals); err != nil {
			return err
		}
		clear(vals) // the values point into the rows' strings
		e.vals[l] = vals[:0]
	}
	return nil
}

// send hands the batch filled to the encoders (started by the first call), ends the row
// group when it is full, and takes an empty batch.
func (p *parquetRows) send() error {
	if !p.started {
		p.start()
	}
	b := p.cur
	p.cur = nil
	b.seq, b.pending = p.sent, atomic.Int32{}
	b.next.Store(0)
	b.pending.Store(int32(len(p.full)))
	p.sent++
	p.groupRows += b.n // b is the encoders' once sent
	for _, full := range p.full {
		select {
		case full <- b:
		case <-p.fail:
			return p.err
		}
	}
	if p.groupRows == p.maxGroupRows {
		p.groupRows = 0
		if err := p.flushGroup(); err != nil {
			return err
		}
	}
	select {
	case p.cur = <-p.free:
	case <-p.fail:
		return p.err
	}
	return nil
}

// start starts the encoders.
func (p *parquetRows) start() {
	p.started = true
	p.turn = sync.NewCond(&p.turnMu)
	p.free, p.fail, p.done = make(chan *pqBatch, parquetBatches), make(chan struct{}), make(chan struct{})
	for ; p.made < parquetBatches; p.made++ {
		p.free <- &pqBatch{rows: p.newRows()}
	}
	var wg sync.WaitGroup
	for range parquetEncoders() {
		full, e := make(chan *pqBatch, parquetBatches), p.newEncoder()
		p.full = append(p.full, full)
		wg.Go(func() { p.encode(full, e) })
	}
	go func() { wg.Wait(); close(p.done) }()
}

// flushGroup ends the row group once the encoders are done with every batch sent.
func (p *parquetRows) flushGroup() error {
	held := make([]*pqBatch, 0, p.made)
	for len(held) < p.made {
		select {
		case b := <-p.free:
			held = append(held, b)
		case <-p.fail:
			return p.err
		}
	}
	err := p.w.Flush()
	for _, b := range held {
		p.free <- b
	}
	if err != nil {
		p.failWith(err)
	}
	return err
}

// encode writes the columns it takes of the batches of full until it is closed; after an
// error (its own or another encoder's) it only passes them on.
func (p *parquetRows) encode(full chan *pqBatch, e *pqEncoder) {
	defer e.release()
	for b := range full {
		for {
			k := int(b.next.Add(1)) - 1
			if k >= len(p.order) {
				break
			}
			i := p.order[k]
			p.waitTurn(i, b.seq)
			select {
			case <-p.fail:
			default:
				if err := e.write(b, i); err != nil {
					p.failWith(err)
				}
			}
			p.written[i].Store(b.seq + 1)
			if p.waiting.Load() > 0 {
				p.turnMu.Lock()
				p.turn.Broadcast()
				p.turnMu.Unlock()
			}
		}
		if b.pending.Add(-1) == 0 {
			b.rows.reset()
			b.n = 0
			p.free <- b
		}
	}
}

// waitTurn returns once column i of the batches before batch seq is written.
func (p *parquetRows) waitTurn(i int, seq int64) {
	if p.written[i].Load() == seq {
		return
	}
	p.turnMu.Lock()
	p.waiting.Add(1)
	for p.written[i].Load() != seq {
		p.turn.Wait()
	}
	p.waiting.Add(-1)
	p.turnMu.Unlock()
}

// failWith records the first error and stops the encoders and the rows.
func (p *parquetRows) failWith(err error) {
	p.errOnce.Do(func() {
		p.err = err
		close(p.fail)
	})
}

// appendValue appends column i's values for v to its leaves.
func (e *pqEncoder) appendValue(i int, v *Value) {
	c := &e.p.pc[i]
	leaf := int(c.leaf)
	if v.Null {
		e.vals[leaf] = append(e.vals[leaf], e.p.null[leaf])
		if c.raw >= 0 {
			e.vals[c.raw] = append(e.vals[c.raw], e.p.null[c.raw])
		}
		return
	}
	switch c.typ {
	case Int, Time:
		e.put(leaf, parquet.Int64Value(v.Int), c.def)
	case Bool:
		e.put(leaf, parquet.BooleanValue(v.Int != 0), c.def)
	case Labels:
		e.appendLabels(v.Labels, leaf, int(c.def))
	case Name:
		s := v.Str
		if utf8.ValidString(s) {
			e.vals[c.raw] = append(e.vals[c.raw], e.p.null[c.raw])
		} else {
			e.put(int(c.raw), parquet.ByteArrayValue(bytesOf(s)), 1)
			s = strings.ToValidUTF8(s, "\uFFFD") // rare: a new string, kept by the value
		}
		e.put(leaf, parquet.ByteArrayValue(bytesOf(s)), c.def)
	default:
		e.put(leaf, parquet.ByteArrayValue(bytesOf(v.Str)), c.def)
	}
}

// put appends v at definition level def to leaf's values.
func (e *pqEncoder) put(leaf int, v parquet.Value, def uint8) {
	e.vals[leaf] = appendLevel(e.vals[leaf], v, def)
}

// appendLevel appends v at definition level def to vals. A value handed to a ColumnWriter
// needs no column index, nor a repetition level outside a MAP.
func appendLevel(vals []parquet.Value, v parquet.Value, def uint8) []parquet.Value {
	vals = append(vals, v)
	vals[len(vals)-1].SetDefinitionLevel(int(def))
	return vals
}

// appendPerTrace appends PerTrace column i's values for v: those of the last row when v is
// its value (or, with same, when v is of the last row's trace), else made by appendValue
// and kept for the next rows.
func (e *pqEncoder) appendPerTrace(i int, v *Value, same bool) {
	p := e.p
	last := &p.last[i]
	if p.haveLast[i] && (same || last.Int == v.Int && last.Null == v.Null && last.Str == v.Str && sameLabels(last.Labels, v.Labels)) {
		e.repeatPerTrace(i, 1)
		return
	}
	p.haveLast[i], *last = true, *v
	leaves := p.leavesOf[i]
	for _, l := range leaves {
		p.traceRun[l] = p.traceRun[l][:0]
	}
	var n [2]int // a column has one leaf and its _raw, or a MAP's two
	for k, l := range leaves {
		n[k] = len(e.vals[l])
	}
	e.appendValue(i, v)
	for k, l := range leaves {
		p.traceVals[l] = append(p.traceVals[l][:0], e.vals[l][n[k]:]...)
	}
}

// repeatPerTrace appends PerTrace column i's values of the last row n times.
func (e *pqEncoder) repeatPerTrace(i, n int) {
	for _, l := range e.p.leavesOf[i] {
		run := e.p.traceRun[l]
		if len(run) == 0 {
			for range parquetBatch {
				run = append(run, e.p.traceVals[l]...)
			}
			e.p.traceRun[l] = run
		}
		e.vals[l] = append(e.vals[l], run[:n*len(e.p.traceVals[l])]...)
	}
}

// appendLabels appends a MAP's two leaves, keys then values (a key given twice keeps its
// first value); an empty map is one null of each.
func (e *pqEncoder) appendLabels(ls []trace.Label, leaf, def int) {
	var vals [2][]parquet.Value
	for i, l := range ls {
		if firstKey(ls, i) {
			rep := min(len(vals[0]), 1)
			for k, s := range []string{l.Key, l.Value} {
				b := []byte(strings.ToValidUTF8(s, "\uFFFD"))
				vals[k] = append(vals[k], parquet.ByteArrayValue(b).Level(rep, def+1, leaf+k))
			}
		}
	}
	for k := range 2 {
		if len(vals[k]) == 0 {
			vals[k] = []parquet.Value{parquet.NullValue().Level(0, def, leaf+k)}
		}
		e.vals[leaf+k] = append(e.vals[leaf+k], vals[k]...)
	}
}

// Close writes the rows batched and the file's footer.
func (p *parquetRows) Close() error {
	if !p.started {
		if p.cur != nil {
			e := p.newEncoder()
			for _, i := range p.order {
				if err := e.write(p.cur, i); err != nil {
					return err
				}
			}
			e.release()
		}
		return p.w.Close()
	}
	if p.cur != nil && p.cur.n > 0 {
		if err := p.send(); err != nil {
			p.abort()
			return err
		}
	}
	if err := p.stop(); err != nil {
		return err
	}
	return p.w.Close()
}

// stop ends the encoders once they have written the batches sent, and returns the first
// error. An export that fails before its Close calls it (abort), so that they end.
func (p *parquetRows) stop() error {
	if !p.started || p.ended {
		return p.err
	}
	p.ended = true
	for _, full := range p.full {
		close(full)
	}
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
