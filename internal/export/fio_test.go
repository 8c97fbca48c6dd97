package export

import (
	"strings"
	"testing"
)

// TestExportFioHandleReuse: an open that began before the release of its handle's previous
// file (and got the handle once that release freed it) comes first in start order; the
// release still closes the previous file, and the handle's data calls go to the new one.
func TestExportFioHandleReuse(t *testing.T) {
	var out strings.Builder
	l := newFioLog(&out)
	for _, o := range []span{
		{act: actOpen, start: 1000, path: "a", handle: 7},
		{act: actWrite, start: 2000, path: "a", handle: 7, size: 10, ret: 10},
		{act: actOpen, start: 3000, path: "b", handle: 7},  // slow open: got 7 after a's release
		{act: actClose, start: 4000, path: "a", handle: 7}, // a's release
		{act: actRead, start: 5000, path: "b", handle: 7, size: 5, ret: 5},
		{act: actClose, start: 6000, path: "b", handle: 7},
	} {
		if err := l.add(&o); err != nil {
			t.Fatal(err)
		}
	}
	want := "1 a add\n1 a open\n2 a write 0 10\n3 b add\n3 b open\n4 a close\n5 b read 0 5\n6 b close\n"
	if out.String() != want {
		t.Errorf("iolog:\n%s\nwant:\n%s", out.String(), want)
	}
}
