package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Schema identifies the JSON report format. It changes when a field changes meaning or
// disappears; new fields may be added within a version.
const Schema = "iotap.report/v1"

// Report is the document every format renders. Its JSON form is the documented schema
// (see doc.go).
type Report struct {
	Schema string `json:"schema"`
	// Verdict is the answer in one line: Total's (ReportVerdict).
	Verdict  string   `json:"verdict"`
	Traces   []Trace  `json:"traces"`
	Warnings []string `json:"warnings,omitempty"`
	// Total covers all traces; Groups (with --by) splits them by host, label value,
	// program or user, and GroupRows sums each group up in a row.
	Total     *View       `json:"total"`
	By        string      `json:"by,omitempty"`
	Groups    []*View     `json:"groups,omitempty"`
	GroupRows []*GroupRow `json:"group_rows,omitempty"`
	// Stragglers are lines naming groups whose I/O stands out from the others (filled in
	// by the caller; see docs/slurm.md), printed under the group views.
	Stragglers []string `json:"stragglers,omitempty"`
}

// PassthroughFiles is trace.PassthroughStats as reports show it.
type PassthroughFiles struct {
	Opens      uint64 `json:"opens"`       // opens whose reads and writes the kernel served and timed
	LayerOpens uint64 `json:"layer_opens"` // opens whose data went through the layer instead
	Refused    string `json:"refused,omitempty"`
	Lost       uint64 `json:"lost,omitempty"` // calls the kernel timed but had no room to record
	// Faults counts the reads and writes that are pages of mapped files page faults
	// brought in or made dirty (no system call, no duration); MapsFull the mmaps whose
	// faults were not recorded (the kernel's table of mapped files was full).
	Faults   uint64 `json:"faults,omitempty"`
	MapsFull uint64 `json:"maps_full,omitempty"`
}

// Trace holds the header facts that change how the numbers must be read.
type Trace struct {
	File         string    `json:"file"`
	Kind         string    `json:"kind"`
	Host         string    `json:"host"`
	Kernel       string    `json:"kernel,omitempty"`
	IotapVersion string    `json:"iotap_version,omitempty"`
	WallStart    time.Time `json:"wall_start"`
	Target       Target    `json:"target"`
	FUSE         FUSE      `json:"fuse"`
	Cache        string    `json:"cache"` // fidelity mode: "none", "kernel", "" (no FUSE layer)
	Passthrough  bool      `json:"passthrough,omitempty"`
	// Data is how reads and writes were recorded (trace.Header.Data): "kernel" when kernel
	// passthrough served them and the kernel timed each call in the application's thread,
	// "layer" or "" when the layer served them; DataNote says why not "kernel".
	Data     string `json:"data,omitempty"`
	DataNote string `json:"data_note,omitempty"`
	// PassthroughFiles counts the opens the kernel served through passthrough and those
	// the layer served instead, with the kernel's first refusal (a "kernel" recording).
	PassthroughFiles *PassthroughFiles `json:"passthrough_files,omitempty"`
	Writeback        bool              `json:"writeback,omitempty"`
	Command          []string          `json:"command,omitempty"`
	Labels           map[string]string `json:"labels,omitempty"`
	Events           uint64            `json:"events"`
	Dropped          uint64            `json:"dropped"`
	Lost             uint64            `json:"lost,omitempty"`        // of the dropped, events lost when a write of the trace failed
	WriteError       string            `json:"write_error,omitempty"` // that failure (the trace ends, closed, before those events)
	BlockedNs        int64             `json:"blocked_ns"`            // time the job waited for the recorder's buffer (from the footer)
	Recorded         uint64            `json:"recorded"`              // events the footer says were written (0 without a footer)
	Complete         bool              `json:"complete"`              // a footer was found: the recorder closed cleanly
	Damage           []string          `json:"damage,omitempty"`
	Cost             *RecordingCost    `json:"recording_cost,omitempty"` // from the footer, when measured
	// What the storage client and iotap used while the trace was made (client.go); nil
	// when they were not sampled.
	Client       *ProcUse   `json:"client,omitempty"`
	OtherClients []*ProcUse `json:"other_clients,omitempty"`
	Iotap        *ProcUse   `json:"iotap,omitempty"`
	// NativeNs is the job's runtime without the recording layer, when the recording keeps
	// one (record --native-first or --native-runtime; label native_runtime_ns).
	NativeNs int64 `json:"native_runtime_ns,omitempty"`
	// Prediction is, for a replay's trace, what the replay predicted for the job on its
	// target (its footer); nil otherwise.
	Prediction *TracePrediction `json:"prediction,omitempty"`
}

// TracePrediction is a replay's prediction for the job on its target, each figure with its
// interval (replay.Prediction, as the replay trace's footer keeps it).
type TracePrediction struct {
	RuntimeNs      int64 `json:"runtime_ns"`
	RuntimeLowNs   int64 `json:"runtime_low_ns"`
	RuntimeHighNs  int64 `json:"runtime_high_ns"`
	IONs           int64 `json:"io_ns"`
	IOLowNs        int64 `json:"io_low_ns"`
	IOHighNs       int64 `json:"io_high_ns"`
	NativeNs       int64 `json:"native_runtime_ns,omitempty"`
	AnchoredNs     int64 `json:"anchored_runtime_ns,omitempty"`
	AnchoredLowNs  int64 `json:"anchored_runtime_low_ns,omitempty"`
	AnchoredHighNs int64 `json:"anchored_runtime_high_ns,omitempty"`
}

