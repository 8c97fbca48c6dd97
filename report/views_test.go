package report

import (
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// replayStats aggregates events as a replay's trace, whose events are the calls.
func replayStats(evs []trace.Event, paths map[uint32]string) *stats.Stats {
	h := &trace.Header{Kind: "replay", Hostname: "h", WallStart: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a := stats.NewAccumulator("t", h, stats.Options{})
	for i := range evs {
		a.Add(&evs[i])
	}
	return a.Finish(&stats.Names{Paths: paths}, nil, nil)
}

// TestReportVerdict checks the verdict's rule on calls made to measure.
func TestReportVerdict(t *testing.T) {
	paths := map[uint32]string{trace.RootPath: "", 2: "db", 3: "db-journal", 4: "a", 5: "b"}
	var evs []trace.Event
	var at int64
	add := func(op trace.Op, dur int64, n int, paths ...uint32) {
		for i := range n {
			evs = append(evs, trace.Event{Op: op, Path: paths[i%len(paths)], Start: at, Dur: dur, Pid: 1, Tid: 1})
			at += dur + 1000 // 1 µs between calls
		}
	}
	// 9 ms of fsync on db-journal and 1 ms on db; 1.5 ms of opens, frequent; rare stats.
	add(trace.OpFsync, 900_000, 10, 3)
	add(trace.OpFsync, 100_000, 10, 2)
	add(trace.OpOpen, 10_000, 150, 4)
	add(trace.OpGetattr, 2_000, 20, 5)
	one := evs
	// 1.5 ms of opens spread evenly over three files, 0.2 ms of fsync, rare stats.
	evs, at = nil, 0
	add(trace.OpOpen, 10_000, 150, 4, 5, 2)
	add(trace.OpFsync, 100_000, 2, 3)
	add(trace.OpGetattr, 2_000, 20, 5)
	spread := evs
	tests := []struct {
		name string
		evs  []trace.Event
		want string
	}{
		// wall 11.54 ms of calls and 189 µs between them; 9 ms of 11.54 ms on db-journal.
		{"one path holds the top kind", one, "I/O 98.4% of 11.7ms; 78.0% of it fsync on db-journal; p99 open 10.0µs"},
		// wall 1.74 ms of calls and 171 µs between; 1.5 ms of 1.74 ms opens.
		{"no path holds half", spread, "I/O 91.1% of 1.91ms; 86.2% of it open (over 3 paths); p99 open 10.0µs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Build([]*stats.Stats{replayStats(tt.evs, paths)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			v := r.Total.Verdict
			if r.Verdict != tt.want {
				t.Errorf("verdict %q\n          want %q\nfigures %+v", r.Verdict, tt.want, v)
			}
			var calls, top int64
			for _, c := range r.Total.Syscalls {
				calls += c.TotalNs
			}
			top = r.Total.Syscalls[0].TotalNs
			if v.IONs != calls || v.TopNs != top || v.Top != r.Total.Syscalls[0].Call {
				t.Errorf("figures %+v: io_ns %d, top %s %d", v, calls, r.Total.Syscalls[0].Call, top)
			}
		})
	}
}

// TestVerdictNoIO: a trace without events says so.
func TestVerdictNoIO(t *testing.T) {
	r, err := Build([]*stats.Stats{replayStats(nil, nil)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != "no I/O" {
		t.Errorf("verdict %q", r.Verdict)
	}
}

func TestShellJoin(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"plain", []string{"tar", "cf", "x.tar", "./data", "--level=9"}, "tar cf x.tar ./data --level=9"},
		{"space", []string{"sqlite3", "db", "select 1;"}, "sqlite3 db 'select 1;'"},
		{"single quote", []string{"sqlite3", "db", "insert into t values ('a');"}, `sqlite3 db "insert into t values ('a');"`},
		{"both quotes", []string{"sh", "-c", `echo "it's"`}, `sh -c 'echo "it'\''s"'`},
		{"empty", []string{"x", ""}, "x ''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := shellJoin(tc.args); got != tc.want {
				t.Errorf("shellJoin(%q) = %s, want %s", tc.args, got, tc.want)
			}
		})
	}
	if got := cmdlineText([]string{"python3", "-c", "import os\nprint(1)"}, 20); got != `python3 -c 'import …` {
		t.Errorf("cmdlineText = %q", got)
	}
}

// TestHeatMapLayout: columns as narrow as the widest row's cells and about 100 of them at
// most; every cell lands in the column its start falls in, and a row's columns add up to
// its cells.
func TestHeatMapLayout(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ms := int64(time.Millisecond)
	at := func(d int64) int64 { return start.UnixNano() + d }
	a := &stats.Heat{Width: stats.HeatBase, Cells: []stats.HeatCell{{Start: at(0), Ns: 1, Bytes: 10}, {Start: at(5 * ms), Ns: 2}, {Start: at(299 * ms), Ns: 3}}}
	b := &stats.Heat{Width: 4 * stats.HeatBase, Cells: []stats.HeatCell{{Start: at(4 * ms), Ns: 7, Bytes: 1}}}
	m := heatMap("file", start, []string{"a", "b"}, []*stats.Heat{a, b})
	// 300 ms at 4 ms would be 75 columns: 4 ms it is.
	if m.WidthNs != 4*ms || m.Columns != 75 {
		t.Fatalf("columns %d of %d ns", m.Columns, m.WidthNs)
	}
	if r := m.Rows[0]; r.Ns[0] != 1 || r.Ns[1] != 2 || r.Ns[74] != 3 || r.TotalNs != 6 || r.Bytes != 10 {
		t.Errorf("row a: %+v", r)
	}
	if r := m.Rows[1]; r.Ns[1] != 7 || r.ByCol[1] != 1 {
		t.Errorf("row b: %+v", r)
	}
	// A longer span: the width doubles until about 100 columns are enough.
	c := &stats.Heat{Width: stats.HeatBase, Cells: []stats.HeatCell{{Start: at(0), Ns: 1}, {Start: at(1000 * ms), Ns: 1}}}
	if m := heatMap("file", start, []string{"c"}, []*stats.Heat{c}); m.WidthNs != 16*ms || m.Columns != 63 {
		t.Errorf("one second: %d columns of %d ns", m.Columns, m.WidthNs)
	}
}

// TestLostBars: the chart beside a comparison's verdict shows each row's total time on a
// side less the baseline's, the rows that moved most first.
func TestLostBars(t *testing.T) {
	c := Compare([]string{"ext4", "s3fs"}, []*stats.Stats{loadStats(t, "node1.iotap"), loadStats(t, "s3fs.iotap")}, 0.05)
	bars := lostBars(c)
	if len(bars) == 0 || len(bars) > maxLostBars {
		t.Fatalf("%d bars", len(bars))
	}
	want := map[string]int64{}
	for _, r := range c.rows() {
		want[r.Name] = r.Sides[1].TotalNs - r.Sides[0].TotalNs
	}
	for i, b := range bars {
		if b.Delta[0] != want[b.Name] {
			t.Errorf("%s: %d, want %d", b.Name, b.Delta[0], want[b.Name])
		}
		if i > 0 && abs64(b.Delta[0]) > abs64(bars[i-1].Delta[0]) {
			t.Errorf("%s after %s", b.Name, bars[i-1].Name)
		}
	}
	var h strings.Builder
	if err := WriteCompareHTML(&h, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.String(), "Time lost per op against ext4") {
		t.Error("no time-lost chart in the comparison's page")
	}
}
