package metrics

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/iotap/iotap/trace"
)

// goldenEvents returns the events of the repository's small traces of every format version:
// events as the recorder wrote them.
func goldenEvents(t *testing.T) []trace.Event {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/trace/v*-small.iotap")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden traces: %v", err)
	}
	var evs []trace.Event
	for _, p := range paths {
		r, err := trace.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			evs = append(evs, *ev)
		}
		_ = r.Close()
	}
	return evs
}

// spreadEvents returns n events over every op, with times from 0 to 20 s (beyond the
// classic buckets), failures of several errnos, and data sizes: what a long mount sees.
func spreadEvents(n int) []trace.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	errnos := []uint16{2, 13, 17, 39, 95}
	evs := make([]trace.Event, n)
	for i := range evs {
		ev := &evs[i]
		ev.Op = trace.Op(1 + rng.IntN(trace.NumOps-1))
		ev.Tid = uint32(1 + rng.IntN(8))
		// Log-uniform from 1 ns to 20 s, and some exact zeros.
		if rng.IntN(50) > 0 {
			ev.Dur = int64(math.Exp(rng.Float64() * math.Log(20e9)))
		}
		switch {
		case rng.IntN(10) == 0:
			ev.Errno = errnos[rng.IntN(len(errnos))]
			ev.Ret = -1
		case movesData(ev.Op):
			ev.Size = uint32(1 + rng.IntN(1<<20))
			ev.Ret = int64(rng.IntN(int(ev.Size) + 1))
		}
	}
	return evs
}

// want is what the metrics must say about a set of events, computed from the events alone.
type want struct {
	count, errs map[string]uint64 // by op; by op/errno
	bytes       map[string]uint64
	sum         map[string]float64 // seconds
	buckets     map[string][]uint64
}

func expect(evs []trace.Event) want {
	w := want{count: map[string]uint64{}, errs: map[string]uint64{}, bytes: map[string]uint64{},
		sum: map[string]float64{}, buckets: map[string][]uint64{}}
	for _, ev := range evs {
		if !ev.Op.Valid() {
			continue
		}
		op := ev.Op.String()
		w.count[op]++
		sec := float64(max(ev.Dur, 0)) / 1e9
		w.sum[op] += sec
		if w.buckets[op] == nil {
			w.buckets[op] = make([]uint64, len(LatencyBuckets))
		}
		for i, le := range LatencyBuckets {
			if sec <= le {
				w.buckets[op][i]++
			}
		}
		switch {
		case ev.Errno != 0:
			w.errs[op+"/"+trace.ErrnoName(ev.Errno)]++
		case ev.Ret > 0 && (ev.Op == trace.OpRead || ev.Op == trace.OpWrite || ev.Op == trace.OpCopyFileRange):
			w.bytes[op] += uint64(ev.Ret)
		}
	}
	return w
}

// gathered is what a scrape says, by series.
type gathered struct {
	families map[string]*dto.MetricFamily
}

func gather(t *testing.T, c *Collector) gathered {
	t.Helper()
	mfs, err := c.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	g := gathered{families: map[string]*dto.MetricFamily{}}
	for _, mf := range mfs {
		g.families[mf.GetName()] = mf
	}
	return g
}

// byLabels returns the metrics of family name keyed by the values of the labels named, joined with "/".
func (g gathered) byLabels(name string, labels ...string) map[string]*dto.Metric {
	out := map[string]*dto.Metric{}
	mf := g.families[name]
	if mf == nil {
		return out
	}
	for _, m := range mf.GetMetric() {
		var key []string
		for _, l := range labels {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == l {
					key = append(key, lp.GetValue())
				}
			}
		}
		out[strings.Join(key, "/")] = m
	}
	return out
}