// tracePrediction is the TracePrediction of a footer, nil when it holds none.
func tracePrediction(f *trace.Footer) *TracePrediction {
	if f == nil || f.Prediction == (trace.Prediction{}) {
		return nil
	}
	p := f.Prediction
	return &TracePrediction{
		RuntimeNs: p.Runtime, RuntimeLowNs: p.RuntimeLow, RuntimeHighNs: p.RuntimeHigh,
		IONs: p.IO, IOLowNs: p.IOLow, IOHighNs: p.IOHigh,
		NativeNs: p.Native, AnchoredNs: p.Anchored, AnchoredLowNs: p.AnchoredLow, AnchoredHighNs: p.AnchoredHigh,
	}
}

// RecordingCost is what recording cost, as the layer and the trace writer measured it
// while recording (the footer's EncodeCPU and Layer).
type RecordingCost struct {
	Requests    uint64  `json:"requests"`    // requests the layer served
	InLayerNs   int64   `json:"in_layer_ns"` // summed time requests spent in the layer
	SelfNs      int64   `json:"self_ns"`     // of which the layer's own work (timing, attribution, recording)
	SelfPerReq  float64 `json:"self_ns_per_request"`
	SelfShare   float64 `json:"self_share"`    // SelfNs / InLayerNs
	EncodeCPUNs int64   `json:"encode_cpu_ns"` // CPU time of the trace writer's encoder
	Threads     uint64  `json:"threads"`       // caller threads attributed
	ResolveNs   int64   `json:"resolve_ns"`    // time spent in /proc in requests' paths, part of SelfNs
	// With the kernel's proc connector: threads whose process record came after their
	// first event, and threads whose name or executable could not be learnt.
	Connector bool   `json:"proc_connector,omitempty"`
	Late      uint64 `json:"late_attributions,omitempty"`
	Missing   uint64 `json:"missing_attributions,omitempty"`
}

// Summary is the cost in one line.
func (c *RecordingCost) Summary() string {
	s := fmt.Sprintf("%s of the layer's own work per request (%.1f%% of the %s a request spent in the layer)",
		format.Dur(int64(c.SelfPerReq)), 100*c.SelfShare, format.Dur(c.InLayerNs/int64(max(c.Requests, 1))))
	switch {
	case c.Connector:
		s += fmt.Sprintf("; %d threads attributed from the kernel's proc connector, %d late, %d missing", c.Threads, c.Late, c.Missing)
	case c.Threads > 0:
		s += fmt.Sprintf(", of which %s looking up %d new threads in /proc (%s each)",
			format.Dur(c.ResolveNs/int64(max(c.Requests, 1))), c.Threads, format.Dur(c.ResolveNs/int64(c.Threads)))
	}
	if c.EncodeCPUNs > 0 {
		s += "; trace encoder " + format.Dur(c.EncodeCPUNs) + " CPU"
	}
	return s
}

func recordingCost(f *trace.Footer) *RecordingCost {
	if f == nil || f.Layer.Requests == 0 || f.Layer.InLayer <= 0 {
		return nil
	}
	l := f.Layer
	return &RecordingCost{
		Requests: l.Requests, InLayerNs: int64(l.InLayer), SelfNs: int64(l.Self),
		SelfPerReq:  float64(l.Self) / float64(l.Requests),
		SelfShare:   float64(l.Self) / float64(l.InLayer),
		EncodeCPUNs: int64(f.EncodeCPU),
		Threads:     l.Threads,
		ResolveNs:   int64(l.Resolve),
		Connector:   l.Connector,
		Late:        l.Late,
		Missing:     l.Missing,
	}
}

// Target is the traced (or replayed-onto) directory.
type Target struct {
	Path   string `json:"path"`
	FSType string `json:"fs_type"` // "ext4", "fuse.s3fs", "s3" for a replay on S3, ...
	// FSName names the storage as reports show it: FSType, with the daemon of a FUSE mount
	// that has no subtype ("fuse (mfs)" for MooseFS's mfsmount, whose source is
	// "mfs#host:port") and the profile of a replay onto s3:// ("s3 (mountpoint)").
	FSName string `json:"fs_name"`
	Source string `json:"source"`
	Mount  string `json:"mount"`
}

// FUSE holds the tracing layer's settings that shape the requests it saw.
type FUSE struct {
	MaxRead        uint32 `json:"max_read"`  // requests were at most this large
	MaxWrite       uint32 `json:"max_write"` // requests were at most this large
	EntryTimeoutNs int64  `json:"entry_timeout_ns"`
	AttrTimeoutNs  int64  `json:"attr_timeout_ns"`
	DirectIO       bool   `json:"direct_io"`
}

