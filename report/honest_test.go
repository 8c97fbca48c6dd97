package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
	"github.com/iotap/iotap/trace/tracetest"
)

// sideTrace is the same small job on a storage whose creates take createNs (failing with
// EACCES when failCreates), whose writes take writeNs, and whose reads return readRet
// bytes: 8 creates, a 64 KiB write to each, a read of each, and a stat that finds
// nothing.
func sideTrace(t testing.TB, fs string, createNs, writeNs int64, failCreates bool, readRet int64) *stats.Stats {
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: fs}, FUSE: trace.FUSEOptions{Cache: "none"}})
	b.At(1, 1e9)
	for i := range 8 {
		name := fmt.Sprintf("f%d", i)
		b.FH++
		fh := b.FH
		b.Ev(1, trace.OpCreate, name, createNs, 1000, func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode = fh, unix.O_RDWR|unix.O_CREAT, unix.S_IFREG|0o644
			if failCreates {
				e.Handle, e.Errno = 0, uint16(syscall.EACCES)
			}
		})
		if failCreates {
			continue
		}
		b.Ev(1, trace.OpWrite, name, writeNs, 1000, func(e *trace.Event) { e.Handle, e.Size, e.Ret = fh, 65536, 65536 })
		b.Ev(1, trace.OpRead, name, 20000, 1000, func(e *trace.Event) { e.Handle, e.Size, e.Ret = fh, 65536, readRet })
		b.Ev(1, trace.OpFlush, name, 2000, 500, func(e *trace.Event) { e.Handle = fh })
		b.Ev(1, trace.OpRelease, name, 1000, 1000, func(e *trace.Event) { e.Handle = fh })
	}
	b.Lookup(1, "missing", syscall.ENOENT, 0, 0)
	return statsOf(t, fs+".iotap", b.Bytes())
}

func callRow(t *testing.T, c *Comparison, name string) CompareCall {
	t.Helper()
	for _, cc := range c.Calls {
		if cc.Call == name {
			return cc
		}
	}
	t.Fatalf("no %s row", name)
	return CompareCall{}
}

