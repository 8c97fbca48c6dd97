package report

import (
	"strings"
	"testing"

	"github.com/rivo/uniseg"
)

// TestTableDisplayWidth: columns line up on a terminal whatever the names hold: wide
// characters (two columns each), combining marks (none), plain ASCII.
func TestTableDisplayWidth(t *testing.T) {
	tb := newTable("file", "count")
	tb.add("数据/样本.bam", "12")
	tb.add("cafe\u0301.txt", "3") // "café" with a combining acute accent
	tb.add("plain.txt", "456")
	lines := strings.Split(strings.TrimSuffix(tb.String(), "\n"), "\n")
	want := uniseg.StringWidth(lines[0])
	for _, l := range lines {
		if w := uniseg.StringWidth(l); w != want {
			t.Errorf("line %q is %d columns wide, the header %d", l, w, want)
		}
	}
}