// View is the full set of figures for a set of traces.
type View struct {
	Name       string    `json:"name"`
	Traces     []int     `json:"traces"` // indexes into Report.Traces
	Events     uint64    `json:"events"`
	Dropped    uint64    `json:"dropped"`
	Start      time.Time `json:"start"`
	DurationNs int64     `json:"duration_ns"` // wall time the traces cover (stats.Stats.WallNs)
	TotalNs    int64     `json:"total_ns"`    // job I/O time: sum of all op durations
	// Job is the job's bytes and rates over its wall time and its I/O-active time.
	Job *JobRates `json:"job"`
	// Verdict is the view's answer: its share of I/O, where the I/O time went and the
	// worst tail of a frequent call (report_verdict.go).
	Verdict *ReportVerdict `json:"verdict_figures"`

	// Syscalls is the per-system-call view (syscalls.go): nil when a trace was read
	// without it. CallNs is the calls' summed time; CallNotes say what the view cannot show.
	Syscalls  []*CallRow `json:"syscalls,omitempty"`
	CallNs    int64      `json:"call_ns,omitempty"`
	CallNotes []string   `json:"syscall_notes,omitempty"`

	Ops          []*OpRow      `json:"ops"`
	Classes      []ClassRow    `json:"classes"`
	ReadBySize   []SizeRow     `json:"read_by_size,omitempty"`
	WriteBySize  []SizeRow     `json:"write_by_size,omitempty"`
	TTFB         *Latency      `json:"ttfb,omitempty"`
	Patterns     Patterns      `json:"patterns"`
	Processes    []ProcRow     `json:"processes"`
	FilesByTime  []FileRow     `json:"files_by_time"`
	FilesByBytes []FileRow     `json:"files_by_bytes"`
	DirsByTime   []FileRow     `json:"dirs_by_time"`
	DirsByBytes  []FileRow     `json:"dirs_by_bytes"`
	Unused       UnusedFiles   `json:"opened_unused"`
	Intervals    Intervals     `json:"intervals"`
	Offsets      []OffsetTrack `json:"offsets,omitempty"`
	// InflightIntervals is the in-flight depth over time (inflight.go).
	InflightIntervals *InflightIntervals `json:"inflight_intervals,omitempty"`
	// Commands are the command lines the view's processes ran; AccessSizes its read and
	// write calls by size; HeatFiles and HeatPrograms (total view only) its time and bytes
	// over time by file and by program (views.go).
	Commands      []CommandRow    `json:"commands,omitempty"`
	CommandsTotal int             `json:"commands_total,omitempty"` // distinct command lines, Commands the busiest
	AccessSizes   []AccessSizeRow `json:"access_sizes,omitempty"`
	HeatFiles     *HeatMap        `json:"heat_files,omitempty"`
	HeatPrograms  *HeatMap        `json:"heat_programs,omitempty"`
}

// Latency is a latency summary, in nanoseconds.
type Latency struct {
	Count  uint64  `json:"count"`
	MeanNs float64 `json:"mean_ns"`
	P50    int64   `json:"p50_ns"`
	P90    int64   `json:"p90_ns"`
	P99    int64   `json:"p99_ns"`
	P999   int64   `json:"p99_9_ns"`
	MaxNs  int64   `json:"max_ns"`
}

// Every row of a view, whatever kind it stands for (a kind of FUSE request in ops[], a
// kind of system call in syscalls[]), has Totals, Latency and Pace. Each kind of row
// embeds them among its own fields, where its JSON schema puts them; rows.go builds,
// sorts and prints them for every kind.

// Totals are a row's failures, bytes and time.
type Totals struct {
	Errors  uint64            `json:"errors"`
	Errnos  map[string]uint64 `json:"errnos,omitempty"`
	Bytes   uint64            `json:"bytes"`
	TotalNs int64             `json:"total_ns"`
	Share   float64           `json:"share"` // of the view's total_ns (requests) or call_ns (calls)
}

// Pace is how fast a row's requests or calls were served (their rates, and the
// first-access split of reads) and how their latency spread.
type Pace struct {
	Rates
	AccessSplit
	CDF  []CDFPoint `json:"cdf"`
	Hist []HistBin  `json:"hist"`
}

func (t *Totals) totals() *Totals { return t }
func (l *Latency) lat() *Latency  { return l }
func (p *Pace) pace() *Pace       { return p }

// OpRow is one kind of FUSE request (operation): its class and its in-flight depth
// (inflight.go), beside what every row has.
type OpRow struct {
	Op    string `json:"op"`
	Class string `json:"class"`
	Totals
	Latency
	Pace
	Inflight *InflightRow `json:"inflight,omitempty"`
}

func (r *OpRow) name() string { return r.Op }

// newOpRow is the OpRow of operation k of s, but for what every row has.
func newOpRow(s *stats.Stats, k int) *OpRow {
	op := trace.Op(k)
	return &OpRow{Op: op.String(), Class: stats.ClassName(op.Class()), Inflight: inflightRow(&s.Inflight.Ops[k])}
}

// CDFPoint is one point of a latency distribution: P percent of ops took at most Ns.
type CDFPoint struct {
	P  float64 `json:"p"`
	Ns int64   `json:"ns"`
}

// HistBin counts ops with latency in [LoNs, HiNs).
type HistBin struct {
	LoNs  int64  `json:"lo_ns"`
	HiNs  int64  `json:"hi_ns"`
	Count uint64 `json:"count"`
}

// ClassRow sums one class of operations.
type ClassRow struct {
	Class   string  `json:"class"`
	Count   uint64  `json:"count"`
	TotalNs int64   `json:"total_ns"`
	Share   float64 `json:"share"`
}