// TestHonestRatios: failures are counted by errno and kept out of latency ratios, a row
// whose counts or bytes differ is flagged, reads that returned nothing are not ratioed,
// and the most slower list leaves out rows of negligible time.
func TestHonestRatios(t *testing.T) {
	base := sideTrace(t, "ext4", 10e3, 50e3, false, 65536)
	t.Run("failures", func(t *testing.T) {
		// Every create fails with EACCES, fast: no latency ratio, a failure column.
		fail := sideTrace(t, "fuse.s3fs", 2e3, 50e3, true, 65536)
		c := Compare([]string{"local", "s3fs"}, []*stats.Stats{base, fail}, 1)
		CompareCalls(c, []*stats.Stats{base, fail})
		open := callRow(t, c, "open").Sides[1]
		if open.Errors != 8 || open.Errnos["EACCES"] != 8 || open.Ratio.Mean != 0 || open.Ratio.P50 != 0 ||
			strings.Join(open.Flags, " ") != "all failed" {
			t.Errorf("open: %d errors %v, mean ratio %v, flags %v", open.Errors, open.Errnos, open.Ratio.Mean, open.Flags)
		}
		var txt bytes.Buffer
		if err := WriteCompareText(&txt, c); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^s3fs +8 +8 EACCES \([0-9.k]+/s\) +- .* - +- +- +- +all failed$`).MatchString(txt.String()) {
			t.Errorf("no failure column in:\n%s", txt.String())
		}
	})
	t.Run("counts differ", func(t *testing.T) {
		// Half the creates on the other side (the files of a different job).
		other := sideTrace(t, "ext4", 10e3, 50e3, false, 65536)
		less := stats.New()
		less.Merge(other)
		less.Calls[0].Count -= 4 // open
		c := Compare([]string{"a", "b"}, []*stats.Stats{base, less}, 1)
		CompareCalls(c, []*stats.Stats{base, less})
		open := callRow(t, c, "open").Sides[1]
		if strings.Join(open.Flags, " ") != "≠count" || open.Ratio.Total == 0 || open.Ratio.Count != 0.5 {
			t.Errorf("open: flags %v, ratios %+v", open.Flags, open.Ratio)
		}
		if w := callRow(t, c, "write").Sides[1]; w.Flags != nil || w.Ratio.Total != 0 || w.Ratio.Mean != 1 {
			t.Errorf("write, same counts: flags %v, ratios %+v (no total ratio wanted)", w.Flags, w.Ratio)
		}
	})
	t.Run("reads returned nothing", func(t *testing.T) {
		empty := sideTrace(t, "ext4", 10e3, 50e3, false, 0)
		c := Compare([]string{"a", "b"}, []*stats.Stats{base, empty}, 1)
		CompareCalls(c, []*stats.Stats{base, empty})
		rd := callRow(t, c, "read").Sides[1]
		if rd.Ratio.Mean != 0 || !strings.Contains(strings.Join(rd.Flags, " "), "no data") || !strings.Contains(strings.Join(rd.Flags, " "), "≠bytes") {
			t.Errorf("read of nothing: flags %v, ratios %+v", rd.Flags, rd.Ratio)
		}
		var txt bytes.Buffer
		if err := WriteCompareText(&txt, c); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(txt.String(), "0.00×") {
			t.Errorf("a 0.00× ratio:\n%s", txt.String())
		}
	})
	t.Run("most slower", func(t *testing.T) {
		// Writes 40× slower carry the time; the stat row (<1% of either side) never shows.
		slow := sideTrace(t, "ext4", 10e3, 2e6, false, 65536)
		c := Compare([]string{"a", "b"}, []*stats.Stats{base, slow}, 1)
		CompareCalls(c, []*stats.Stats{base, slow})
		if len(c.SlowerCalls) != 1 || c.SlowerCalls[0].Op != "write" {
			t.Errorf("most slower: %+v", c.SlowerCalls)
		}
	})
}

// TestVerdict: one line per side, first in text and in JSON, naming the I/O time and
// runtime ratios and the calls that account for the difference.
func TestVerdict(t *testing.T) {
	base := sideTrace(t, "ext4", 10e3, 50e3, false, 65536)
	slow := sideTrace(t, "fuse.s3fs", 1e6, 2e6, false, 65536)
	c := Compare([]string{"local", "s3fs"}, []*stats.Stats{base, slow}, 0.05)
	if !CompareCalls(c, []*stats.Stats{base, slow}) {
		t.Fatal("no call view")
	}
	// Call time: open 8×10 µs → 8×1 ms (+7.92 ms), write 8×50 µs → 8×2 ms (+15.6 ms); reads
	// (160 µs), closes (16 µs) and the stat (3 µs) the same: 659 µs → 24.179 ms.
	v := c.Verdicts[0]
	if v.DeltaNs != 7920e3+15600e3 || v.IORatio != 36.69 || len(v.Top) != 2 || v.Top[0].Name != "write" || v.Top[1].Name != "open" || v.Top[0].Share != 0.663 {
		t.Fatalf("verdict %+v", v)
	}
	want := "s3fs: 36.7× the baseline's I/O time (+23.5ms), runtime 34.5×: write +15.6ms (66.3%), open +7.92ms (33.7%)"
	if len(c.Verdict) != 1 || c.Verdict[0] != want {
		t.Errorf("verdict\n got %q\nwant %q", c.Verdict, want)
	}
	var txt, js bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(txt.String(), want+"\n") {
		t.Errorf("text does not open with the verdict:\n%s", txt.String())
	}
	if err := WriteCompareJSON(&js, c); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Verdict  []string `json:"verdict"`
		Verdicts []struct {
			IORatio float64 `json:"io_ratio"`
		} `json:"verdict_figures"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Verdict) != 1 || doc.Verdict[0] != want || doc.Verdicts[0].IORatio != v.IORatio {
		t.Errorf("json verdict %+v", doc)
	}
}

// runTrace is one run of a small job made at wall: 8 creates and 8 writes of writeNs each,
// one after the other, 1 µs apart.
func runTrace(t testing.TB, wall time.Time, writeNs int64) *stats.Stats {
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "replay", WallStart: wall, Target: trace.Target{Path: "/t", FSType: "ext4"}})
	b.At(1, 1e9)
	for i := range 8 {
		name := fmt.Sprintf("f%d", i)
		b.FH++
		fh := b.FH
		b.Ev(1, trace.OpCreate, name, 10e3, 1000, func(e *trace.Event) { e.Handle, e.Mode = fh, unix.S_IFREG|0o644 })
		b.Ev(1, trace.OpWrite, name, writeNs, 1000, func(e *trace.Event) { e.Handle, e.Size, e.Ret = fh, 4096, 4096 })
	}
	return statsOf(t, "run.iotap", b.Bytes())
}

