package legs

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// Source is the name a trace header gives the kernel's measurement (trace.LegsKernel).
const Source = trace.LegsKernel

const (
	// DefaultDrainInterval is how often the ring buffer is drained when it is not filling.
	DefaultDrainInterval = 10 * time.Millisecond
	// DefaultRingBytes is the ring buffer's size: about 150,000 records, the reads and
	// writes of a second and a half of a job making 4 KiB reads from the page cache as
	// fast as it can; the reader is woken when a quarter is used.
	DefaultRingBytes = 16 << 20
	// TableSlots is the number of completed requests whose legs are kept for Fill.
	TableSlots = 1 << 17
	// DefaultMappedFiles is the size of the program's table of mapped files: the files
	// mapped at once whose faults it can follow.
	DefaultMappedFiles = 16384
)

// Options configure Open.
type Options struct {
	// Origin is the trace's Header.Origin (CLOCK_MONOTONIC ns): times are stored relative
	// to it.
	Origin int64
	// DataCalls also times the reads and writes kernel passthrough serves on the mount
	// (handed to the DataSink given to Watch).
	DataCalls bool
	// JobOnly says that only the job reaches the mount: the processes the server's process
	// starts after Watch, and their descendants (a recorder's private mount namespace). The
	// program then resolves the descriptors of the job's calls only.
	JobOnly bool
	// RingBytes is the size of the ring buffer the records go through (a power of two, at
	// least a page; 0: DefaultRingBytes). Records that find it full are lost and counted.
	RingBytes uint32
	// DrainInterval is how often the ring is drained when the program does not say it is
	// filling (0: DefaultDrainInterval).
	DrainInterval time.Duration
	// MappedFiles is the size of the table of mapped files (0: DefaultMappedFiles). Once it
	// holds that many files, all still mapped, a further mmap is counted
	// (Stats.MapsFull) and its faults are not recorded.
	MappedFiles uint32
}

// DataSink takes the events of the calls kernel passthrough served. KernelCall is called
// from the Tracer's drain goroutine, one event at a time, in the order the calls ended on
// each CPU; it must not keep ev.
type DataSink interface {
	KernelCall(ev *trace.Event)
}

// Stats counts what the measuring saw.
type Stats struct {
	Requests  uint64 // request records the kernel wrote
	Calls     uint64 // calls that sent requests
	Lost      uint64 // records the ring buffer had no room for
	Unmatched uint64 // completions of requests whose queueing was not seen
	Filled    uint64 // events given their legs by Fill
	Missing   uint64 // events Fill found no request record for
	Data      uint64 // synchronous reads and writes kernel passthrough served, recorded
	Async     uint64 // asynchronous ones (libaio, io_uring), recorded
	Unseen    uint64 // asynchronous submissions to passthrough files that could not be timed
	LostData  uint64 // of Lost, data calls' and faults' (each an event the trace lacks)
	// Mapped files (with Options.DataCalls, where the kernel has the tracepoints: see
	// MapsUnfollowed): Maps counts the mmaps of passthrough files noted, Faults the records
	// of pages faulted in or made dirty through their mappings, and MapsFull the mmaps the
	// full table of mapped files could not take (their faults are not recorded).
	Maps, Faults, MapsFull uint64
}

// Tracer is the loaded and attached program.
type Tracer struct {
	objs       objects
	maps       string // why mapped files are not followed ("": they are)
	links      []link.Link
	rd         *ringbuf.Reader
	origin     int64
	data       bool
	jobOnly    bool
	drainEvery time.Duration
	stop       chan struct{}
	done       chan struct{}
	closeMu    sync.Once
	unlinked   chan struct{} // closed once Close has detached the programs (nil before Close)

	// The ring is read by the drain goroutine (run), and by Close once it has stopped:
	// rec and ev are theirs. Data calls go to the sink without a lock held, since the
	// sink may wait for the trace writer, whose encoder calls Fill.
	rec  ringbuf.Record
	ev   trace.Event // the event being handed to sink
	sink atomic.Pointer[DataSink]

	mu    sync.Mutex // guards slots, stats
	slots []slot
	stats Stats
}

// objects is the loaded program: the generated maps and variables, and the programs
// the measurement uses (objects.programs; the others are nil).
type objects struct {
	legsMaps
	legsVariables
	legsPrograms
}

// faultTracepoints are the tracepoints the programs that follow the faults of mapped files
// attach to (Linux 6.11 and later have them).
var faultTracepoints = []string{"mm_filemap_fault", "mm_filemap_map_pages", "writeback_dirty_folio"}

func (o *objects) Close() error {
	return _LegsClose(&o.legsMaps, &o.legsPrograms)
}