// SizeRow is the latency of reads or writes of one request-size bucket.
type SizeRow struct {
	Bucket   string `json:"bucket"`
	MaxBytes uint32 `json:"max_bytes"` // upper bound of the bucket; 0 for the last (open) bucket
	Bytes    uint64 `json:"bytes"`
	Latency
}

// Patterns summarise the access patterns of the whole view.
type Patterns struct {
	SeqReadShare  float64     `json:"seq_read_share"`  // share of read bytes read sequentially
	SeqWriteShare float64     `json:"seq_write_share"` // share of written bytes written sequentially
	SeqReads      uint64      `json:"seq_reads"`
	RandReads     uint64      `json:"rand_reads"`
	SeqWrites     uint64      `json:"seq_writes"`
	RandWrites    uint64      `json:"rand_writes"`
	ReadBytes     uint64      `json:"read_bytes"`
	WriteBytes    uint64      `json:"write_bytes"`
	RereadBytes   uint64      `json:"reread_bytes"`
	RereadApprox  bool        `json:"reread_lower_bound,omitempty"`
	ReadSizes     []SizeCount `json:"read_sizes"`
	WriteSizes    []SizeCount `json:"write_sizes"`
	MetaShare     float64     `json:"meta_share"` // share of job I/O time in metadata ops (meta+open+dir classes)
	DataShare     float64     `json:"data_share"`
}

// SizeCount counts requests of one size bucket.
type SizeCount struct {
	Bucket string `json:"bucket"`
	Count  uint64 `json:"count"`
}

// ProcRow is one process.
type ProcRow struct {
	Host       string   `json:"host,omitempty"`
	Pid        uint32   `json:"pid"`
	Comm       string   `json:"comm"`
	Exe        string   `json:"exe,omitempty"`
	Cmdline    []string `json:"cmdline,omitempty"`
	Ops        uint64   `json:"ops"`
	Errors     uint64   `json:"errors"`
	TotalNs    int64    `json:"total_ns"`
	Share      float64  `json:"share"`
	MetaNs     int64    `json:"meta_ns"`
	DataNs     int64    `json:"data_ns"`
	ReadBytes  uint64   `json:"read_bytes"`
	WriteBytes uint64   `json:"write_bytes"`
}

// FileRow is one file or directory.
type FileRow struct {
	Path         string  `json:"path"`
	Ops          uint64  `json:"ops"`
	Errors       uint64  `json:"errors"`
	TotalNs      int64   `json:"total_ns"`
	Share        float64 `json:"share"`
	MetaNs       int64   `json:"meta_ns"`
	DataNs       int64   `json:"data_ns"`
	ReadOps      uint64  `json:"read_ops"`
	WriteOps     uint64  `json:"write_ops"`
	ReadBytes    uint64  `json:"read_bytes"`
	WriteBytes   uint64  `json:"write_bytes"`
	SeqShare     float64 `json:"seq_share"` // share of data ops that were sequential
	RereadBytes  uint64  `json:"reread_bytes"`
	RereadApprox bool    `json:"reread_lower_bound,omitempty"`
	Opens        uint64  `json:"opens"`
	UnusedOpens  uint64  `json:"unused_opens"`
	// First access against re-access of the file's reads (see stats.FileStats), and the
	// latency of its first read that returned data (time to first byte).
	FirstReads     uint64      `json:"first_access_reads"`
	FirstReadBytes uint64      `json:"first_access_bytes"`
	FirstReadNs    int64       `json:"first_access_ns"`
	Rereads        uint64      `json:"reaccess_reads"`
	RereadOnly     uint64      `json:"reaccess_bytes"`
	RereadNs       int64       `json:"reaccess_ns"`
	FirstByteNs    *int64      `json:"first_byte_ns,omitempty"`
	Extent         int64       `json:"extent"`             // largest offset+length read or written
	Size           int64       `json:"size"`               // file size: the larger of its size attribute and Extent (0 for a directory)
	TopSize        string      `json:"top_size,omitempty"` // most common request-size bucket
	ReadSizes      []SizeCount `json:"read_sizes,omitempty"`
	WriteSizes     []SizeCount `json:"write_sizes,omitempty"`
}

// UnusedFiles lists files opened but never read or written.
type UnusedFiles struct {
	Count int      `json:"count"`
	Paths []string `json:"paths"` // at most --top, sorted
}

// Intervals is the per-interval series.
type Intervals struct {
	Start   time.Time     `json:"start"`
	WidthNs int64         `json:"width_ns"`
	Points  []IntervalRow `json:"points"`
}

// IntervalRow is one interval.
type IntervalRow struct {
	T         float64 `json:"t"` // seconds since Intervals.Start
	Ops       uint64  `json:"ops"`
	Errors    uint64  `json:"errors"`
	OpsPerSec float64 `json:"ops_per_s"`
	ReadMBps  float64 `json:"read_mb_s"` // MB = 10^6 bytes
	WriteMBps float64 `json:"write_mb_s"`
	P99       int64   `json:"p99_ns"` // approximate (stats.LogHist: within 12.5 % from 8 µs up, 1 µs below)
	MaxNs     int64   `json:"max_ns"` // exact
	BusyNs    int64   `json:"busy_ns"`
}

