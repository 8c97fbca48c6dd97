package recorder

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/tally"
	"github.com/iotap/iotap/trace"
)

// TestLiveLine: the live line starts with its time (RFC 3339, UTC, milliseconds), then the
// rates; its JSON form has the fields the manual lists.
func TestLiveLine(t *testing.T) {
	var tl tally.Tally
	prev := tl.Snapshot()
	tl.AddBatch([]trace.Event{
		{Op: trace.OpRead, Dur: 2000, Ret: 3_000_000},
		{Op: trace.OpWrite, Dur: 1000, Ret: 1_000_000},
		{Op: trace.OpLookup, Dur: 500, Errno: 2},
	})
	cur := tl.Snapshot()
	cur.At = time.Date(2026, 12, 3, 10, 4, 5, 678_900_000, time.FixedZone("CET", 3600))
	prev.At = cur.At.Add(-2 * time.Second)
	st := newLiveStats(cur.Sub(prev), cur.At.Sub(prev.At), 7)

	text := st.line("text")
	want := regexp.MustCompile(`^2026-12-03T09:04:05\.678Z iotap: +2 ops/s  read +1\.5 MB/s  write +0\.5 MB/s  p99 [0-9.]+µs  errors 1  dropped 7$`)
	if !want.MatchString(text) {
		t.Errorf("text line %q, want it to match %s", text, want)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(st.line("json")), &got); err != nil {
		t.Fatalf("json line %q: %v", st.line("json"), err)
	}
	for k, v := range map[string]any{
		"time": "2026-12-03T09:04:05.678Z", "interval_seconds": 2.0, "ops": 3.0, "errors": 1.0, "ops_per_second": 1.5,
		"read_bytes": 3e6, "written_bytes": 1e6, "read_mb_per_second": 1.5, "write_mb_per_second": 0.5, "dropped_total": 7.0,
	} {
		if got[k] != v {
			t.Errorf("json %s = %v, want %v", k, got[k], v)
		}
	}
	if p99, ok := got["p99_seconds"].(float64); !ok || p99 < 1.5e-6 || p99 > 2.5e-6 {
		t.Errorf("json p99_seconds = %v, want about 2e-06", got["p99_seconds"])
	}
	if len(got) != 11 {
		t.Errorf("json has %d fields, want the 11 the manual lists: %v", len(got), got)
	}
	manual, err := os.ReadFile("../../docs/manual.md")
	if err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if !strings.Contains(string(manual), "`"+k+"`") {
			t.Errorf("docs/manual.md does not name the live line's field %s", k)
		}
	}
}
