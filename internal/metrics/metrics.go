package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/iotap/iotap/trace"
)

// Info names the recording in the iotap_info metric.
type Info struct {
	Version    string // iotap's
	Kind       string // "mount" or "record"
	Target     string // the traced directory
	MountPoint string // where the layer is mounted
	Trace      string // the trace file (or s3:// URL)
	Cache      string // --cache
}

// Sources are the figures read at each scrape. A nil one is left out of the metrics.
type Sources struct {
	// WriterStats returns the trace writer's running totals (trace.Writer.Stats).
	WriterStats func() trace.WriterStats
	// InFlight returns the requests in flight on the layer's FUSE connection, and whether
	// they could be read.
	InFlight func() (float64, bool)
}

// LatencyBuckets are the classic buckets of iotap_request_duration_seconds: 1, 2.5 and 5
// per decade from 1 µs to 10 s, the span of FUSE request times from a cached getattr to a
// stalled network store.
var LatencyBuckets = []float64{
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// Native-histogram settings of iotap_request_duration_seconds.
const (
	// NativeBucketFactor 1.1 gives schema 3: 8 buckets per power of two, each at most 9 %
	// wider than the one before; a quantile is within about 4.5 %.
	NativeBucketFactor = 1.1
	// NativeMaxBuckets bounds the populated buckets per op: 1 µs to 10 s is 23 powers of
	// two, 186 buckets at schema 3. A histogram spreading wider halves its resolution.
	NativeMaxBuckets = 160
	// NativeMinReset is the shortest time before a histogram past NativeMaxBuckets is
	// reset instead of losing resolution.
	NativeMinReset = time.Hour
	// NativeZeroThreshold: a request timed at under 1 ns (the clock's unit) counts as 0.
	NativeZeroThreshold = 1e-9
)

// Collector holds the metrics of one recording.
type Collector struct {
	reg *prometheus.Registry

	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
	errs     *prometheus.CounterVec
	bytes    *prometheus.CounterVec

	// Owned by the goroutine that calls Observe.
	ops    [trace.NumOps]*opMetrics
	errsBy map[errKey]prometheus.Counter

	procs *procCollector
}

// opMetrics are the series of one op, resolved once.
type opMetrics struct {
	latency  prometheus.Observer
	requests prometheus.Counter
	bytes    prometheus.Counter // nil for ops that move no data
}

type errKey struct {
	op    trace.Op
	errno uint16
}

// New returns a Collector for the recording info names, with the request and process
// metrics registered; Serve or Handler publishes them.
func New(info Info) *Collector {
	c := &Collector{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "iotap_request_duration_seconds",
			Help: "Time of the FUSE requests the layer served, as the trace records it, by operation.",

			Buckets:                         LatencyBuckets,
			NativeHistogramBucketFactor:     NativeBucketFactor,
			NativeHistogramMaxBucketNumber:  NativeMaxBuckets,
			NativeHistogramMinResetDuration: NativeMinReset,
			NativeHistogramZeroThreshold:    NativeZeroThreshold,
		}, []string{"op"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iotap_requests_total",
			Help: "FUSE requests the layer served, failed ones included, by operation.",
		}, []string{"op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iotap_request_errors_total",
			Help: "FUSE requests that returned an error, by operation and errno.",
		}, []string{"op", "errno"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "iotap_data_bytes_total",
			Help: "Bytes moved by successful read, write and copy_file_range requests, by operation.",
		}, []string{"op"}),
		errsBy: map[errKey]prometheus.Counter{},
		procs:  &procCollector{last: map[procKey]procSample{}},
	}
	c.reg.MustRegister(c.latency, c.requests, c.errs, c.bytes, c.procs)
	named := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "iotap_info",
		Help: "The recording: iotap's version, the command, the traced directory, the mount point, the trace and the cache mode.",
		ConstLabels: prometheus.Labels{
			"version": label(info.Version), "kind": label(info.Kind), "target": label(info.Target),
			"mount_point": label(info.MountPoint), "trace": label(info.Trace), "cache": label(info.Cache),
		},
	})
	named.Set(1)
	c.reg.MustRegister(named)
	return c
}

// label makes s a valid label value: Prometheus wants UTF-8, and a path may be any bytes.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Register adds the metrics read from src at each scrape. Call it before serving.
func (c *Collector) Register(src Sources) {
	if src.WriterStats != nil {
		c.reg.MustRegister(&writerCollector{stats: src.WriterStats})
	}
	if src.InFlight != nil {
		c.reg.MustRegister(&inFlightCollector{read: src.InFlight})
	}
}

// Gatherer returns the registry the metrics are gathered from.
func (c *Collector) Gatherer() prometheus.Gatherer { return c.reg }

// Handler serves the metrics in the format the scraper asks for: Prometheus text,
// OpenMetrics, or protobuf (which carries native histograms).
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{
		EnableOpenMetrics:   true,
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	})
}

// Observe accounts a batch of events (a trace.WriterOptions.Observe function, with the
// summary's tally). Calls must not overlap: the trace writer makes them from its one
// encoder goroutine. It takes no lock; see the package documentation for its cost.
func (c *Collector) Observe(evs []trace.Event) {
	var n, moved [trace.NumOps]uint64
	for i := range evs {
		ev := &evs[i]
		if !ev.Op.Valid() {
			continue
		}
		o := c.op(ev.Op)
		// Divided, not multiplied by 1e-9: a request of exactly 1 µs then falls in le=1e-06.
		o.latency.Observe(float64(max(ev.Dur, 0)) / 1e9)
		n[ev.Op]++
		if ev.Errno != 0 {
			c.errCounter(ev.Op, ev.Errno).Inc()
		} else if b := DataBytes(ev); b > 0 {
			moved[ev.Op] += b
		}
	}
	for op := range n {
		if n[op] == 0 {
			continue
		}
		o := c.ops[op]
		o.requests.Add(float64(n[op]))
		if moved[op] > 0 {
			o.bytes.Add(float64(moved[op]))
		}
	}
}