// OffsetTrack is a sampled offset-vs-time series of one of the busiest files.
type OffsetTrack struct {
	Host   string `json:"host,omitempty"`
	Path   string `json:"path"`
	Bytes  uint64 `json:"bytes"`
	Stride int    `json:"stride"` // every stride-th op was kept
	// Points are [t seconds since the view's start, offset, length, 1 if write else 0].
	Points [][4]float64 `json:"points"`
}

// Options control Build.
type Options struct {
	Top int // rows in top-N tables (default 10)
	// By groups the traces by "host" or "label:KEY" (GroupKey), or their events by "comm",
	// "exe" or "uid" (EventGroup: the Stats must have been accumulated with it, as
	// stats.Options.Group, and hold the groups in Stats.Groups); "" for no groups.
	By string
}

// GroupKey returns the group a source belongs to under by ("host" or "label:KEY").
func GroupKey(by string, h *trace.Header) (string, error) {
	switch {
	case by == "":
		return "all", nil
	case by == "host":
		return "host=" + h.Hostname, nil
	case strings.HasPrefix(by, "label:") && len(by) > len("label:"):
		k := by[len("label:"):]
		v, ok := h.Label(k)
		if !ok {
			v = "(none)"
		}
		return k + "=" + v, nil
	}
	return "", fmt.Errorf("report: --by %q: want host, label:KEY, comm, exe or uid", by)
}

// Build makes a report from per-trace Stats (one per input trace, in input order).
func Build(per []*stats.Stats, o Options) (*Report, error) {
	if o.Top <= 0 {
		o.Top = 10
	}
	if err := checkBy(o.By); err != nil {
		return nil, err
	}
	r := &Report{Schema: Schema, By: o.By}
	total := stats.New()
	groups := map[string]*stats.Stats{}
	groupIdx := map[string][]int{}
	var order []string
	var all []int
	for _, s := range per {
		for j := range s.Sources {
			idx := len(r.Traces)
			r.Traces = append(r.Traces, traceInfo(&s.Sources[j]))
			all = append(all, idx)
			if ByEvent(o.By) {
				for k := range s.Groups {
					if _, ok := groupIdx[k]; !ok {
						order = append(order, k)
					}
					groupIdx[k] = append(groupIdx[k], idx)
				}
			} else if o.By != "" {
				k, err := GroupKey(o.By, &s.Sources[j].Header)
				if err != nil {
					return nil, err
				}
				if _, ok := groups[k]; !ok {
					groups[k] = stats.New()
					order = append(order, k)
				}
				groupIdx[k] = append(groupIdx[k], idx)
			}
		}
		total.Merge(s)
		if o.By != "" && !ByEvent(o.By) {
			k, _ := GroupKey(o.By, &s.Sources[0].Header)
			groups[k].Merge(s)
		}
	}
	if ByEvent(o.By) {
		groups = total.Groups // merged from every trace's
	}
	r.Total = buildView("all", total, all, o)
	r.Verdict = r.Total.Verdict.Text
	sort.Strings(order)
	var gs []*stats.Stats
	for _, k := range order {
		r.Groups = append(r.Groups, buildView(k, groups[k], groupIdx[k], o))
		gs = append(gs, groups[k])
	}
	r.GroupRows = groupRows(r.Groups, gs)
	r.Warnings = warnings(r)
	return r, nil
}

func traceInfo(s *stats.Source) Trace {
	h := &s.Header
	t := Trace{
		File:         s.Name,
		Kind:         h.Kind,
		Host:         h.Hostname,
		Kernel:       h.Kernel,
		IotapVersion: h.IotapVersion,
		WallStart:    h.WallStart.UTC(),
		Target:       Target{Path: h.Target.Path, FSType: h.Target.FSType, Source: h.Target.Source, Mount: h.Target.Mount},
		FUSE: FUSE{MaxRead: h.FUSE.MaxRead, MaxWrite: h.FUSE.MaxWrite, EntryTimeoutNs: int64(h.FUSE.EntryTimeout),
			AttrTimeoutNs: int64(h.FUSE.AttrTimeout), DirectIO: h.FUSE.DirectIO},
		Cache:       h.FUSE.Cache,
		Passthrough: h.FUSE.Passthrough,
		Writeback:   h.FUSE.Writeback,
		Command:     h.Command,
		Events:      s.Events,
		Dropped:     s.Dropped(),
		Complete:    s.Footer != nil,
		Recorded:    footerEvents(s),
		BlockedNs:   footerBlocked(s),
		Damage:      s.Damage,
		Cost:        recordingCost(s.Footer),
	}
	if f := s.Footer; f != nil {
		t.Lost, t.WriteError = f.Lost, f.WriteError
	}
	t.Data, t.DataNote = h.Data, h.DataNote
	if f := s.Footer; f != nil && h.Data == trace.DataKernel {
		p := f.Passthrough
		t.PassthroughFiles = &PassthroughFiles{Opens: p.Opens, LayerOpens: p.LayerOpens, Refused: p.Refused, Lost: p.Lost,
			Faults: p.Faults, MapsFull: p.MapsFull}
	}
	t.Prediction = tracePrediction(s.Footer)
	t.Target.FSName = fsName(&t)
	t.Client, t.Iotap, t.OtherClients = traceUse(s)
	if len(h.Labels) > 0 {
		t.Labels = map[string]string{}
		for _, l := range h.Labels {
			t.Labels[l.Key] = l.Value
		}
		if h.Kind == "record" {
			if ns, err := strconv.ParseInt(t.Labels[NativeRuntimeLabel], 10, 64); err == nil && ns > 0 {
				t.NativeNs = ns
			}
		}
	}
	return t
}

