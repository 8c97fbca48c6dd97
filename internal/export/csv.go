package export

import (
	"encoding/csv"
	"io"
)

// csvRows writes a header row of the columns' names, then one row per record: numbers in
// decimal, names as their bytes (encoding/csv quotes those that need it).
type csvRows struct {
	cw   *csv.Writer
	cols []Column
	rec  []string
}

func newCSV(w io.Writer, t Table) (RowWriter, error) {
	cols := t.Columns
	c := &csvRows{cw: csv.NewWriter(w), cols: cols, rec: make([]string, len(cols))}
	return c, c.cw.Write(ColumnNames(cols))
}

func (c *csvRows) Write(row []Value) error {
	for i, col := range c.cols {
		c.rec[i] = row[i].Text(col.Type)
	}
	return c.cw.Write(c.rec)
}

func (c *csvRows) Close() error {
	c.cw.Flush()
	return c.cw.Error()
}