// slot is one request's legs, in ns since the trace's origin (0: unknown).
type slot struct {
	unique            uint64
	queued, done      int64
	callStart, callEn int64
	runDelay          int64 // 0: unknown, else the run delay plus 1
	woken             int64 // the sender's last wake-up before its call (0: none)
	waker             uint32
	nr                uint16
}

// Open loads the program and attaches it; it measures nothing until Watch names the
// mount.
func Open(o Options) (*Tracer, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("measuring in the kernel needs root")
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, fmt.Errorf("legs: the kernel's BTF: %w", err)
	}
	t := &Tracer{origin: o.Origin, data: o.DataCalls, jobOnly: o.JobOnly, drainEvery: o.DrainInterval,
		stop: make(chan struct{}), done: make(chan struct{})}
	if t.drainEvery <= 0 {
		t.drainEvery = DefaultDrainInterval
	}
	spec, err := loadLegs()
	if err != nil {
		return nil, fmt.Errorf("legs: %w", err)
	}
	ring := uint32(DefaultRingBytes)
	if o.RingBytes != 0 {
		if o.RingBytes < 4096 || o.RingBytes&(o.RingBytes-1) != 0 {
			return nil, fmt.Errorf("legs: ring of %d bytes: a power of two of at least 4096", o.RingBytes)
		}
		ring = o.RingBytes
	}
	spec.Maps[legsMapRing].MaxEntries = ring
	if o.MappedFiles != 0 {
		spec.Maps[legsMapMapped].MaxEntries = o.MappedFiles
	}
	if err := spec.Variables[legsVarRingWake].Set(uint64(ring / 4)); err != nil {
		return nil, fmt.Errorf("legs: %w", err)
	}
	if err := spec.Variables[legsVarPageShift].Set(uint32(bits.TrailingZeros(uint(os.Getpagesize())))); err != nil {
		return nil, fmt.Errorf("legs: %w", err)
	}
	if err := t.load(spec, o); err != nil {
		return nil, err
	}
	rd, err := ringbuf.NewReader(t.objs.Ring)
	if err != nil {
		t.detach()
		return nil, fmt.Errorf("legs: open ring buffer: %w", err)
	}
	t.rd = rd
	t.slots = make([]slot, TableSlots)
	go t.run()
	return t, nil
}

// passthroughKernel reports whether the kernel serves FUSE passthrough (nil), or why not:
// its BTF (spec) names the functions of CONFIG_FUSE_PASSTHROUGH when it does. maps says
// why the faults of mapped files cannot be followed ("": they can): the kernel lacks a
// tracepoint the programs attach to.
func passthroughKernel(spec *btf.Spec) (maps string, err error) {
	var fn *btf.Func
	if err := spec.TypeByName("fuse_passthrough_read_iter", &fn); err != nil {
		return "", errors.New("this kernel has no FUSE passthrough (Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH)")
	}
	for _, tp := range faultTracepoints {
		var td *btf.Typedef
		if err := spec.TypeByName("btf_trace_"+tp, &td); err != nil {
			return "this kernel has no tracepoint " + tp + " (Linux 6.11 and later have it)", nil
		}
	}
	return "", nil
}

// Watch starts measuring the FUSE mount at mountpoint, whose server is the process daemon
// (its threads' requests are the kernel's own, not a caller's). sink takes the calls
// kernel passthrough serves (with Options.DataCalls; nil otherwise).
func (t *Tracer) Watch(mountpoint string, daemon int, sink DataSink) error {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return fmt.Errorf("legs: %w", err)
	}
	if t.data && sink == nil {
		return errors.New("legs: data calls measured without a sink")
	}
	if sink != nil {
		t.sink.Store(&sink)
	}
	// The kernel's dev_t of the FUSE super block (major<<20 | minor): the connection's id.
	dev := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	v := &t.objs.legsVariables
	if err := v.DaemonTgid.Set(uint32(daemon)); err != nil {
		return fmt.Errorf("legs: configure: %w", err)
	}
	if t.data {
		if err := v.DataCalls.Set(uint32(1)); err != nil {
			return fmt.Errorf("legs: configure: %w", err)
		}
	}
	if t.jobOnly {
		if err := v.JobOnly.Set(uint32(1)); err != nil {
			return fmt.Errorf("legs: configure: %w", err)
		}
	}
	if err := v.TargetDev.Set(dev); err != nil {
		return fmt.Errorf("legs: configure: %w", err)
	}
	return nil
}