// TestMergedRunsDuration: the runs of replay --repeat merged into one side last as long as
// their own spans added up, not from the first run's start to the last one's end; traces
// made at once (the nodes of one job) count their common time once.
func TestMergedRunsDuration(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	const fastSpan int64 = 8*(10e3+1000+50e3+1000) - 1000 // the last write's end
	const slowSpan int64 = 8*(10e3+1000+100e3+1000) - 1000
	merge := func(runs ...*stats.Stats) *stats.Stats {
		s := stats.New()
		for _, r := range runs {
			s.Merge(r)
		}
		return s
	}
	// Two runs onto each of two targets, interleaved 10 s apart as replay does them.
	fast := merge(runTrace(t, t0, 50e3), runTrace(t, t0.Add(20*time.Second), 50e3))
	slow := merge(runTrace(t, t0.Add(10*time.Second), 100e3), runTrace(t, t0.Add(30*time.Second), 100e3))
	if got := fast.WallNs(); got != 2*fastSpan {
		t.Errorf("two runs: wall %d ns, want %d", got, 2*fastSpan)
	}
	rep, err := Build([]*stats.Stats{fast}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.DurationNs != 2*fastSpan || rep.Total.Job.WallNs != 2*fastSpan {
		t.Errorf("report of two runs: duration %d, job wall %d; want %d", rep.Total.DurationNs, rep.Total.Job.WallNs, 2*fastSpan)
	}
	c := Compare([]string{"fast", "slow"}, []*stats.Stats{fast, slow}, 0.05)
	CompareCalls(c, []*stats.Stats{fast, slow})
	if c.Sides[0].DurationNs != 2*fastSpan || c.Sides[1].DurationNs != 2*slowSpan {
		t.Errorf("sides' durations %d and %d, want %d and %d", c.Sides[0].DurationNs, c.Sides[1].DurationNs, 2*fastSpan, 2*slowSpan)
	}
	if v := c.Verdicts[0]; v.RuntimeNs != 2*slowSpan || v.BaseRuntimeNs != 2*fastSpan {
		t.Errorf("verdict runtimes %d against %d, want %d against %d", v.RuntimeNs, v.BaseRuntimeNs, 2*slowSpan, 2*fastSpan)
	}
	// Two nodes of one job, the second starting 100 µs after the first: their union.
	nodes := merge(runTrace(t, t0, 50e3), runTrace(t, t0.Add(100*time.Microsecond), 50e3))
	if got := nodes.WallNs(); got != fastSpan+100e3 {
		t.Errorf("two overlapping traces: wall %d ns, want %d", got, fastSpan+100e3)
	}
}

// TestVerdictOtherWork: a side whose calls mostly failed where the baseline's succeeded is
// faster because it did nothing: it gets no I/O time or runtime ratio but a warning, and
// its rates count only the calls that succeeded, its failures at their own rate.
func TestVerdictOtherWork(t *testing.T) {
	base := sideTrace(t, "ext4", 10e3, 50e3, false, 65536)
	fail := sideTrace(t, "fuse.s3fs", 2e3, 50e3, true, 65536)
	slow := sideTrace(t, "fuse.s3fs", 1e6, 2e6, false, 65536)
	c := Compare([]string{"local", "broken", "s3fs"}, []*stats.Stats{base, fail, slow}, 0.05)
	if !CompareCalls(c, []*stats.Stats{base, fail, slow}) {
		t.Fatal("no call view")
	}
	v := c.Verdicts[0]
	// The baseline's 8 opens, writes, reads and closes succeed; the side's 8 opens fail.
	if v.IORatio != 0 || v.RuntimeRatio != 0 || len(v.Top) != 0 || v.Differing != 32 || v.Compared != 33 {
		t.Errorf("verdict of the side that failed: %+v", v)
	}
	want := "broken: no ratio, not the same work: 32 of 33 (97.0%) differ from the baseline's in kind or outcome: open +8 failed, −8 succeeded; write −8 succeeded; read −8 succeeded"
	if c.Verdict[0] != want {
		t.Errorf("verdict\n got %q\nwant %q", c.Verdict[0], want)
	}
	if c.Sides[1].CallRatio != 0 || c.Verdicts[1].IORatio == 0 || c.Sides[2].CallRatio == 0 {
		t.Errorf("call ratios %v, %v; other side's verdict %+v", c.Sides[1].CallRatio, c.Sides[2].CallRatio, c.Verdicts[1])
	}
	warned := false
	for _, w := range c.Warnings {
		warned = warned || strings.HasPrefix(w, "broken is not the same work as the baseline: 32 of its calls (97.0%)")
	}
	if !warned {
		t.Errorf("no warning: %q", c.Warnings)
	}
	var txt bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(txt.String(), want+"\n") || !strings.Contains(txt.String(), "WARNING: broken is not the same work") {
		t.Errorf("text:\n%s", txt.String())
	}
	open := callRow(t, c, "open").Sides[1]
	if open.OpsPerS != 0 || open.FailsPerS == 0 {
		t.Errorf("open of the side that failed: %v/s succeeded, %v/s failed", open.OpsPerS, open.FailsPerS)
	}
	// A report of the side: its open rate is of the calls that succeeded.
	rep, err := Build([]*stats.Stats{fail}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Total.Syscalls {
		if r.Call == "open" && (r.OpsPerS != 0 || r.FailsPerS == 0) {
			t.Errorf("report's open row: %v/s, %v/s failed", r.OpsPerS, r.FailsPerS)
		}
	}
	if j := rep.Total.Job; j.FailedOps != 8+1 || j.MetaOps != 0 || j.Wall.MetaOps != 0 {
		t.Errorf("job: %+v", j)
	}
}
