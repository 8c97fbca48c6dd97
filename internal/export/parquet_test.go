package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"

	"github.com/iotap/iotap/trace"
)

// collect is a RowWriter that keeps a copy of every row: what the columns' functions give,
// row by row, without a format between.
type collect struct{ rows [][]Value }

func (c *collect) Write(row []Value) error {
	c.rows = append(c.rows, append([]Value(nil), row...))
	return nil
}
func (c *collect) Close() error { return nil }

// viewRows returns the rows of a view of the trace at path, and the Parquet file Write
// makes of it.
func viewRows(t *testing.T, path, view string) ([][]Value, []byte) {
	t.Helper()
	v, _ := viewNamed(view)
	var rows collect
	var pq bytes.Buffer
	for _, w := range []func(r *trace.Reader) error{
		func(r *trace.Reader) error { return v.rows(context.Background(), r, newNames(r), &rows) },
		func(r *trace.Reader) error {
			_, err := Write(context.Background(), r, &pq, Options{Format: "parquet", View: view})
			return err
		},
	} {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w(r); err != nil {
			t.Fatal(err)
		}
		_ = r.Close() // read-only
	}
	return rows.rows, pq.Bytes()
}

// checkParquet reads file back with parquet-go and compares every cell with rows: a
// number, a time or a boolean is the value; a NULL is a null; a string its text; a name its
// text with invalid UTF-8 as U+FFFD, and its _raw column its bytes when they are not valid
// UTF-8 (NULL when they are); labels a map of each key's first value (an empty map, a null).
func checkParquet(t *testing.T, file []byte, cols []Column, rows [][]Value) {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newParquet(io.Discard, Table{View: "check", Columns: cols})
	if err != nil {
		t.Fatal(err)
	}
	pr := p.(*parquetRows)
	if got := len(f.Schema().Columns()); got != len(pr.cw) {
		t.Fatalf("the file has %d leaf columns, the schema %d", got, len(pr.cw))
	}
	r := parquet.NewReader(f)
	defer func() { _ = r.Close() }()
	buf := make([]parquet.Row, 100)
	n, bad := 0, 0
	for {
		k, err := r.ReadRows(buf)
		for _, row := range buf[:k] {
			if n >= len(rows) {
				t.Fatalf("the file has more than the %d rows written", len(rows))
			}
			leaves := make([][]parquet.Value, len(pr.cw))
			for _, v := range row {
				leaves[v.Column()] = append(leaves[v.Column()], v)
			}
			for i, c := range cols {
				if msg := checkCell(c, &rows[n][i], leaves, pr.leaves[i], pr.raw[i]); msg != "" && bad < 10 {
					bad++
					t.Errorf("row %d, column %s: %s", n, c.Name, msg)
				}
			}
			n++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n != len(rows) {
		t.Errorf("the file has %d rows, %d were written", n, len(rows))
	}
}

// checkCell says what is wrong with the value of column c in a row's leaves ("": nothing).
func checkCell(c Column, want *Value, leaves [][]parquet.Value, leaf, raw int) string {
	got := leaves[leaf]
	if c.Type == Labels {
		keys, vals := leaves[leaf], leaves[leaf+1]
		var wk, wv []string
		for i, l := range want.Labels {
			if firstKey(want.Labels, i) {
				wk, wv = append(wk, strings.ToValidUTF8(l.Key, "\uFFFD")), append(wv, strings.ToValidUTF8(l.Value, "\uFFFD"))
			}
		}
		if len(wk) == 0 {
			if len(keys) != 1 || !keys[0].IsNull() || len(vals) != 1 || !vals[0].IsNull() {
				return fmt.Sprintf("map %v %v, want empty", keys, vals)
			}
			return ""
		}
		if fmt.Sprint(texts(keys)) != fmt.Sprint(wk) || fmt.Sprint(texts(vals)) != fmt.Sprint(wv) {
			return fmt.Sprintf("map %q %q, want %q %q", texts(keys), texts(vals), wk, wv)
		}
		return ""
	}
	if len(got) != 1 {
		return fmt.Sprintf("%d values", len(got))
	}
	g := got[0]
	if want.Null {
		if !g.IsNull() || raw >= 0 && !leaves[raw][0].IsNull() {
			return fmt.Sprintf("%v, want NULL", g)
		}
		return ""
	}
	if g.IsNull() {
		return fmt.Sprintf("NULL, want %+v", *want)
	}
	switch c.Type {
	case Int, Time:
		if g.Int64() != want.Int {
			return fmt.Sprintf("%d, want %d", g.Int64(), want.Int)
		}
	case Bool:
		if g.Boolean() != (want.Int != 0) {
			return fmt.Sprintf("%v, want %d", g.Boolean(), want.Int)
		}
	case String:
		if string(g.ByteArray()) != want.Str {
			return fmt.Sprintf("%q, want %q", g.ByteArray(), want.Str)
		}
	case Name:
		if s := strings.ToValidUTF8(want.Str, "\uFFFD"); string(g.ByteArray()) != s {
			return fmt.Sprintf("%q, want %q", g.ByteArray(), s)
		}
		r := leaves[raw][0]
		if valid := utf8.ValidString(want.Str); valid != r.IsNull() || !valid && string(r.ByteArray()) != want.Str {
			return fmt.Sprintf("%s %q: %v", c.Name+RawSuffix, want.Str, r)
		}
	}
	return ""
}

func texts(vs []parquet.Value) []string {
	var out []string
	for _, v := range vs {
		out = append(out, string(v.ByteArray()))
	}
	return out
}

// TestParquetReadsBack: every view of the golden traces, exported to Parquet, reads back
// with parquet-go cell by cell as the columns' functions give the rows, whether the rows
// come as a view's records (Write) or as rows (RowWriter.Write, as the summary writes them).
func TestParquetReadsBack(t *testing.T) {
	names, _ := Views()
	for name, path := range goldenTraces(t) {
		for _, view := range names {
			t.Run(name+"/"+view, func(t *testing.T) {
				rows, file := viewRows(t, path, view)
				cols := Columns(view)
				checkParquet(t, file, cols, rows)
				var out bytes.Buffer
				rw, err := newParquet(&out, Table{View: view, Columns: cols})
				if err != nil {
					t.Fatal(err)
				}
				for _, row := range rows {
					if err := rw.Write(row); err != nil {
						t.Fatal(err)
					}
				}
				if err := rw.Close(); err != nil {
					t.Fatal(err)
				}
				checkParquet(t, out.Bytes(), cols, rows)
			})
		}
	}
}

// TestParquetSameWithEncoders: the bytes of a Parquet export do not depend on how many
// goroutines encode its columns, in files of one row group and of many (row groups of
// four batches: each ends with the encoders idle), and such files read back whole.
func TestParquetSameWithEncoders(t *testing.T) {
	defer func(f func() int, g int) { parquetEncoders, parquetGroupRows = f, g }(parquetEncoders, parquetGroupRows)
	traces := goldenTraces(t)
	names, _ := Views()
	for _, group := range []int{ParquetRowGroupRows, 4 * parquetBatch} {
		parquetGroupRows = group
		t.Run(fmt.Sprint(group), func(t *testing.T) { sameWithEncoders(t, traces, names) })
	}
	rows, file := viewRows(t, traces["long"], ViewRequests)
	if len(rows) < 8*parquetGroupRows {
		t.Fatalf("the long trace has %d requests, less than 8 row groups", len(rows))
	}
	checkParquet(t, file, Columns(ViewRequests), rows)
}

func sameWithEncoders(t *testing.T, traces map[string]string, names []string) {
	sums := map[string]string{}
	for _, n := range []int{1, 2, 3, 8} {
		parquetEncoders = func() int { return n }
		for name, path := range traces {
			for _, view := range names {
				_, file := viewRows(t, path, view)
				key, sum := name+"/"+view, fmt.Sprintf("%x", sha256.Sum256(file))
				if n == 1 {
					sums[key] = sum
				} else if sums[key] != sum {
					t.Errorf("%s: %d encoders write other bytes than one", key, n)
				}
			}
		}
	}
}