// run drains the ring buffer every drain interval, and when the program says it is filling,
// until Close.
func (t *Tracer) run() {
	defer close(t.done)
	for {
		select {
		case <-t.stop:
			return
		default:
		}
		// Wait for the first record, or the interval; then take everything there.
		t.rd.SetDeadline(time.Now().Add(t.drainEvery))
		if err := t.rd.ReadInto(&t.rec); err == nil {
			t.apply(t.rec.RawSample)
		}
		t.drain()
	}
}

// drain moves the records in the ring buffer into the table and hands data calls to the
// sink, without waiting.
func (t *Tracer) drain() {
	if t.rd == nil {
		return
	}
	t.rd.SetDeadline(time.Now())
	for t.rd.AvailableBytes() > 0 {
		if err := t.rd.ReadInto(&t.rec); err != nil {
			return
		}
		t.apply(t.rec.RawSample)
	}
}

// record returns b as a record of type R when it is long enough to hold one.
func record[R any](b []byte) *R {
	var r R
	if len(b) < int(unsafe.Sizeof(r)) {
		return nil
	}
	return (*R)(unsafe.Pointer(&b[0]))
}

// apply puts one record into the table, or hands it to the sink.
func (t *Tracer) apply(b []byte) {
	if len(b) < 2 {
		return
	}
	switch legsRecKind(*(*uint16)(unsafe.Pointer(&b[0]))) {
	case legsRecKindREC_REQ:
		if r := record[legsReqRec](b); r != nil {
			t.mu.Lock()
			t.applyReq(r)
			t.mu.Unlock()
		}
	case legsRecKindREC_CALL:
		if r := record[legsCallRec](b); r != nil {
			t.mu.Lock()
			t.applyCall(r)
			t.mu.Unlock()
		}
	case legsRecKindREC_DATA, legsRecKindREC_ASYNC, legsRecKindREC_FAULT:
		if r, sink := record[legsDataRec](b), t.sink.Load(); r != nil && sink != nil {
			t.dataEvent(r, &t.ev)
			(*sink).KernelCall(&t.ev)
		}
	}
}

func (t *Tracer) applyReq(r *legsReqRec) {
	s := &t.slots[(r.Unique>>1)%TableSlots]
	*s = slot{unique: r.Unique, queued: t.rel(r.Queued), done: t.rel(r.Done), callStart: t.rel(r.Enter), callEn: t.rel(r.CallEnd)}
	if r.Enter != 0 {
		s.nr, s.runDelay = r.Nr, int64(r.ThinkRd)
		if r.Woken != 0 {
			s.woken, s.waker = t.rel(r.Woken), r.Waker
		}
	}
}

func (t *Tracer) applyCall(r *legsCallRec) {
	s := &t.slots[(r.Unique>>1)%TableSlots]
	if s.unique == r.Unique {
		s.callEn = t.rel(r.Exit)
	}
}

// dataEvent makes the event of a call kernel passthrough served. The call is its own
// request: Queued and Done are its start and end (no FUSE leg), CallStart its start, and
// CallEnd its end, or for an asynchronous call the return of the call that submitted it.
// A fault record is pages of a mapped file that page faults brought in or made dirty: a
// read or write with trace.MapFault, no system call (CallStart, CallEnd, CallNr 0), and
// no duration.
func (t *Tracer) dataEvent(r *legsDataRec, ev *trace.Event) {
	*ev = trace.Event{
		Op:          trace.OpRead,
		Passthrough: true,
		Node:        r.Node,
		Handle:      r.Fh,
		Offset:      r.Pos,
		Size:        uint32(min(r.Size, 1<<32-1)),
		Tid:         r.Tid,
		Pid:         r.Pid,
		Uid:         r.Uid,
		Gid:         r.Gid,
		CallNr:      r.Nr,
	}
	switch legsDataOp(r.Op) {
	case legsDataOpDATA_WRITE:
		ev.Op = trace.OpWrite
	case legsDataOpDATA_COPY:
		// sendfile or splice between two passed-through files: a copy, as copy_file_range.
		ev.Op = trace.OpCopyFileRange
		ev.Node2, ev.Handle2, ev.Offset2 = r.Node2, r.Fh2, r.Pos2
	}
	if r.Ret < 0 {
		ev.Errno = uint16(min(-r.Ret, 1<<16-1))
	} else {
		ev.Ret = r.Ret
	}
	ev.Start = t.rel(r.Start)
	ev.Dur = max(int64(r.End-r.Start), 0)
	ev.Queued, ev.Done, ev.CallStart = ev.Start, ev.End(), ev.Start
	ev.CallEnd = ev.Done
	switch legsRecKind(r.Kind) {
	case legsRecKindREC_ASYNC:
		ev.CallEnd = t.rel(r.CallEnd)
	case legsRecKindREC_FAULT:
		ev.Flags = trace.MapFault
		ev.CallStart, ev.CallEnd = 0, 0
	}
	ev.RunDelay = int64(r.ThinkRd)
	if r.Woken != 0 {
		ev.WokenAt, ev.Waker = t.rel(r.Woken), r.Waker
	}
}