// NativeRuntimeLabel is the label a recording keeps the job's native runtime in (ns).
const NativeRuntimeLabel = "native_runtime_ns"

func footerEvents(s *stats.Source) uint64 {
	if s.Footer == nil {
		return 0
	}
	return s.Footer.Events
}

func footerBlocked(s *stats.Source) int64 {
	if s.Footer == nil {
		return 0
	}
	return int64(s.Footer.Blocked)
}

func warnings(r *Report) []string {
	var w []string
	for _, t := range r.Traces {
		if t.Complete && len(t.Damage) == 0 && t.Recorded != t.Events {
			w = append(w, fmt.Sprintf("%s: the footer counts %d events but %d were read", t.File, t.Recorded, t.Events))
		}
		if t.BlockedNs > 0 {
			w = append(w, fmt.Sprintf("%s: the job waited %s for the recorder's buffer: latencies include that wait", t.File, format.Dur(t.BlockedNs)))
		}
		switch {
		case t.Lost > 0:
			w = append(w, fmt.Sprintf("%s: the recorder could not write the trace to the end (%s): its last %d events were lost (%d dropped in all): counts and totals are low, and the job's end is missing",
				t.File, t.WriteError, t.Lost, t.Dropped))
		case t.Dropped > 0:
			w = append(w, fmt.Sprintf("%s: %d events were dropped while recording: counts and totals are low", t.File, t.Dropped))
		}
		if len(t.Damage) > 0 {
			w = append(w, fmt.Sprintf("%s: trace is damaged (%s): figures cover the readable part only", t.File, strings.Join(t.Damage, "; ")))
		} else if !t.Complete {
			w = append(w, fmt.Sprintf("%s: no footer: the recorder did not close the trace cleanly", t.File))
		}
		switch {
		case t.Passthrough && t.Data != trace.DataKernel:
			w = append(w, fmt.Sprintf("%s: kernel passthrough was on: reads and writes were NOT seen", t.File))
		case t.PassthroughFiles != nil && t.PassthroughFiles.LayerOpens > 0:
			p := t.PassthroughFiles
			w = append(w, fmt.Sprintf("%s: %d of %d opens went through the layer, not kernel passthrough (%s): their reads and writes include FUSE round trips",
				t.File, p.LayerOpens, p.Opens+p.LayerOpens, orDash(p.Refused)))
		}
		if p := t.PassthroughFiles; p != nil && p.Faults > 0 {
			w = append(w, fmt.Sprintf("%s: %d reads and writes are pages of mapped files that page faults brought in or made dirty: no system call, and no time (the kernel marks no fault's end)",
				t.File, p.Faults))
		}
		if p := t.PassthroughFiles; p != nil && p.MapsFull > 0 {
			w = append(w, fmt.Sprintf("%s: %d mmaps of files were not followed (the kernel's table of mapped files was full): their page faults are missing", t.File, p.MapsFull))
		}
		if t.Cache == "kernel" {
			w = append(w, fmt.Sprintf("%s: cache=kernel: the page cache absorbed part of the I/O; the trace shows what reached the storage, not every application call", t.File))
		}
		if t.Writeback {
			w = append(w, fmt.Sprintf("%s: writeback cache on: writes arrive coalesced from kernel threads", t.File))
		}
	}
	caches := map[string]bool{}
	for _, t := range r.Traces {
		caches[t.Cache] = true
	}
	if caches["none"] && caches["kernel"] {
		w = append(w, "traces were recorded in different fidelity modes (cache): do not compare their numbers directly")
	}
	return w
}

func share(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// cdfPercentiles are the points of each op's CDF.
var cdfPercentiles = []float64{0, 1, 5, 10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 95, 99, 99.5, 99.9, 99.99, 100}

func latency(h *hdrhistogram.Histogram, count uint64, totalNs, maxNs int64) Latency {
	l := Latency{Count: count, MaxNs: maxNs}
	if count > 0 {
		l.MeanNs = math.Round(float64(totalNs)/float64(count)*10) / 10
	}
	if h != nil && h.TotalCount() > 0 {
		if maxNs == 0 {
			l.MaxNs = h.ValueAtPercentile(100)
		}
		// A bucket's highest equivalent value may exceed the exact maximum; no order
		// statistic can.
		pct := func(p float64) int64 { return min(quantile.Value(h, p), l.MaxNs) }
		l.P50, l.P90, l.P99, l.P999 = pct(50), pct(90), pct(99), pct(99.9)
	}
	return l
}

func cdf(h *hdrhistogram.Histogram, maxNs int64) []CDFPoint {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	out := make([]CDFPoint, 0, len(cdfPercentiles))
	for _, p := range cdfPercentiles {
		out = append(out, CDFPoint{P: p, Ns: min(quantile.Value(h, p), maxNs)})
	}
	return out
}

// histBins groups an HDR histogram into 4 bins per power of two, skipping empty bins.
func histBins(h *hdrhistogram.Histogram) []HistBin {
	if h == nil || h.TotalCount() == 0 {
		return nil
	}
	bin := func(v int64) int {
		if v < 1000 {
			return 0
		}
		return int(math.Floor(4*math.Log2(float64(v)/1000))) + 1
	}
	lo := func(b int) int64 {
		if b == 0 {
			return 0
		}
		return int64(math.Round(1000 * math.Pow(2, float64(b-1)/4)))
	}
	counts := map[int]uint64{}
	for _, bar := range h.Distribution() {
		if bar.Count > 0 {
			counts[bin(bar.From)] += uint64(bar.Count)
		}
	}
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]HistBin, 0, len(keys))
	for _, k := range keys {
		out = append(out, HistBin{LoNs: lo(k), HiNs: lo(k + 1), Count: counts[k]})
	}
	return out
}

