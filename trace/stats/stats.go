package stats

import (
	"math/bits"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/iotap/iotap/internal/quantile"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// Request-size buckets: <=4 KiB, <=8 KiB, ... <=1 MiB, >1 MiB.
const NumSizeBuckets = 10

// SizeBucket returns the request-size bucket of a request of n bytes.
func SizeBucket(n uint32) int {
	if n <= 4096 {
		return 0
	}
	b := bits.Len32(n-1) - 12
	if b >= NumSizeBuckets {
		return NumSizeBuckets - 1
	}
	return b
}

// SizeBucketLabel names bucket b ("<=4K", ..., "<=1M", ">1M").
func SizeBucketLabel(b int) string {
	labels := [NumSizeBuckets]string{"<=4K", "<=8K", "<=16K", "<=32K", "<=64K", "<=128K", "<=256K", "<=512K", "<=1M", ">1M"}
	return labels[b]
}

// NumClasses is the number of trace.Class values.
const NumClasses = 4

// ClassName names a trace.Class ("meta", "data", "open", "dir").
func ClassName(c trace.Class) string {
	switch c {
	case trace.ClassMeta:
		return "meta"
	case trace.ClassData:
		return "data"
	case trace.ClassOpen:
		return "open"
	case trace.ClassDir:
		return "dir"
	}
	return "unknown"
}

// Options tune an Accumulator. The zero value gives the defaults.
type Options struct {
	// Interval is the initial width of the per-interval series. Zero means automatic: 1 s,
	// or for a trace shorter than ShortTrace the finest of 1 s/2^k (k <= 6) giving at most
	// 128 intervals, so that short jobs still get a useful time series.
	Interval        time.Duration
	MaxIntervals    int // series length before the width doubles (default 4096)
	MaxSampledFiles int // files whose offsets are sampled for offset-vs-time (default 16)
	MaxPoints       int // offset samples kept per sampled file (default 2048)
	// Names resolves path ids while events are added (the trace reader): with it the
	// Accumulator folds a recording's requests into system calls for the per-system-call
	// view (Stats.Calls). A replay's trace needs none: its events are calls.
	Names fold.Names
	// Group, when set, splits the events into groups by the name it gives each, and the
	// Accumulator aggregates each group apart as well as the whole (Stats.Groups). It must
	// name an event from its Pid and Uid only: it is asked once per run of events of one
	// process and user.
	Group func(ev *trace.Event) string
	// CallsAside folds the requests into calls in a goroutine of its own, beside the
	// Accumulator's, when there are two CPUs or more (the figures are the same). It suits
	// a caller that aggregates one trace at a time; one that keeps every CPU busy with
	// traces of its own gains nothing from it. The groups of Group fold inline: one
	// goroutine and two batches of events per group would grow with the groups.
	CallsAside bool

	auto bool // Interval was zero
}

// Automatic interval: a fine series (FineInterval wide) is kept next to the 1 s one while
// the trace is shorter than ShortTrace.
const (
	FineInterval = time.Second / 64
	ShortTrace   = 20 * time.Second
	maxAutoSlots = 128
)

func (o Options) withDefaults() Options {
	if o.MaxIntervals <= 0 {
		o.MaxIntervals = 4096
	}
	if o.MaxSampledFiles <= 0 {
		o.MaxSampledFiles = 16
	}
	if o.MaxPoints <= 0 {
		o.MaxPoints = 2048
	}
	return o
}

// OpStats are the figures of one operation.
type OpStats struct {
	Count   uint64
	Errors  uint64
	Errnos  map[uint16]uint64 // count by errno; nil when there were no errors
	Bytes   uint64            // bytes done (Ret) by read, write, copy_file_range, readdir*, *xattr, readlink
	TotalNs int64             // sum of durations
	MaxNs   int64
	Hist    *hdrhistogram.Histogram // nil when Count == 0
	// FailNs and FailHist are the durations of the failed ops (FailHist nil when Errors
	// is 0): Succeeded takes them out.
	FailNs   int64
	FailHist *hdrhistogram.Histogram
}

// fail records the duration of a failed op (its Errors and Errnos are counted apart).
func (o *OpStats) fail(dur int64) {
	o.FailNs += dur
	if o.FailHist == nil {
		o.FailHist = NewHist()
	}
	record(o.FailHist, dur)
}

// Succeeded returns the figures of the ops that succeeded: the count, time and latency
// distribution without the failed ops (no errors, no errnos). MaxNs is the exact
// maximum when nothing failed, else the histogram's (within its precision).
func (o *OpStats) Succeeded() OpStats {
	if o.Errors == 0 {
		return OpStats{Count: o.Count, Bytes: o.Bytes, TotalNs: o.TotalNs, MaxNs: o.MaxNs, Hist: o.Hist}
	}
	s := OpStats{Count: o.Count - min(o.Errors, o.Count), Bytes: o.Bytes, TotalNs: o.TotalNs - o.FailNs}
	if s.Count == 0 || o.Hist == nil {
		return s
	}
	all := o.Hist.Export()
	if o.FailHist != nil {
		for i, n := range o.FailHist.Export().Counts {
			if i < len(all.Counts) {
				all.Counts[i] = max(all.Counts[i]-n, 0)
			}
		}
	}
	s.Hist = hdrhistogram.Import(all)
	s.MaxNs = min(s.Hist.Max(), o.MaxNs)
	return s
}

// MeanNs returns the exact mean duration.
func (o *OpStats) MeanNs() float64 {
	if o.Count == 0 {
		return 0
	}
	return float64(o.TotalNs) / float64(o.Count)
}

// Percentile returns the p-th percentile (0..100) in ns, from the HDR histogram: the
// highest value equivalent to the order statistic of rank ⌈p/100·Count⌉ (at least 1; the
// rule of SQL's percentile_disc, package internal/quantile), capped at the exact maximum.
func (o *OpStats) Percentile(p float64) int64 {
	if o.Hist == nil {
		return 0
	}
	return min(quantile.Value(o.Hist, p), max(o.MaxNs, 0))
}

// Add adds src's figures to o's (to sum kinds of operation or call); src is not modified.
func (o *OpStats) Add(src *OpStats) { o.merge(src) }

func (o *OpStats) merge(src *OpStats) {
	o.Count += src.Count
	o.Errors += src.Errors
	for e, n := range src.Errnos {
		if o.Errnos == nil {
			o.Errnos = map[uint16]uint64{}
		}
		o.Errnos[e] += n
	}
	o.Bytes += src.Bytes
	o.TotalNs += src.TotalNs
	o.MaxNs = max(o.MaxNs, src.MaxNs)
	mergeHist(&o.Hist, src.Hist)
	o.FailNs += src.FailNs
	mergeHist(&o.FailHist, src.FailHist)
}

// AccessStats are the reads of one kind (see Stats.FirstReads): their count, the bytes
// they returned and their latency.
type AccessStats struct {
	Count   uint64
	Bytes   uint64
	TotalNs int64
	MaxNs   int64
	Hist    *hdrhistogram.Histogram // nil when Count == 0
}

// add counts one read, its latency through buf (flushed into a.Hist).
func (a *AccessStats) add(nbytes uint64, dur int64, buf *histBuf) {
	a.Count++
	a.Bytes += nbytes
	a.TotalNs += dur
	a.MaxNs = max(a.MaxNs, dur)
	if a.Hist == nil {
		a.Hist = NewHist()
	}
	buf.add(a.Hist, dur)
}

func (a *AccessStats) merge(o *AccessStats) {
	a.Count += o.Count
	a.Bytes += o.Bytes
	a.TotalNs += o.TotalNs
	a.MaxNs = max(a.MaxNs, o.MaxNs)
	mergeHist(&a.Hist, o.Hist)
}

// ClassStats sum the ops of one trace.Class.
type ClassStats struct {
	Count   uint64
	TotalNs int64
}

// Patterns describe how a file (or a whole job) was read and written.
type Patterns struct {
	SeqReads, RandReads   uint64 // read ops
	SeqWrites, RandWrites uint64 // write ops
	SeqReadBytes          uint64
	RandReadBytes         uint64
	SeqWriteBytes         uint64
	RandWriteBytes        uint64
	RereadBytes           uint64 // bytes read again from an already read range (lower bound if RereadApprox)
	RereadApprox          bool
	ReadSizes             [NumSizeBuckets]uint64 // read ops by requested size
	WriteSizes            [NumSizeBuckets]uint64 // write ops by requested size
}

func (p *Patterns) merge(o *Patterns) {
	p.SeqReads += o.SeqReads
	p.RandReads += o.RandReads
	p.SeqWrites += o.SeqWrites
	p.RandWrites += o.RandWrites
	p.SeqReadBytes += o.SeqReadBytes
	p.RandReadBytes += o.RandReadBytes
	p.SeqWriteBytes += o.SeqWriteBytes
	p.RandWriteBytes += o.RandWriteBytes
	p.RereadBytes += o.RereadBytes
	p.RereadApprox = p.RereadApprox || o.RereadApprox
	for i := range p.ReadSizes {
		p.ReadSizes[i] += o.ReadSizes[i]
		p.WriteSizes[i] += o.WriteSizes[i]
	}
}

// FileStats are the figures of one path (a file or directory).
type FileStats struct {
	Path       string
	IsDir      bool // the path is a directory (dir ops on it, or a reply's mode said so)
	Ops        uint64
	Errors     uint64
	TotalNs    int64             // time of all ops on this path
	ClassNs    [NumClasses]int64 // time by trace.Class
	ReadOps    uint64            // reads (copy_file_range is neither a read nor a write op)
	WriteOps   uint64
	ReadBytes  uint64 // bytes read, and copied from the file by copy_file_range
	WriteBytes uint64 // bytes written, and copied to the file by copy_file_range
	ReadNs     int64
	WriteNs    int64
	Opens      uint64 // successful open/create
	UnusedOpen uint64 // handles released without a read, write or copy_file_range
	MaxEnd     int64  // largest offset+bytes read or written
	// First access against re-access (see Stats.FirstReads): reads that returned bytes
	// never read before from the file in the trace, and reads all of whose bytes were.
	FirstReads, FirstReadBytes uint64
	FirstReadNs                int64
	Rereads, RereadOnlyBytes   uint64
	RereadNs                   int64
	// FirstByteNs is the latency of the file's first read that returned data (time to
	// first byte), when FirstByte.
	FirstByteNs int64
	FirstByte   bool
	SizeAttr    int64 // largest size a lookup, getattr or create reply, or a truncate, gave
	Patterns
	// Heat is the path's time in the storage and the bytes read from and written to it
	// over time.
	Heat Heat
}

// Size returns the largest size the file was seen to have: its size attribute or the end
// of its furthest read or write, whichever is larger.
func (f *FileStats) Size() int64 { return max(f.MaxEnd, f.SizeAttr) }

func (f *FileStats) merge(o *FileStats) {
	f.mergeFigures(o)
	f.Heat.Merge(&o.Heat)
}

// mergeFigures merges o's figures but its heat into f.
func (f *FileStats) mergeFigures(o *FileStats) {
	f.IsDir = f.IsDir || o.IsDir
	f.Ops += o.Ops
	f.Errors += o.Errors
	f.TotalNs += o.TotalNs
	for i := range f.ClassNs {
		f.ClassNs[i] += o.ClassNs[i]
	}
	f.ReadOps += o.ReadOps
	f.WriteOps += o.WriteOps
	f.ReadBytes += o.ReadBytes
	f.WriteBytes += o.WriteBytes
	f.ReadNs += o.ReadNs
	f.WriteNs += o.WriteNs
	f.Opens += o.Opens
	f.UnusedOpen += o.UnusedOpen
	f.MaxEnd = max(f.MaxEnd, o.MaxEnd)
	f.FirstReads += o.FirstReads
	f.FirstReadBytes += o.FirstReadBytes
	f.FirstReadNs += o.FirstReadNs
	f.Rereads += o.Rereads
	f.RereadOnlyBytes += o.RereadOnlyBytes
	f.RereadNs += o.RereadNs
	if o.FirstByte && (!f.FirstByte || o.FirstByteNs < f.FirstByteNs) {
		f.FirstByteNs, f.FirstByte = o.FirstByteNs, true // the same file on several nodes: the quickest
	}
	f.SizeAttr = max(f.SizeAttr, o.SizeAttr)
	f.Patterns.merge(&o.Patterns)
}

// Bytes returns bytes read plus bytes written.
func (f *FileStats) Bytes() uint64 { return f.ReadBytes + f.WriteBytes }

// ProcKey identifies a process across traces.
type ProcKey struct {
	Host string
	Pid  uint32
	Comm string
}

// ProcStats are the figures of one process (thread group).
type ProcStats struct {
	ProcKey
	Exe        string
	Cmdline    []string // its command line, as far as the trace keeps it (nil: unknown)
	Ops        uint64
	Errors     uint64
	TotalNs    int64
	ClassNs    [NumClasses]int64
	ReadBytes  uint64 // read, and copied by copy_file_range
	WriteBytes uint64 // written, and copied by copy_file_range
	// Heat is the process's time in the storage and the bytes it read and wrote over time.
	Heat Heat
}

func (p *ProcStats) merge(o *ProcStats) {
	if p.Exe == "" {
		p.Exe = o.Exe
	}
	if p.Cmdline == nil {
		p.Cmdline = o.Cmdline
	}
	p.Heat.Merge(&o.Heat)
	p.Ops += o.Ops
	p.Errors += o.Errors
	p.TotalNs += o.TotalNs
	for i := range p.ClassNs {
		p.ClassNs[i] += o.ClassNs[i]
	}
	p.ReadBytes += o.ReadBytes
	p.WriteBytes += o.WriteBytes
}

// SizeStats hold the latency of one request-size bucket.
type SizeStats struct {
	Count   uint64
	Bytes   uint64
	TotalNs int64
	Hist    *hdrhistogram.Histogram
}

func (s *SizeStats) merge(o *SizeStats) {
	s.Count += o.Count
	s.Bytes += o.Bytes
	s.TotalNs += o.TotalNs
	mergeHist(&s.Hist, o.Hist)
}

// Source describes one trace that went into a Stats.
type Source struct {
	Name    string       // file name as given
	Header  trace.Header // header of the trace
	Footer  *trace.Footer
	Damage  []string // reader damage (truncated tail, skipped chunks)
	Events  uint64   // events aggregated
	FirstNs int64    // earliest event start (ns since origin)
	LastNs  int64    // latest event end
	// BusyNs is the I/O-active time: the time with at least one event in flight (busy.go),
	// a lower bound when BusyLate events came too late to be placed exactly.
	BusyNs   int64
	BusyLate uint64
	// Unordered counts the events that arrived after the Accumulator's sort window had
	// passed their start time: they were aggregated late (trace.Sorter.Late).
	Unordered uint64
	// Samples are the resource series of the storage client and of iotap sampled while the
	// trace was made (samples.go); Moved is the bytes the trace's reads and writes moved,
	// which CPU time per GB is taken over.
	Samples []trace.Samples
	Moved   uint64
	// Calls says how the per-system-call view was made: CallsFolded, CallsReplay, or ""
	// (no view: a recording added without Options.Names). Fold is what folding did;
	// ExtraFlushes are the flushes a close of one of a file's other descriptors sent (dup,
	// fork): a close counts once per open file, with its last flush.
	Calls        string
	Fold         *fold.Stats
	ExtraFlushes uint64
}

// Dropped returns the number of events the recorder dropped (from the footer).
func (s *Source) Dropped() uint64 {
	if s.Footer == nil {
		return 0
	}
	return s.Footer.Dropped
}

// Stats are the aggregated figures of one or more traces.
type Stats struct {
	Sources    []Source
	Events     uint64
	Ops        [trace.NumOps]OpStats
	Classes    [NumClasses]ClassStats
	ReadSizes  [NumSizeBuckets]SizeStats // read latency by requested size
	WriteSizes [NumSizeBuckets]SizeStats // write latency by requested size
	// TTFB is time to first byte: the latency of each file's first read that returned
	// data (the read's own time, not the application's time between open and read).
	TTFB *hdrhistogram.Histogram
	// FirstReads are the reads that returned bytes never read before from their file in
	// the trace (at least one such byte); Rereads the reads all of whose bytes were read
	// before. Each file keeps at most MaxRanges ranges of bytes read: beyond that the
	// smallest is forgotten and a later read of it counts as a first access
	// (Patterns.RereadApprox). Reads that failed or returned no bytes are in neither.
	FirstReads, Rereads AccessStats
	// CallFirstReads and CallRereads split the read system calls the same way.
	CallFirstReads, CallRereads AccessStats
	// Files are the figures of each path relative to the traced root ("" is the root),
	// keyed by FileKey: a name that stood for a file and later for a directory (or the
	// reverse) has one entry per kind, so a file's figures never go to a directory.
	Files   map[string]*FileStats
	Procs   map[ProcKey]*ProcStats
	Series  Series
	Offsets []*OffsetTrack
	// Patterns sums the access patterns of all files.
	Patterns Patterns
	// Inflight is the in-flight depth per operation and over time (depth.go).
	Inflight Inflight
	// Calls is the per-system-call view, by fold.Syscall (see calls.go).
	Calls [fold.NumSyscalls]CallStats
	// CallPaths are the calls' time in the storage per kind of call and path (the path a
	// call named, or its open file's); AccessSizes count the reads [0] and writes [1] that
	// succeeded by the bytes each moved (AccessSizeOf). Both are of the per-system-call
	// view: empty without it.
	CallPaths   map[CallPath]int64
	AccessSizes [2][NumAccessSizes]AccessSize
	// Groups are the figures of each group of the events when the Accumulator split
	// them (Options.Group), by group name; nil otherwise.
	Groups map[string]*Stats
}

// BusyNs returns the I/O-active time of the sources, summed (traces of several nodes
// overlap in time: their sum is the storage's busy time over all clients).
func (s *Stats) BusyNs() int64 {
	var t int64
	for i := range s.Sources {
		t += s.Sources[i].BusyNs
	}
	return t
}

// FileKey returns the key of Stats.Files for a path of the given kind: the path itself for
// a file, the path and a trailing "/" for a directory.
func FileKey(path string, isDir bool) string {
	if isDir {
		return path + "/"
	}
	return path
}

// TotalNs returns the sum of all op durations (job I/O time).
func (s *Stats) TotalNs() int64 {
	var t int64
	for i := range s.Ops {
		t += s.Ops[i].TotalNs
	}
	return t
}

// Dropped returns the events dropped by the recorders of all sources.
func (s *Stats) Dropped() uint64 {
	var n uint64
	for i := range s.Sources {
		n += s.Sources[i].Dropped()
	}
	return n
}

// Damaged reports whether any source was damaged.
func (s *Stats) Damaged() bool {
	for i := range s.Sources {
		if len(s.Sources[i].Damage) > 0 {
			return true
		}
	}
	return false
}

// New returns an empty Stats, ready to Merge into.
func New() *Stats {
	return &Stats{Files: map[string]*FileStats{}, Procs: map[ProcKey]*ProcStats{}}
}

// Merge adds o into s. o is not modified and shares no mutable state with s afterwards.
func (s *Stats) Merge(o *Stats) {
	if s.Files == nil {
		s.Files = map[string]*FileStats{}
	}
	if s.Procs == nil {
		s.Procs = map[ProcKey]*ProcStats{}
	}
	s.Sources = append(s.Sources, o.Sources...)
	s.Events += o.Events
	for i := range s.Ops {
		s.Ops[i].merge(&o.Ops[i])
	}
	for i := range s.Classes {
		s.Classes[i].Count += o.Classes[i].Count
		s.Classes[i].TotalNs += o.Classes[i].TotalNs
	}
	for i := range s.ReadSizes {
		s.ReadSizes[i].merge(&o.ReadSizes[i])
		s.WriteSizes[i].merge(&o.WriteSizes[i])
	}
	mergeHist(&s.TTFB, o.TTFB)
	s.FirstReads.merge(&o.FirstReads)
	s.Rereads.merge(&o.Rereads)
	s.CallFirstReads.merge(&o.CallFirstReads)
	s.CallRereads.merge(&o.CallRereads)
	for k, f := range o.Files {
		d := s.Files[k]
		if d == nil {
			d = &FileStats{Path: f.Path}
			s.Files[k] = d
		}
		d.merge(f)
	}
	for k, p := range o.Procs {
		d := s.Procs[k]
		if d == nil {
			d = &ProcStats{ProcKey: k}
			s.Procs[k] = d
		}
		d.merge(p)
	}
	s.Series.Merge(&o.Series)
	for _, t := range o.Offsets {
		c := *t
		c.Points = append([]OffsetPoint(nil), t.Points...)
		s.Offsets = append(s.Offsets, &c)
	}
	s.Patterns.merge(&o.Patterns)
	s.Inflight.Merge(&o.Inflight)
	for i := range s.Calls {
		s.Calls[i].merge(&o.Calls[i])
	}
	if len(o.CallPaths) > 0 && s.CallPaths == nil {
		s.CallPaths = make(map[CallPath]int64, len(o.CallPaths))
	}
	for k, ns := range o.CallPaths {
		s.CallPaths[k] += ns
	}
	for d := range s.AccessSizes {
		for b := range s.AccessSizes[d] {
			x, y := &s.AccessSizes[d][b], &o.AccessSizes[d][b]
			x.Count += y.Count
			x.Bytes += y.Bytes
			x.TotalNs += y.TotalNs
		}
	}
	for k, g := range o.Groups {
		if s.Groups == nil {
			s.Groups = map[string]*Stats{}
		}
		d := s.Groups[k]
		if d == nil {
			d = New()
			s.Groups[k] = d
		}
		d.Merge(g)
	}
}
