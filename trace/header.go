package trace

import "time"

// Header describes how and where a trace was made. It is written once, at the start of the
// file, and every report shows the parts that change how its numbers must be read (the
// fidelity mode above all).
type Header struct {
	Version   uint16    // format version; Version5 for files written by this package
	Kind      string    // "record" (traced through the FUSE layer) or "replay"
	WallStart time.Time // wall-clock time (UTC) at Origin
	// Origin is the monotonic reading (ns, CLOCK_MONOTONIC) that event Start times count
	// from. It is only meaningful for comparing traces made on the same boot. Event times
	// are read with Now: CLOCK_MONOTONIC, or the CPU's cycle counter calibrated to it
	// (within microseconds of it; see CalibrateClock).
	Origin       int64
	Hostname     string
	IotapVersion string // iotap version that wrote the trace
	Kernel       string // uname release
	Target       Target
	FUSE         FUSEOptions
	Command      []string // the wrapped job's argv, if any
	Labels       []Label  // --label key=value, Slurm ids, ...
	// Legs says how the FUSE legs outside the recording layer were measured: LegsKernel
	// (every request's, from kernel tracepoints: Event.Queued..CallEnd), LegsProbe (a
	// round trip sampled by a probe, Footer.RoundTrip), or "" (not measured, replays and
	// traces before version 4). LegsNote says why the kernel's were not measured.
	Legs     string
	LegsNote string
	// Data says how the reads and writes of files were recorded: DataKernel (kernel FUSE
	// passthrough served the files' data from the backing files, and the kernel timed each
	// call in the application's thread: Event.Passthrough; a file the kernel refused to pass
	// through was served and timed by the layer, see Footer.Passthrough), DataLayer (every
	// read and write went through the layer), or "" (replays, and traces before version 5,
	// whose data went through the layer). DataNote says why not DataKernel.
	Data     string
	DataNote string
}

// Values of Header.Data.
const (
	DataKernel = "kernel"
	DataLayer  = "layer"
)

// Values of Header.Legs.
const (
	LegsKernel = "kernel"
	LegsProbe  = "probe"
)

// Format versions. This package writes Version5 and reads all five.
const (
	// Version1 is the first format: its events have no Offset2 (it reads as 0).
	Version1 uint16 = 1
	// Version2 adds the Offset2 column (copy_file_range's output offset) to events chunks.
	Version2 uint16 = 2
	// Version3 adds the samples chunk (resource use of the storage client and of iotap over
	// time); its events chunks are as in Version2.
	Version3 uint16 = 3
	// Version4 adds the kernel's view of each request to events chunks (Unique, Queued,
	// Done, CallStart, CallEnd, CallNr) and Legs, LegsNote to the header.
	Version4 uint16 = 4
	// Version5 adds the Passthrough bit to the legs column of events chunks (a read or
	// write kernel passthrough served and the kernel timed) and Data, DataNote to the
	// header.
	Version5 uint16 = 5
)

// writeVersion is the format version the Writer writes.
const writeVersion = Version5

// Target is the traced (or replayed-onto) directory as /proc/self/mountinfo described it.
type Target struct {
	Path   string `json:"path"`    // absolute path the job used
	FSType string `json:"fs_type"` // e.g. "ext4", "fuse.s3fs", "nfs4", "lustre", "tmpfs", "s3" for a replay on S3
	Source string `json:"source"`  // mount source, e.g. "/dev/sda1", "s3fs", "bucket"
	Mount  string `json:"mount"`   // mount point holding Path
}

// FUSEOptions are the settings of the tracing layer that change what it sees.
type FUSEOptions struct {
	// Cache is "none" (direct I/O, 0 s entry/attr timeouts: every application call reaches
	// the layer at its own size), "kernel" (page cache and attribute cache on: the trace
	// shows what reached the backend) or "" when no FUSE layer was involved (replay).
	Cache        string
	MaxRead      uint32
	MaxWrite     uint32
	EntryTimeout time.Duration
	AttrTimeout  time.Duration
	DirectIO     bool
	// Passthrough: kernel passthrough served the data of files opened through the layer
	// (Header.Data says whether the kernel timed those reads and writes).
	Passthrough bool
	Writeback   bool // writeback cache on: writes arrive coalesced, from kernel threads
}

// Label is a free-form key=value pair attached to a trace.
type Label struct {
	Key, Value string
}

// Label returns the value of the first label with key k, and whether there was one.
func (h *Header) Label(k string) (string, bool) {
	for _, l := range h.Labels {
		if l.Key == k {
			return l.Value, true
		}
	}
	return "", false
}