func buildView(name string, s *stats.Stats, traces []int, o Options) *View {
	v := &View{Name: name, Traces: traces, Events: s.Events, Dropped: s.Dropped(), TotalNs: s.TotalNs()}
	if st, _ := s.Span(); !st.IsZero() {
		v.Start = st.UTC()
		v.DurationNs = s.WallNs()
	}
	job := &requestAxis
	if s.HasCalls() {
		job = &callAxis
	}
	v.Job = jobRates(s, v.DurationNs, job)
	v.Ops = opRows.build(s)
	for c := range stats.NumClasses {
		cs := s.Classes[c]
		v.Classes = append(v.Classes, ClassRow{Class: stats.ClassName(trace.Class(c)), Count: cs.Count, TotalNs: cs.TotalNs, Share: share(cs.TotalNs, v.TotalNs)})
	}
	v.ReadBySize = sizeRows(&s.ReadSizes)
	v.WriteBySize = sizeRows(&s.WriteSizes)
	if s.TTFB != nil && s.TTFB.TotalCount() > 0 {
		l := latency(s.TTFB, uint64(s.TTFB.TotalCount()), 0, 0)
		l.MeanNs = math.Round(s.TTFB.Mean()*10) / 10
		v.TTFB = &l
	}
	v.Patterns = patterns(s, v)
	v.Processes = procRows(s, v.TotalNs, o.Top)
	byTime := func(f *stats.FileStats) float64 { return float64(f.TotalNs) }
	byBytes := func(f *stats.FileStats) float64 { return float64(f.Bytes()) }
	files := s.NonDirs()
	v.FilesByTime = fileRows(stats.TopFiles(files, o.Top, byTime), v.TotalNs, false)
	v.FilesByBytes = fileRows(stats.TopFiles(files, o.Top, byBytes), v.TotalNs, false)
	dirs := s.Dirs()
	v.DirsByTime = fileRows(stats.TopFiles(dirs, o.Top, byTime), v.TotalNs, true)
	v.DirsByBytes = fileRows(stats.TopFiles(dirs, o.Top, byBytes), v.TotalNs, true)
	unused := s.UnusedFiles()
	v.Unused = UnusedFiles{Count: len(unused), Paths: unused[:min(len(unused), o.Top)]}
	if v.Unused.Paths == nil {
		v.Unused.Paths = []string{}
	}
	v.Intervals = intervals(&s.Series)
	v.InflightIntervals = inflightIntervals(s)
	callView(v, s)
	v.Commands, v.CommandsTotal = commandRows(s, o.Top)
	v.AccessSizes = accessSizeRows(s)
	if name == "all" {
		v.Offsets = offsets(s, v.Start, o.Top)
		v.HeatFiles, v.HeatPrograms = heatMaps(v, s)
	}
	v.Verdict = reportVerdict(v, s)
	return v
}

func sizeRows(ss *[stats.NumSizeBuckets]stats.SizeStats) []SizeRow {
	var out []SizeRow
	for b := range ss {
		x := &ss[b]
		if x.Count == 0 {
			continue
		}
		var maxb uint32
		if b < stats.NumSizeBuckets-1 {
			maxb = 4096 << b
		}
		out = append(out, SizeRow{Bucket: stats.SizeBucketLabel(b), MaxBytes: maxb, Bytes: x.Bytes, Latency: latency(x.Hist, x.Count, x.TotalNs, 0)})
	}
	return out
}

func patterns(s *stats.Stats, v *View) Patterns {
	p := &s.Patterns
	out := Patterns{
		SeqReads: p.SeqReads, RandReads: p.RandReads, SeqWrites: p.SeqWrites, RandWrites: p.RandWrites,
		ReadBytes:   p.SeqReadBytes + p.RandReadBytes,
		WriteBytes:  p.SeqWriteBytes + p.RandWriteBytes,
		RereadBytes: p.RereadBytes, RereadApprox: p.RereadApprox,
	}
	out.SeqReadShare = share(int64(p.SeqReadBytes), int64(out.ReadBytes))
	out.SeqWriteShare = share(int64(p.SeqWriteBytes), int64(out.WriteBytes))
	for b := range stats.NumSizeBuckets {
		if n := p.ReadSizes[b]; n > 0 {
			out.ReadSizes = append(out.ReadSizes, SizeCount{stats.SizeBucketLabel(b), n})
		}
		if n := p.WriteSizes[b]; n > 0 {
			out.WriteSizes = append(out.WriteSizes, SizeCount{stats.SizeBucketLabel(b), n})
		}
	}
	data := s.Classes[trace.ClassData].TotalNs
	out.DataShare = share(data, v.TotalNs)
	if v.TotalNs > 0 {
		out.MetaShare = 1 - out.DataShare
	}
	return out
}

