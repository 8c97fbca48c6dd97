package report

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// TestSyscallView: the report leads with the calls the requests fold into, in text and
// JSON; requests fold as the trace shows (walk lookups into opens, flush and release into
// close).
func TestSyscallView(t *testing.T) {
	s := loadStats(t, "node1.iotap")
	r, err := Build([]*stats.Stats{s}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var txt, js, html bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	if i, j := strings.Index(h, "<h2>System calls</h2>"), strings.Index(h, "<h2>FUSE requests"); i < 0 || j < i ||
		!strings.Contains(h, "Latency CDF per system call") || !strings.Contains(h, "<td class=\"l\">getdents</td>") {
		t.Errorf("the HTML report lacks the system call section before the requests, or its plot")
	}
	// The first table after the traces is the per-system-call one.
	text := txt.String()
	if i, j := strings.Index(text, "\ncall "), strings.Index(text, "\nop "); i < 0 || j < 0 || i > j {
		t.Fatalf("the system call table does not come first:\n%s", text)
	}
	var doc struct {
		Total struct {
			Syscalls []struct {
				Call     string  `json:"call"`
				Count    uint64  `json:"count"`
				Requests uint64  `json:"requests"`
				PerCall  float64 `json:"requests_per_call"`
				P99      int64   `json:"p99_ns"`
				TotalNs  int64   `json:"total_ns"`
				MetaNs   *int64  `json:"meta_ns"`
				DataNs   *int64  `json:"data_ns"`
			} `json:"syscalls"`
			Ops []struct {
				Op    string `json:"op"`
				Count uint64 `json:"count"`
			} `json:"ops"`
		} `json:"total"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	calls, ops := map[string]uint64{}, map[string]uint64{}
	var reqs uint64
	for _, c := range doc.Total.Syscalls {
		calls[c.Call] = c.Count
		reqs += c.Requests
		if c.Count > 0 && (c.P99 <= 0 || c.PerCall < 1) {
			t.Errorf("%s: p99 %d, %.2f requests per call", c.Call, c.P99, c.PerCall)
		}
	}
	for _, o := range doc.Total.Ops {
		ops[o.Op] = o.Count
	}
	if calls["open"] != ops["open"]+ops["create"]+ops["opendir"] || calls["close"] != ops["release"]+ops["releasedir"] ||
		calls["read"] != ops["read"] || calls["getdents"] != ops["readdirplus"] {
		t.Errorf("calls %v do not fold requests %v", calls, ops)
	}
	if calls["stat"] >= ops["lookup"]+ops["getattr"] {
		t.Errorf("no lookup folded: %d stat calls from %d lookups and %d getattrs", calls["stat"], ops["lookup"], ops["getattr"])
	}
	if reqs != s.Events {
		t.Errorf("the calls stand for %d requests of %d", reqs, s.Events)
	}
	// Each call's time splits into its metadata and data requests' time: a read is all
	// data, an open (walk lookups folded in) all metadata, the two add up to the total,
	// and the data time of all calls is that of the data requests.
	split := map[string][2]int64{}
	var dataNs int64
	for _, c := range doc.Total.Syscalls {
		if c.MetaNs == nil || c.DataNs == nil || *c.MetaNs < 0 || *c.DataNs < 0 || *c.MetaNs+*c.DataNs != c.TotalNs {
			t.Errorf("%s: meta %v + data %v is not its total %d", c.Call, c.MetaNs, c.DataNs, c.TotalNs)
			continue
		}
		split[c.Call] = [2]int64{*c.MetaNs, *c.DataNs}
		dataNs += *c.DataNs
	}
	if sp := split["read"]; sp[0] != 0 || sp[1] == 0 {
		t.Errorf("read calls: meta %d data %d", sp[0], sp[1])
	}
	if sp := split["open"]; sp[0] == 0 || sp[1] != 0 {
		t.Errorf("open calls: meta %d data %d", sp[0], sp[1])
	}
	var want int64
	for _, op := range []trace.Op{trace.OpRead, trace.OpWrite, trace.OpFsync, trace.OpFsyncdir, trace.OpFallocate, trace.OpCopyFileRange} {
		want += s.Ops[op].TotalNs
	}
	if dataNs != want || want == 0 {
		t.Errorf("the calls' data time %d, the data requests' %d", dataNs, want)
	}
	if !strings.Contains(text, "meta and data: ") {
		t.Errorf("the text report does not say what meta and data are")
	}
	if !strings.Contains(h, "<th>meta</th><th>data</th><th>rate</th>") {
		t.Errorf("the HTML system call table has no meta and data columns")
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, r, "syscalls"); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(csv.String()), "\n"); len(lines) != 1+len(doc.Total.Syscalls) ||
		!strings.HasPrefix(lines[0], "view,call,count,") || !strings.HasPrefix(lines[1], "all,") {
		t.Errorf("csv syscalls table:\n%s", csv.String())
	}
}

// TestCompareCalls: per system call, the same job on another node is the same work and
// another job is not; the golden file shows the view's text.
func TestCompareCalls(t *testing.T) {
	a, b := loadStats(t, "node1.iotap"), loadStats(t, "s3fs.iotap")
	c := Compare([]string{"ext4", "s3fs"}, []*stats.Stats{a, b}, 0.05)
	if !CompareCalls(c, []*stats.Stats{a, b}) {
		t.Fatal("no per-system-call view")
	}
	if c.View != ViewSyscalls || len(c.Mismatches) != 0 || len(c.Calls) == 0 || c.SlowerCalls[0].Op != "read" {
		t.Fatalf("view %s, mismatches %v, %d calls, slower %+v", c.View, c.Mismatches, len(c.Calls), c.SlowerCalls)
	}
	var txt bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "compare-ext4-s3fs-syscalls.txt", txt.Bytes())
	if m := SameCalls(a, loadStats(t, "other-work.iotap"), 0.05); !slices.ContainsFunc(m, func(s string) bool { return strings.HasPrefix(s, "read calls") }) {
		t.Errorf("other work accepted: %v", m)
	}
	if m := SameCalls(a, loadStats(t, "node2.iotap"), 0.05); len(m) != 0 {
		t.Errorf("same work on another node refused: %v", m)
	}
	// A side read without the view leaves the comparison per request.
	plain := stats.New()
	plain.Merge(a)
	plain.Sources[0].Calls = ""
	c = Compare([]string{"ext4", "plain"}, []*stats.Stats{a, plain}, 0.05)
	if CompareCalls(c, []*stats.Stats{a, plain}) || c.View != ViewRequests || c.Calls != nil {
		t.Errorf("compared per call without the view on one side: %s", c.View)
	}
}

// TestSyscallNames: every kind of call has its own name, and the names are the JSON's.
func TestSyscallNames(t *testing.T) {
	seen := map[string]bool{}
	for k := range fold.NumSyscalls {
		n := k.String()
		if n == "" || n == "syscall?" || seen[n] {
			t.Errorf("syscall %d: name %q", k, n)
		}
		seen[n] = true
	}
}

// TestReportBuildsEverywhere: the report and the folding it uses build for macOS and
// Windows, and depend on nothing under replay (the report reads traces, not the replayer;
// the replay engine is Linux-only).
func TestReportBuildsEverywhere(t *testing.T) {
	for _, goos := range []string{"darwin", "windows"} {
		cmd := exec.Command("go", "list", "-deps", ".", "../trace/fold", "../trace/stats")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("go list unavailable: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == "github.com/iotap/iotap/replay" || strings.HasPrefix(dep, "github.com/iotap/iotap/replay/") ||
				strings.HasPrefix(dep, "github.com/hanwen/go-fuse") {
				t.Errorf("GOOS=%s: the report depends on %s", goos, dep)
			}
		}
	}
}

// TestFSName: reports name the storage by its file system type, with the daemon of a
// FUSE mount that has no subtype (MooseFS's mfsmount) and the profile of an s3:// replay.
func TestFSName(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		fstype, source, opts string
		want                 string
	}{
		{"moosefs", "fuse", "mfs#10.254.1.1:9421", "", "fuse (mfs)"},
		{"fuse subtype", "fuse.s3fs", "s3fs", "", "fuse.s3fs"},
		{"fuse without daemon name", "fuse", "/dev/fuse", "", "fuse"},
		{"local", "ext4", "/dev/sda1", "", "ext4"},
		{"s3 replay", "s3", "bucket", "profile=mountpoint", "s3 (mountpoint)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := Trace{Target: Target{FSType: tc.fstype, Source: tc.source, Mount: tc.opts}}
			if got := fsName(&tr); got != tc.want {
				t.Errorf("fsName(%+v) = %q, want %q", tr.Target, got, tc.want)
			}
		})
	}
}