// Footer is written when a writer closes cleanly. A trace without one was cut short (the
// writer was killed); its complete chunks are still readable.
type Footer struct {
	Events    uint64        // events written
	Dropped   uint64        // events not in the trace: the buffer was full in drop mode, or a write failed (Lost)
	Blocked   time.Duration // time producers spent waiting for buffer space in block mode
	Chunks    uint64
	End       int64    // ns since origin of the close
	OpCounts  []uint64 // events per Op, indexed by Op (length NumOps or less)
	Errors    uint64   // recording failures other than drops (e.g. /proc lookups that failed)
	WallClose time.Time

	// The cost of recording, measured while recording; zero when not measured, and in
	// traces written before these fields existed.
	EncodeCPU time.Duration // CPU time of the writer's encoder: encoding, compression, writes
	Layer     LayerCost     // what the recording layer measured (Writer.SetLayerCost)

	// A write of the trace that failed (a full disk): the writer cut the file back to the
	// last chunk written whole, wrote no more events, and closed the trace with this footer.
	// Lost (part of Dropped) counts the events appended after the last chunk that made it.
	// Zero and empty when every write succeeded, and in traces written before these fields
	// existed.
	Lost       uint64
	WriteError string

	// RoundTrip is the recording layer's round trip per request, measured against the
	// mount by the recorder; zero when not measured, and in traces written before it
	// existed.
	RoundTrip RoundTrip

	// Legs counts how the kernel's view of the requests was matched to events (Header.Legs
	// LegsKernel); zero otherwise.
	Legs LegStats

	// Prediction is, in a replay's trace, what the replay predicted for the job on its
	// target; zero in recordings and older traces.
	Prediction Prediction

	// Passthrough counts, in a recording whose data went through kernel passthrough
	// (Header.Data DataKernel), the files it served and those it did not; zero otherwise.
	Passthrough PassthroughStats
}

// PassthroughStats describes a recording's use of kernel passthrough.
type PassthroughStats struct {
	// Opens is the opens of files whose reads and writes the kernel served from the
	// backing file; LayerOpens the opens whose data went through the layer because the
	// kernel refused the backing file (Refused names its first reason).
	Opens, LayerOpens uint64
	Refused           string
	// Calls and Async count the reads and writes the kernel timed (synchronous, and
	// libaio or io_uring ones); Unseen the asynchronous submissions to such files that
	// could not be timed (registered io_uring files), Lost the calls and faults whose
	// record the kernel had no room for (counted in Dropped too).
	Calls, Async, Unseen, Lost uint64
	// Maps counts the mmaps of such files the kernel followed, Faults the events of pages
	// their faults brought in or made dirty (Event.Mapped), and MapsFull the mmaps whose
	// faults were not recorded because the kernel's table of mapped files was full.
	Maps, Faults, MapsFull uint64
}

// Prediction is a think-mode replay's prediction for the job on its target, each figure
// with its interval, in ns (package replay, Prediction).
type Prediction struct {
	Runtime, RuntimeLow, RuntimeHigh int64
	IO, IOLow, IOHigh                int64
	// Native is the job's native runtime the prediction was anchored on (0: none), and
	// Anchored* the anchored runtime.
	Native, Anchored, AnchoredLow, AnchoredHigh int64
}

// LegStats counts how the kernel's view of requests was matched to a recording's events.
type LegStats struct {
	Filled  uint64 // events given the kernel's times of their request
	Missing uint64 // events with a request id the measurement had no times for
	Lost    uint64 // kernel records lost for want of room in the measurement's buffer
}

// LegFiller fills the kernel's view of events (Queued, Done, CallStart, CallEnd, CallNr)
// from their Unique: WriterOptions.Legs. Fill runs on the writer's encoder goroutine.
type LegFiller interface {
	Fill(evs []Event)
	LegStats() LegStats
}

// RoundTrip is the recording layer's round trip per request as a caller sees it: a probe
// process outside the job times system calls that cross the mount (each one request the
// layer answers itself, unrecorded), less the layer's time in its handler. It is what a
// FUSE recording adds to the gap between two requests of a thread, and what replay's think
// mode leaves out (replay.Options.RoundTrip).
type RoundTrip struct {
	Start   time.Duration // median of the calibration before the job started
	Run     time.Duration // median of the samples taken while the job ran (0: none)
	Samples uint64        // samples taken while the job ran
}

// LayerCost is the recording layer's measurement of its own cost in the mount: how much
// of the time requests spent in the layer was the layer's own work rather than the
// backend's and the FUSE bridge's. iotap's layer times a sample of the requests (one in
// 8, by the kernel's request id) and scales the sums to all; /proc reads in requests'
// paths are timed on every request.
type LayerCost struct {
	Requests uint64        // requests served, recorded or filtered out
	InLayer  time.Duration // summed wall time from the layer's entry to the end of its work
	Self     time.Duration // of which the layer's own work: timing, attribution, recording
	Threads  uint64        // caller threads the layer attributed (once per thread and program)
	Resolve  time.Duration // summed time in /proc in requests' paths, part of Self

	// Connector: the layer attributed threads from the kernel's proc connector, not from
	// /proc in requests' paths. Late: threads whose process record was written after their
	// first event (learnt from /proc afterwards). Missing: threads whose name or executable
	// could not be learnt. Zero in traces written before these fields existed.
	Connector     bool
	Late, Missing uint64
}
