package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

var (
	update       = flag.Bool("update", false, "regenerate the golden files in testdata/report")
	updateTraces = flag.Bool("update-traces", false, "regenerate the test traces in testdata/report (then run -update)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *updateTraces {
		for name, wl := range testWorkloads {
			if err := genTrace(filepath.Join(testdataDir(), name), wl); err != nil {
				panic(err)
			}
		}
	}
	os.Exit(m.Run())
}

func loadStats(t testing.TB, name string) *stats.Stats {
	t.Helper()
	return loadStatsBy(t, name, "")
}

// loadStatsBy aggregates a test trace with the groups of --by by when they split its
// events (comm, exe, uid), reading its process records first as the command does.
func loadStatsBy(t testing.TB, name, by string) *stats.Stats {
	t.Helper()
	path := filepath.Join(testdataDir(), name)
	var group func(*trace.Event) string
	if ByEvent(by) {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		group = EventGroup(by, r.Processes())
		_ = r.Close()
	}
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	}()
	a := stats.NewAccumulator(name, r.Header(), stats.Options{Names: r, Group: group})
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(ev)
	}
	f, _ := r.Footer()
	return a.Finish(r, f, r.Damage())
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(testdataDir(), name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(go test -update regenerates)", name, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs in length: got %d lines, want %d", name, len(gl), len(wl))
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		name   string
		traces []string
		opts   Options
		format string
	}{
		{"node1.txt", []string{"node1.iotap"}, Options{}, "text"},
		{"node1.json", []string{"node1.iotap"}, Options{Top: 5}, "json"},
		{"two-nodes-by-host.txt", []string{"node1.iotap", "node2.iotap"}, Options{By: "host"}, "text"},
		{"two-nodes-by-rank.json", []string{"node1.iotap", "node2.iotap"}, Options{By: "label:rank", Top: 3}, "json"},
		{"node1-ops.csv", []string{"node1.iotap"}, Options{}, "csv"},
		{"two-nodes-by-comm.txt", []string{"node1.iotap", "node2.iotap"}, Options{By: "comm"}, "text"},
		{"node1-by-exe.json", []string{"node1.iotap"}, Options{By: "exe", Top: 3}, "json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var per []*stats.Stats
			for _, tr := range tt.traces {
				per = append(per, loadStatsBy(t, tr, tt.opts.By))
			}
			r, err := Build(per, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			switch tt.format {
			case "text":
				err = WriteText(&b, r)
			case "json":
				err = WriteJSON(&b, r)
			case "csv":
				err = WriteCSV(&b, r, "ops")
			}
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.name, b.Bytes())
		})
	}
}

func TestCompareGolden(t *testing.T) {
	a, b := loadStats(t, "node1.iotap"), loadStats(t, "s3fs.iotap")
	c := Compare([]string{"ext4", "s3fs"}, []*stats.Stats{a, b}, 0.05)
	if len(c.Mismatches) != 0 {
		t.Fatalf("same work reported as different: %v", c.Mismatches)
	}
	var txt, js bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if err := WriteCompareJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "compare-ext4-s3fs.txt", txt.Bytes())
	checkGolden(t, "compare-ext4-s3fs.json", js.Bytes())
	if c.Slower[0].Op != "read" || c.Ops[0].Sides[1].Ratio.P50 < 2.5 {
		t.Errorf("reads 3x slower on s3fs should lead the slower list: %+v", c.Slower[0])
	}
}

func TestSameWorkRefusal(t *testing.T) {
	a, other := loadStats(t, "node1.iotap"), loadStats(t, "other-work.iotap")
	m := SameWork(a, other, 0.05)
	if len(m) == 0 {
		t.Fatal("traces of different work were accepted")
	}
	if !slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, "read count") }) {
		t.Errorf("mismatches do not name the read count: %v", m)
	}
	if m := SameWork(a, loadStats(t, "node2.iotap"), 0.05); len(m) != 0 {
		t.Errorf("same work on another node refused: %v", m)
	}
	// A replay of the same job is the same work, though it folds lookups and releases.
	rp := loadStats(t, "replay.iotap")
	if m := SameWork(a, rp, 0.05); len(m) != 0 {
		t.Errorf("record vs its replay refused: %v", m)
	}
	c := Compare([]string{"record", "replay"}, []*stats.Stats{a, rp}, 0.05)
	if !slices.ContainsFunc(c.Warnings, func(s string) bool { return strings.Contains(s, "compare the work time") }) {
		t.Errorf("no record/replay warning: %v", c.Warnings)
	}
	// A generous tolerance accepts it.
	if m := SameWork(a, other, 0.9); len(m) != 0 {
		t.Errorf("tolerance 0.9 still refuses: %v", m)
	}
}