// op returns the series of op, creating them at its first request.
func (c *Collector) op(op trace.Op) *opMetrics {
	if o := c.ops[op]; o != nil {
		return o
	}
	name := op.String()
	o := &opMetrics{latency: c.latency.WithLabelValues(name), requests: c.requests.WithLabelValues(name)}
	if movesData(op) {
		o.bytes = c.bytes.WithLabelValues(name)
	}
	c.ops[op] = o
	return o
}

func (c *Collector) errCounter(op trace.Op, errno uint16) prometheus.Counter {
	k := errKey{op, errno}
	if ctr, ok := c.errsBy[k]; ok {
		return ctr
	}
	ctr := c.errs.WithLabelValues(op.String(), trace.ErrnoName(errno))
	c.errsBy[k] = ctr
	return ctr
}

func movesData(op trace.Op) bool {
	return op == trace.OpRead || op == trace.OpWrite || op == trace.OpCopyFileRange
}

// DataBytes is the bytes a successful event moved: its Ret for read, write and
// copy_file_range, else 0 (as the record summary counts them).
func DataBytes(ev *trace.Event) uint64 {
	if ev.Errno == 0 && ev.Ret > 0 && movesData(ev.Op) {
		return uint64(ev.Ret)
	}
	return 0
}

// writerCollector reads the trace writer's totals once per scrape.
type writerCollector struct{ stats func() trace.WriterStats }

var (
	descEvents  = prometheus.NewDesc("iotap_trace_events_total", "Events the trace writer accepted.", nil, nil)
	descWritten = prometheus.NewDesc("iotap_trace_events_written_total", "Events written to the trace in complete chunks.", nil, nil)
	descDropped = prometheus.NewDesc("iotap_trace_events_dropped_total",
		"Events dropped: the trace buffer was full with --drop-when-full, or a write of the trace failed.", nil, nil)
	descTraceBytes = prometheus.NewDesc("iotap_trace_written_bytes_total", "Bytes written to the trace.", nil, nil)
	descBlocked    = prometheus.NewDesc("iotap_trace_blocked_seconds_total", "Time requests waited for trace buffer space.", nil, nil)
	descInFlight   = prometheus.NewDesc("iotap_requests_in_flight",
		"FUSE requests the kernel has queued for the layer or sent to it and not yet had answered (the connection's waiting count).", nil, nil)
)

func (w *writerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEvents, descWritten, descDropped, descTraceBytes, descBlocked} {
		ch <- d
	}
}

func (w *writerCollector) Collect(ch chan<- prometheus.Metric) {
	st := w.stats()
	ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(st.Events))
	ch <- prometheus.MustNewConstMetric(descWritten, prometheus.CounterValue, float64(st.Written))
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(descTraceBytes, prometheus.CounterValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descBlocked, prometheus.CounterValue, st.Blocked.Seconds())
}

// inFlightCollector reads the requests in flight once per scrape.
type inFlightCollector struct{ read func() (float64, bool) }

func (f *inFlightCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descInFlight }

func (f *inFlightCollector) Collect(ch chan<- prometheus.Metric) {
	if v, ok := f.read(); ok {
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, v)
	}
}

// procCollector keeps the last resource sample of each sampled process.
type procCollector struct {
	mu   sync.Mutex // guards last
	last map[procKey]procSample
}

type procKey struct {
	role trace.SampleRole
	pid  uint32
}

type procSample struct {
	comm string
	p    trace.Sample
}

var (
	procLabels = []string{"role", "comm", "pid"}
	descRSS    = prometheus.NewDesc("iotap_process_resident_memory_bytes",
		"Resident set size of the recorder (role recorder) and of the storage client (role client) at their last sample.", procLabels, nil)
	descCPU = prometheus.NewDesc("iotap_process_cpu_seconds_total",
		"CPU time of the recorder (role recorder) and of the storage client (role client) at their last sample, by mode (user, system).",
		append(procLabels, "mode"), nil)
)

// AddSamples takes a process's resource samples (a procsample.Sink, beside the trace
// writer); the last one is served.
func (c *Collector) AddSamples(s trace.Samples) {
	if len(s.Points) == 0 {
		return
	}
	c.procs.mu.Lock()
	c.procs.last[procKey{s.Role, s.Pid}] = procSample{comm: s.Name, p: s.Points[len(s.Points)-1]}
	c.procs.mu.Unlock()
}

// RoleName is the role label of a sampled process: recorder or client.
func RoleName(r trace.SampleRole) string {
	if r == trace.RoleSelf {
		return "recorder"
	}
	return r.String()
}

func (p *procCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRSS
	ch <- descCPU
}

func (p *procCollector) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.last {
		role, comm, pid := RoleName(k.role), label(s.comm), strconv.FormatUint(uint64(k.pid), 10)
		ch <- prometheus.MustNewConstMetric(descRSS, prometheus.GaugeValue, float64(s.p.RSS), role, comm, pid)
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, s.p.User.Seconds(), role, comm, pid, "user")
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, s.p.Sys.Seconds(), role, comm, pid, "system")
	}
}
