package report

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// sampledStats writes a trace of 1 GB read in 100 reads over 10 s, with a client series
// (RSS rising to peak MiB and back, 2 s user + 1 s sys over the run) and an iotap series,
// and aggregates it as report does.
func sampledStats(t *testing.T, kind string, peak uint64, label string) *stats.Stats {
	t.Helper()
	var buf bytes.Buffer
	h := trace.Header{Kind: kind, WallStart: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Origin: 1}
	if label != "" {
		h.Labels = []trace.Label{{Key: "replay.s3_options", Value: label}}
	}
	w, err := trace.NewWriter(&buf, h, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := w.Path(trace.RootPath, "data")
	for i := range 100 {
		w.Append(&trace.Event{Op: trace.OpRead, Path: p, Handle: 1, Start: int64(i) * 1e8, Dur: 5e7, Offset: int64(i) * 1e7, Size: 1e7, Ret: 1e7, Tid: 1, Pid: 1})
	}
	client := trace.Samples{Role: trace.RoleClient, Pid: 4242, Name: "s3fs"}
	self := trace.Samples{Role: trace.RoleSelf, Pid: 7, Name: "iotap"}
	for i := range 101 {
		rss := (20 + peak*uint64(min(i, 100-i))/50) << 20
		client.Points = append(client.Points, trace.Sample{T: int64(i) * 1e8, RSS: rss,
			User: time.Duration(i) * 20 * time.Millisecond, Sys: time.Duration(i) * 10 * time.Millisecond, RChar: uint64(i) * 1e7})
		self.Points = append(self.Points, trace.Sample{T: int64(i) * 1e8, RSS: 30 << 20, User: time.Duration(i) * time.Millisecond})
	}
	w.AddSamples(client)
	w.AddSamples(self)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := trace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	a := stats.NewAccumulator(kind+".iotap", r.Header(), stats.Options{})
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

// TestClientUsage checks the report's client and iotap figures against the series the
// trace holds: peak and mean RSS, CPU time and CPU per GB moved, in JSON, text and HTML.
func TestClientUsage(t *testing.T) {
	r, err := Build([]*stats.Stats{sampledStats(t, "record", 100, "")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Traces []struct {
			Client, Iotap *ProcUse
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	c, s := doc.Traces[0].Client, doc.Traces[0].Iotap
	if c == nil || s == nil {
		t.Fatalf("client %v, iotap %v", c, s)
	}
	if c.Name != "s3fs" || c.Pid != 4242 || c.Role != "client" || c.Samples != 101 || c.IntervalNs != 1e8 {
		t.Errorf("client %+v", c)
	}
	// RSS climbs from 20 to 120 MiB and back; the mean of the 101 steps is 69.5 MiB (to within
	// a byte).
	if c.PeakRSS != 120<<20 || c.MeanRSS < 69<<20 || c.MeanRSS > 71<<20 {
		t.Errorf("client peak %d mean %d", c.PeakRSS, c.MeanRSS)
	}
	if c.CPUUser != 2 || c.CPUSys != 1 || c.MovedBytes != 1e9 || c.CPUPerGB != 3 || c.RChar != 1e9 {
		t.Errorf("client cpu %+v", c)
	}
	if len(c.Series) != 101 || c.Series[100].T != 10 || c.Series[50].RSS != 120<<20 || c.Series[1].CPUs != 0.3 {
		t.Errorf("client series: %d points, last %+v, middle %+v", len(c.Series), c.Series[len(c.Series)-1], c.Series[50])
	}
	if s.Role != "recorder" || s.PeakRSS != 30<<20 || s.CPUUser != 0.1 || c.Exited {
		t.Errorf("iotap %+v", s)
	}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"storage client s3fs (pid 4242): peak RSS 120MiB, mean 69.5MiB; CPU 2.00s user + 1.00s sys = 3.00 CPU-s per GB moved",
		"iotap recorder (pid 7): peak RSS 30.0MiB",
	} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, txt.String())
		}
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	tp, mem, cpu := strings.Index(h, "Throughput over time"), strings.Index(h, "Resident memory over time"), strings.Index(h, "CPU over time")
	if tp < 0 || mem < tp || cpu < mem {
		t.Errorf("HTML figures: throughput at %d, memory at %d, CPU at %d: want memory and CPU under throughput", tp, mem, cpu)
	}
}

// TestCompareUsage puts two replays with different client settings side by side: the
// table shows each side's settings, throughput and peak memory.
func TestCompareUsage(t *testing.T) {
	a := sampledStats(t, "replay", 100, "prefetch_max=8MiB")
	b := sampledStats(t, "replay", 400, "prefetch_max=64MiB")
	c := Compare([]string{"small", "large"}, []*stats.Stats{a, b}, 0.05)
	if c.Sides[1].Use == nil || c.Sides[1].Use.ClientPeakRSS != 420<<20 || c.Sides[1].Use.Settings != "prefetch_max=64MiB" ||
		c.Sides[0].Use.MBps != 100.503 || c.Sides[0].Use.IotapCPUPerGB != 0.1 {
		t.Fatalf("sides %+v %+v", c.Sides[0].Use, c.Sides[1].Use)
	}
	var txt bytes.Buffer
	if err := WriteCompareText(&txt, c); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`large  prefetch_max=64MiB +954MiB +0B +100\.5 +200\.0 .* s3fs +420MiB`).MatchString(txt.String()) {
		t.Errorf("compare text:\n%s", txt.String())
	}
}
