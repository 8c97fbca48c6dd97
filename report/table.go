package report

import (
	"strings"

	"github.com/rivo/uniseg"

	"github.com/iotap/iotap/internal/termsafe"
)

// table writes aligned columns: the first column left-aligned, the others right-aligned,
// by the cells' width on a terminal (a wide character, as in CJK names, takes two columns;
// a combining mark none).
type table struct {
	rows [][]string
	left map[int]bool
}

func newTable(header ...string) *table {
	return &table{rows: [][]string{header}, left: map[int]bool{0: true}}
}

// add appends a row. Cells are escaped for a terminal: they may hold file names, commands
// and labels from the traced job.
func (t *table) add(cells ...string) {
	for i, c := range cells {
		cells[i] = termsafe.Name(c)
	}
	t.rows = append(t.rows, cells)
}

func (t *table) String() string {
	var w []int
	for _, r := range t.rows {
		for i, c := range r {
			n := uniseg.StringWidth(c)
			if i >= len(w) {
				w = append(w, n)
			} else if n > w[i] {
				w[i] = n
			}
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		var line strings.Builder
		for i, c := range r {
			if i > 0 {
				line.WriteString("  ")
			}
			pad := strings.Repeat(" ", w[i]-uniseg.StringWidth(c))
			if t.left[i] {
				line.WriteString(c)
				if i < len(r)-1 {
					line.WriteString(pad)
				}
			} else {
				line.WriteString(pad + c)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	return b.String()
}