func procRows(s *stats.Stats, total int64, top int) []ProcRow {
	out := make([]ProcRow, 0, len(s.Procs))
	for _, p := range s.Procs {
		out = append(out, ProcRow{
			Host: p.Host, Pid: p.Pid, Comm: procName(p.Pid, p.Comm), Exe: p.Exe, Cmdline: p.Cmdline, Ops: p.Ops, Errors: p.Errors,
			TotalNs: p.TotalNs, Share: share(p.TotalNs, total),
			MetaNs:    p.TotalNs - p.ClassNs[trace.ClassData],
			DataNs:    p.ClassNs[trace.ClassData],
			ReadBytes: p.ReadBytes, WriteBytes: p.WriteBytes,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.TotalNs != b.TotalNs {
			return a.TotalNs > b.TotalNs
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return a.Pid < b.Pid
	})
	return out[:min(len(out), top)]
}

// fileRows makes the rows of a files table (dirs: a directories table, whose rows have no size).
func fileRows(fs []*stats.FileStats, total int64, dirs bool) []FileRow {
	out := make([]FileRow, 0, len(fs))
	for _, f := range fs {
		data := f.SeqReads + f.RandReads + f.SeqWrites + f.RandWrites
		r := FileRow{
			Path: displayPath(f.Path), Ops: f.Ops, Errors: f.Errors, TotalNs: f.TotalNs, Share: share(f.TotalNs, total),
			MetaNs: f.TotalNs - f.ClassNs[trace.ClassData], DataNs: f.ClassNs[trace.ClassData],
			ReadOps: f.ReadOps, WriteOps: f.WriteOps, ReadBytes: f.ReadBytes, WriteBytes: f.WriteBytes,
			SeqShare:    share(int64(f.SeqReads+f.SeqWrites), int64(data)),
			RereadBytes: f.RereadBytes, RereadApprox: f.RereadApprox,
			Opens: f.Opens, UnusedOpens: f.UnusedOpen, Extent: f.MaxEnd,
			FirstReads: f.FirstReads, FirstReadBytes: f.FirstReadBytes, FirstReadNs: f.FirstReadNs,
			Rereads: f.Rereads, RereadOnly: f.RereadOnlyBytes, RereadNs: f.RereadNs,
		}
		if f.FirstByte {
			ns := f.FirstByteNs
			r.FirstByteNs = &ns
		}
		if !dirs {
			r.Size = f.Size()
		}
		var best uint64
		for b := range stats.NumSizeBuckets {
			if n := f.ReadSizes[b] + f.WriteSizes[b]; n > best {
				best, r.TopSize = n, stats.SizeBucketLabel(b)
			}
			if n := f.ReadSizes[b]; n > 0 {
				r.ReadSizes = append(r.ReadSizes, SizeCount{stats.SizeBucketLabel(b), n})
			}
			if n := f.WriteSizes[b]; n > 0 {
				r.WriteSizes = append(r.WriteSizes, SizeCount{stats.SizeBucketLabel(b), n})
			}
		}
		out = append(out, r)
	}
	return out
}

// displayPath shows the traced root as ".".
func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func intervals(se *stats.Series) Intervals {
	out := Intervals{Start: se.Start.UTC(), WidthNs: int64(se.Width), Points: []IntervalRow{}}
	w := se.Width.Seconds()
	if w <= 0 {
		return out
	}
	for i := range se.Slots {
		sl := &se.Slots[i]
		out.Points = append(out.Points, IntervalRow{
			T:         float64(i) * w,
			Ops:       sl.Ops,
			Errors:    sl.Errors,
			OpsPerSec: round3(float64(sl.Ops) / w),
			ReadMBps:  round3(float64(sl.ReadBytes) / 1e6 / w),
			WriteMBps: round3(float64(sl.WriteBytes) / 1e6 / w),
			P99:       min(sl.Lat.Quantile(0.99), sl.MaxNs),
			MaxNs:     sl.MaxNs,
			BusyNs:    sl.BusyNs,
		})
	}
	return out
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func offsets(s *stats.Stats, start time.Time, top int) []OffsetTrack {
	ts := append([]*stats.OffsetTrack(nil), s.Offsets...)
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Bytes != ts[j].Bytes {
			return ts[i].Bytes > ts[j].Bytes
		}
		if ts[i].Host != ts[j].Host {
			return ts[i].Host < ts[j].Host
		}
		return ts[i].Path < ts[j].Path
	})
	ts = ts[:min(len(ts), top, 8)]
	var out []OffsetTrack
	for _, t := range ts {
		shift := t.Start.Sub(start).Seconds()
		ot := OffsetTrack{Host: t.Host, Path: displayPath(t.Path), Bytes: t.Bytes, Stride: max(t.Stride, 1)}
		for _, p := range t.Points {
			w := 0.0
			if p.Write {
				w = 1
			}
			ot.Points = append(ot.Points, [4]float64{round6(shift + float64(p.T)/1e9), float64(p.Off), float64(p.Len), w})
		}
		out = append(out, ot)
	}
	return out
}

func round6(f float64) float64 { return math.Round(f*1e6) / 1e6 }