// rel converts a kernel time to ns since the origin; 0 stays unknown.
func (t *Tracer) rel(ns uint64) int64 {
	if ns == 0 {
		return 0
	}
	return max(int64(ns)-t.origin, 1)
}

// Fill gives each event with a request id the legs measured for it. It runs on the trace
// writer's encoder goroutine (trace.LegFiller).
func (t *Tracer) Fill(evs []trace.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The drain goroutine has taken the records of requests that completed more than a
	// drain interval ago; the writer holds events longer than that (trace.DefaultLegHold).
	for i := range evs {
		ev := &evs[i]
		if ev.Unique == 0 {
			continue
		}
		s := &t.slots[(ev.Unique>>1)%TableSlots]
		if s.unique != ev.Unique {
			t.stats.Missing++
			continue
		}
		ev.Queued, ev.Done, ev.CallStart, ev.CallEnd, ev.CallNr = s.queued, s.done, s.callStart, s.callEn, s.nr
		ev.RunDelay, ev.WokenAt, ev.Waker = s.runDelay, s.woken, s.waker
		t.stats.Filled++
	}
}

// Stats returns the counts so far.
func (t *Tracer) Stats() Stats {
	t.mu.Lock()
	st := t.stats
	t.mu.Unlock()
	if t.objs.Counters == nil {
		return st
	}
	var per []uint64
	for i := legsCounter(0); i < legsCounterCNT_MAX; i++ {
		if err := t.objs.Counters.Lookup(uint32(i), &per); err != nil {
			continue
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		switch i {
		case legsCounterCNT_LOST:
			st.Lost = sum
		case legsCounterCNT_UNMATCHED:
			st.Unmatched = sum
		case legsCounterCNT_REQS:
			st.Requests = sum
		case legsCounterCNT_CALLS:
			st.Calls = sum
		case legsCounterCNT_DATA:
			st.Data = sum
		case legsCounterCNT_ASYNC:
			st.Async = sum
		case legsCounterCNT_UNSEEN:
			st.Unseen = sum
		case legsCounterCNT_LOST_DATA:
			st.LostData = sum
		case legsCounterCNT_MAPS:
			st.Maps = sum
		case legsCounterCNT_FAULTS:
			st.Faults = sum
		case legsCounterCNT_MAPS_FULL:
			st.MapsFull = sum
		}
	}
	return st
}

// Close stops measuring and hands the last records to the table and the sink. Events
// filled after Close keep no legs. The programs are then detached from the kernel in the
// background (Detach waits for that), while the caller closes its trace.
func (t *Tracer) Close() error {
	t.closeMu.Do(func() {
		if t.objs.TargetDev != nil {
			_ = t.objs.TargetDev.Set(uint32(0)) // stop recording new calls
		}
		close(t.stop)
		if t.rd != nil {
			_ = t.rd.Flush() // wake the drain goroutine now rather than at its next interval
		}
		<-t.done
		t.drain()
		t.unlinked = make(chan struct{})
		go func() {
			closeLinks(t.links)
			close(t.unlinked)
		}()
	})
	return nil
}

// Detach detaches the program and frees it; call it after the last Fill.
func (t *Tracer) Detach() {
	_ = t.Close()
	t.detach()
}

func (t *Tracer) detach() {
	if t.unlinked != nil {
		<-t.unlinked
	} else {
		closeLinks(t.links)
	}
	t.links = nil
	if t.rd != nil {
		_ = t.rd.Close()
		t.rd = nil
	}
	_ = t.objs.Close()
}

// MapsUnfollowed says why the faults of mapped files are not recorded ("": they are).
func (t *Tracer) MapsUnfollowed() string {
	if !t.data {
		return "reads and writes are not measured in the kernel"
	}
	return t.maps
}

// LegStats returns what the trace footer keeps of Stats (trace.LegFiller).
func (t *Tracer) LegStats() trace.LegStats {
	st := t.Stats()
	return trace.LegStats{Filled: st.Filled, Missing: st.Missing, Lost: st.Lost}
}

var _ trace.LegFiller = (*Tracer)(nil)

// Available reports whether the kernel's view can be measured on this machine (nil), or
// why not: it loads and attaches the program, then frees it.
func Available(o Options) error {
	t, err := Open(o)
	if err != nil {
		return err
	}
	t.Detach()
	return nil
}