// TestPercentilesIndependent checks the JSON report's percentiles against order statistics
// of the raw durations read back from the trace.
func TestPercentilesIndependent(t *testing.T) {
	for _, name := range []string{"node1.iotap", "s3fs.iotap"} {
		r, err := trace.Open(filepath.Join(testdataDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		durs := map[string][]int64{}
		for {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			durs[ev.Op.String()] = append(durs[ev.Op.String()], ev.Dur)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Build([]*stats.Stats{loadStats(t, name)}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var js bytes.Buffer
		if err := WriteJSON(&js, rep); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Total struct {
				Ops []struct {
					Op     string  `json:"op"`
					Count  int     `json:"count"`
					Mean   float64 `json:"mean_ns"`
					P50    int64   `json:"p50_ns"`
					P90    int64   `json:"p90_ns"`
					P99    int64   `json:"p99_ns"`
					P999   int64   `json:"p99_9_ns"`
					Max    int64   `json:"max_ns"`
					TotalN int64   `json:"total_ns"`
				} `json:"ops"`
			} `json:"total"`
		}
		if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Total.Ops) != len(durs) {
			t.Fatalf("%s: %d ops in report, %d in trace", name, len(doc.Total.Ops), len(durs))
		}
		for _, o := range doc.Total.Ops {
			d := durs[o.Op]
			slices.Sort(d)
			var sum int64
			for _, x := range d {
				sum += x
			}
			if o.Count != len(d) || o.TotalN != sum || o.Max != d[len(d)-1] {
				t.Errorf("%s %s: count %d total %d max %d; raw %d %d %d", name, o.Op, o.Count, o.TotalN, o.Max, len(d), sum, d[len(d)-1])
			}
			for _, p := range []struct {
				milli int64
				got   int64
			}{{50_000, o.P50}, {90_000, o.P90}, {99_000, o.P99}, {99_900, o.P999}} {
				// rank = ⌈p/100 · n⌉, at least 1: SQL's percentile_disc, the definition
				// doc.go documents.
				rank := max((p.milli*int64(len(d))+99_999)/100_000, 1)
				want := d[rank-1]
				if p.got < want || p.got > want+max(want/1000, 512) {
					t.Errorf("%s %s p%g = %d, order statistic %d", name, o.Op, float64(p.milli)/1000, p.got, want)
				}
			}
		}
	}
}

func TestHTMLSelfContained(t *testing.T) {
	per := []*stats.Stats{loadStats(t, "node1.iotap"), loadStats(t, "node2.iotap")}
	r, err := Build(per, Options{By: "host"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	c := Compare([]string{"a", "b"}, []*stats.Stats{per[0], loadStats(t, "s3fs.iotap")}, 0.05)
	var cb bytes.Buffer
	if err := WriteCompareHTML(&cb, c); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("IOTAP_HTML_OUT"); dir != "" {
		for name, page := range map[string][]byte{"report.html": b.Bytes(), "compare.html": cb.Bytes()} {
			if err := os.WriteFile(filepath.Join(dir, name), page, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, page := range map[string]string{"report": b.String(), "compare": cb.String()} {
		if n := strings.Count(page, "<svg"); n < 4 && name == "report" || n < 1 {
			t.Errorf("%s: %d inline SVG plots", name, n)
		}
		// Namespaces (xmlns="http://www.w3.org/...") are not fetched; anything else would be.
		external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|<script|@import|url\(`)
		if m := external.FindString(page); m != "" {
			t.Errorf("%s: HTML refers to an external resource: %q", name, m)
		}
	}
	for _, want := range []string{"cache (fidelity)", "ext4", "python3 train.py", "job=42", "Latency CDF per operation", "host=node2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report HTML lacks %q", want)
		}
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		tr   Trace
		want string
	}{
		{"dropped", Trace{File: "a", Complete: true, Events: 5, Recorded: 5, Dropped: 7}, "7 events were dropped"},
		{"cut short", Trace{File: "a", Complete: true, Events: 5, Recorded: 5, Dropped: 9, Lost: 7, WriteError: "no space left on device"},
			"could not write the trace to the end (no space left on device): its last 7 events were lost (9 dropped in all)"},
		{"damaged", Trace{File: "a", Damage: []string{"truncated"}}, "trace is damaged (truncated)"},
		{"no footer", Trace{File: "a"}, "no footer"},
		{"footer count", Trace{File: "a", Complete: true, Events: 5, Recorded: 9}, "footer counts 9 events but 5 were read"},
		{"blocked", Trace{File: "a", Complete: true, BlockedNs: 2e9}, "waited 2.00s"},
		{"passthrough", Trace{File: "a", Complete: true, Passthrough: true}, "NOT seen"},
		{"kernel cache", Trace{File: "a", Complete: true, Cache: "kernel"}, "page cache absorbed"},
		{"clean", Trace{File: "a", Complete: true, Cache: "none"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := warnings(&Report{Traces: []Trace{tt.tr}})
			if tt.want == "" {
				if len(w) != 0 {
					t.Errorf("warnings %q, want none", w)
				}
				return
			}
			if !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, tt.want) }) {
				t.Errorf("warnings %q lack %q", w, tt.want)
			}
		})
	}
	w := warnings(&Report{Traces: []Trace{{Complete: true, Cache: "none"}, {Complete: true, Cache: "kernel"}}})
	if !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "different fidelity modes") }) {
		t.Errorf("mixed cache modes not flagged: %q", w)
	}
	if _, err := Build(nil, Options{By: "colour"}); err == nil {
		t.Error("bad --by accepted")
	}
}

// TestSameWorkReplayFolded: a recording compared with a replay leaves out the ops replay
// folds by design (getattr and getxattr probes, ioctl), and says so; two replays, or two
// recordings, are still held to every count.
func TestSameWorkReplayFolded(t *testing.T) {
	rec := loadStats(t, "node1.iotap")
	folded := func() *stats.Stats {
		rp := loadStats(t, "replay.iotap")
		for _, op := range ReplayFolded {
			rp.Ops[op].Count = rec.Ops[op].Count/2 + 100 // far outside the tolerance
		}
		return rp
	}
	rp := folded()
	c := Compare([]string{"record", "replay"}, []*stats.Stats{rec, rp}, 0.05)
	if len(c.Mismatches) != 0 {
		t.Errorf("record vs replay refused for folded ops: %v", c.Mismatches)
	}
	if want := []string{"getattr", "getxattr", "ioctl"}; !slices.Equal(c.Excluded, want) || c.ExcludedWhy == "" {
		t.Errorf("excluded %v (%q), want %v with a reason", c.Excluded, c.ExcludedWhy, want)
	}
	var txt bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "NOTE: same-work check of recorded against replayed traces leaves out getattr, getxattr, ioctl") {
		t.Errorf("text output does not say what was left out:\n%s", txt.String())
	}
	// Replay against replay: both fold the same way, every count is checked.
	c = Compare([]string{"replay", "replay'"}, []*stats.Stats{loadStats(t, "replay.iotap"), folded()}, 0.05)
	if len(c.Mismatches) == 0 || len(c.Excluded) != 0 {
		t.Errorf("replay vs replay with different getattr counts: mismatches %v, excluded %v", c.Mismatches, c.Excluded)
	}
	// Different work is still refused against a replay.
	other := loadStats(t, "other-work.iotap")
	if c := Compare([]string{"other", "replay"}, []*stats.Stats{other, folded()}, 0.05); len(c.Mismatches) == 0 {
		t.Error("different work accepted against a replay")
	}
}