// TestObserveMatchesEvents: fed batches of real events, every request metric equals what
// a plain count over the same events gives: requests and bytes per op, errors per op and
// errno, and the histogram's count, sum, classic buckets and native buckets.
func TestObserveMatchesEvents(t *testing.T) {
	golden := goldenEvents(t)
	for _, tc := range []struct {
		name  string
		evs   []trace.Event
		batch int
	}{
		{"golden traces, one batch", golden, len(golden)},
		{"golden traces, batches of 3", golden, 3},
		{"spread, batches of 256", spreadEvents(20000), 256},
		{"spread and golden, batches of 1000", append(spreadEvents(5000), golden...), 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Info{Version: "test"})
			for i := 0; i < len(tc.evs); i += tc.batch {
				c.Observe(tc.evs[i:min(i+tc.batch, len(tc.evs))])
			}
			checkRequests(t, gather(t, c), expect(tc.evs))
		})
	}
}

func checkRequests(t *testing.T, g gathered, w want) {
	t.Helper()
	reqs := g.byLabels("iotap_requests_total", "op")
	hist := g.byLabels("iotap_request_duration_seconds", "op")
	if len(reqs) != len(w.count) || len(hist) != len(w.count) {
		t.Errorf("%d request series and %d histograms, want %d ops", len(reqs), len(hist), len(w.count))
	}
	for op, n := range w.count {
		if got := reqs[op].GetCounter().GetValue(); got != float64(n) {
			t.Errorf("iotap_requests_total{op=%q} = %v, want %d", op, got, n)
		}
		h := hist[op].GetHistogram()
		if h.GetSampleCount() != n {
			t.Errorf("%s: histogram count %d, want %d", op, h.GetSampleCount(), n)
		}
		if got := h.GetSampleSum(); math.Abs(got-w.sum[op]) > 1e-9*math.Max(1, w.sum[op]) {
			t.Errorf("%s: histogram sum %v, want %v", op, got, w.sum[op])
		}
		if len(h.GetBucket()) != len(LatencyBuckets) {
			t.Fatalf("%s: %d classic buckets, want %d", op, len(h.GetBucket()), len(LatencyBuckets))
		}
		for i, b := range h.GetBucket() {
			if b.GetUpperBound() != LatencyBuckets[i] || b.GetCumulativeCount() != w.buckets[op][i] {
				t.Errorf("%s: bucket le=%v count %d, want le=%v count %d", op, b.GetUpperBound(), b.GetCumulativeCount(), LatencyBuckets[i], w.buckets[op][i])
			}
		}
		// The native buckets hold every observation too: the zero bucket and the deltas. The
		// schema is 3 (bucket factor 1.1), or 2 once an op's times spread over more than
		// NativeMaxBuckets buckets at 3.
		if s := h.GetSchema(); s != 3 && s != 2 {
			t.Errorf("%s: native schema %d, want 3 (bucket factor %v) or 2", op, s, NativeBucketFactor)
		}
		native, abs := h.GetZeroCount(), int64(0)
		for _, d := range h.GetPositiveDelta() {
			abs += d
			native += uint64(abs)
		}
		if native != n {
			t.Errorf("%s: native buckets hold %d observations, want %d", op, native, n)
		}
	}
	errs := g.byLabels("iotap_request_errors_total", "op", "errno")
	if len(errs) != len(w.errs) {
		t.Errorf("%d error series, want %d: %v", len(errs), len(w.errs), keys(errs))
	}
	for k, n := range w.errs {
		if got := errs[k].GetCounter().GetValue(); got != float64(n) {
			t.Errorf("iotap_request_errors_total{%s} = %v, want %d", k, got, n)
		}
	}
	moved := g.byLabels("iotap_data_bytes_total", "op")
	for op, n := range w.bytes {
		if got := moved[op].GetCounter().GetValue(); got != float64(n) {
			t.Errorf("iotap_data_bytes_total{op=%q} = %v, want %d", op, got, n)
		}
	}
	for op, m := range moved {
		if w.bytes[op] == 0 && m.GetCounter().GetValue() != 0 {
			t.Errorf("iotap_data_bytes_total{op=%q} = %v, want 0", op, m.GetCounter().GetValue())
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestObserveDoesNotAllocate: once its ops, errnos and native buckets have been seen, a
// batch costs no allocation.
func TestObserveDoesNotAllocate(t *testing.T) {
	c := New(Info{})
	evs := spreadEvents(4096)
	c.Observe(evs)
	if n := testing.AllocsPerRun(20, func() { c.Observe(evs) }); n != 0 {
		t.Errorf("Observe of %d events: %v allocations, want 0", len(evs), n)
	}
}

// TestThroughWriter: a trace writer feeding the collector (as record and mount wire them)
// and read back: the metrics count the trace's events, and the writer's totals are served.
func TestThroughWriter(t *testing.T) {
	c := New(Info{Version: "v", Kind: "mount", Target: "/data\xff", MountPoint: "/mnt", Trace: "/t.iotap", Cache: "none"})
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Kind: "record"}, trace.WriterOptions{Observe: c.Observe, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Register(Sources{WriterStats: w.Stats, InFlight: func() (float64, bool) { return 3, true }})
	evs := spreadEvents(10000)
	for i := range evs {
		w.Append(&evs[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	r, err := trace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var back []trace.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, *ev)
	}
	if len(back) != len(evs) {
		t.Fatalf("trace holds %d events, want %d", len(back), len(evs))
	}
	g := gather(t, c)
	checkRequests(t, g, expect(back))
	st := w.Stats()
	for name, v := range map[string]float64{
		"iotap_trace_events_total":         float64(st.Events),
		"iotap_trace_events_written_total": float64(len(back)),
		"iotap_trace_events_dropped_total": 0,
		"iotap_trace_written_bytes_total":  float64(size),
		"iotap_requests_in_flight":         3,
	} {
		mf := g.families[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			t.Errorf("%s: not served", name)
			continue
		}
		m := mf.GetMetric()[0]
		if got := m.GetCounter().GetValue() + m.GetGauge().GetValue(); got != v {
			t.Errorf("%s = %v, want %v", name, got, v)
		}
	}
	info := g.byLabels("iotap_info", "version", "kind", "target", "mount_point", "trace", "cache")
	if m := info["v/mount//data\uFFFD//mnt//t.iotap/none"]; m == nil || m.GetGauge().GetValue() != 1 {
		t.Errorf("iotap_info: %v", keys(info))
	}
}

// TestProcessSamples: the last sample of each process is served, by role.
func TestProcessSamples(t *testing.T) {
	c := New(Info{})
	c.AddSamples(trace.Samples{Role: trace.RoleClient, Pid: 42, Name: "s3fs", Points: []trace.Sample{
		{RSS: 1 << 20, User: time.Second, Sys: 2 * time.Second},
		{RSS: 3 << 20, User: 1500 * time.Millisecond, Sys: 2500 * time.Millisecond},
	}})
	c.AddSamples(trace.Samples{Role: trace.RoleSelf, Pid: 7, Name: "iotap", Points: []trace.Sample{{RSS: 5 << 20, User: 10 * time.Millisecond}}})
	c.AddSamples(trace.Samples{Role: trace.RoleSelf, Pid: 7, Name: "iotap"}) // no points: nothing changes
	g := gather(t, c)
	rss := g.byLabels("iotap_process_resident_memory_bytes", "role", "comm", "pid")
	cpu := g.byLabels("iotap_process_cpu_seconds_total", "role", "comm", "pid", "mode")
	for k, v := range map[string]float64{"client/s3fs/42": 3 << 20, "recorder/iotap/7": 5 << 20} {
		if got := rss[k].GetGauge().GetValue(); got != v {
			t.Errorf("rss %s = %v, want %v (have %v)", k, got, v, keys(rss))
		}
	}
	for k, v := range map[string]float64{"client/s3fs/42/user": 1.5, "client/s3fs/42/system": 2.5, "recorder/iotap/7/user": 0.01, "recorder/iotap/7/system": 0} {
		if got := cpu[k].GetCounter().GetValue(); got != v {
			t.Errorf("cpu %s = %v, want %v (have %v)", k, got, v, keys(cpu))
		}
	}
}
