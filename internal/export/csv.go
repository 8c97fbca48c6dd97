package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"unsafe"

	"github.com/iotap/iotap/trace"
)

// csvRows writes a header row of the columns' names, then one row per record: numbers in
// decimal, names as their bytes (encoding/csv quotes those that need it), each cell as
// Value.Text gives it.
type csvRows struct {
	cw   *csv.Writer
	cols []Column
	rec  []string
	// The text of the cells that are not strings already is appended to buf; cell i is
	// buf[start[i]:end[i]] when end[i] > 0, and rec[i] points into buf until the row is written.
	buf        []byte
	start, end []int
	times      []timeCache // per column
	// The labels last seen (a trace's) and their text.
	labels    []labelsText
	haveLabel []bool
}

// labelsText is a set of labels and its text.
type labelsText struct {
	labels []trace.Label
	text   string
}

func newCSV(w io.Writer, t Table) (RowWriter, error) {
	cols := t.Columns
	c := &csvRows{cw: csv.NewWriter(w), cols: cols, rec: make([]string, len(cols)), start: make([]int, len(cols)), end: make([]int, len(cols)),
		times: make([]timeCache, len(cols)), labels: make([]labelsText, len(cols)), haveLabel: make([]bool, len(cols))}
	return c, c.cw.Write(ColumnNames(cols))
}

func (c *csvRows) Write(row []Value) error {
	c.buf = c.buf[:0]
	for i, col := range c.cols {
		v := &row[i]
		c.end[i] = 0
		switch {
		case v.Null:
			c.rec[i] = ""
		case col.Type == Int:
			c.start[i] = len(c.buf)
			c.buf = strconv.AppendInt(c.buf, v.Int, 10)
			c.end[i] = len(c.buf)
		case col.Type == Bool:
			c.rec[i] = strconv.FormatBool(v.Int != 0)
		case col.Type == Time:
			c.start[i] = len(c.buf)
			c.buf = c.times[i].append(c.buf, v.Int)
			c.end[i] = len(c.buf)
		case col.Type == Labels:
			if l := &c.labels[i]; !c.haveLabel[i] || !sameLabels(l.labels, v.Labels) {
				c.haveLabel[i], l.labels, l.text = true, v.Labels, string(appendLabels(nil, v.Labels))
			}
			c.rec[i] = c.labels[i].text
		default:
			c.rec[i] = v.Str
		}
	}
	for i := range c.cols {
		if c.end[i] > 0 {
			c.rec[i] = unsafe.String(&c.buf[c.start[i]], c.end[i]-c.start[i])
		}
	}
	return c.cw.Write(c.rec) // copies the cells: buf is free again when it returns
}

func (c *csvRows) Close() error {
	c.cw.Flush()
	return c.cw.Error()
}
