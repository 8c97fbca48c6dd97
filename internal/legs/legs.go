// Package legs measures the legs of a FUSE mount's requests that lie outside its server:
// when the kernel queued each request and when it completed it, and the system call of the
// application that sent it, from its entry to its return. A recording stores them in each
// event (trace.Event's Queued, Done, CallStart, CallEnd and CallNr), so that a replay can
// tell what the application spent outside the file system from what FUSE added.
//
// The measuring is a small BPF program (legs.bpf.c, built into legs.bpf.o by gen.go) on the
// raw tracepoints fuse_request_send, fuse_request_end, sched_waking, sys_enter and
// sys_exit. It needs root (CAP_BPF and CAP_PERFMON), a kernel with those tracepoints
// (Linux 6.1 and later have the FUSE ones) and the kernel's BTF (/sys/kernel/btf/vmlinux),
// where Open finds the offsets of the fields the program reads. Open returns an error
// saying which of these is missing; a recorder then falls back to its round-trip probe.
//
// # How records become event fields
//
// The program writes two kinds of records to a ring buffer, without waking the reader:
// a request record when the kernel completes a request (its queue and completion times,
// the sending thread, and the entry time and number of the system call it was sent from),
// and a call record when a system call that sent requests returns (its return time and the
// last request it sent). A goroutine drains the ring every DrainInterval into a table
// indexed by the request's unique id; Fill, called by the trace writer's encoder on events
// that have waited HoldDelay since they were appended, copies each event's entry into it.
// The table holds the last TableSlots requests: an event encoded later than that after its
// request completed finds its slot reused and is counted as missing.
package legs

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

//go:embed legs.bpf.o
var program []byte

// Source is the name a trace header gives the kernel's measurement (trace.LegsKernel).
const Source = trace.LegsKernel

const (
	// DrainInterval is how often the ring buffer is drained.
	DrainInterval = 10 * time.Millisecond
	// TableSlots is the number of completed requests whose legs are kept for Fill (48
	// bytes each).
	TableSlots = 1 << 17
	// recSize is the size of struct rec in legs.bpf.c.
	recSize = 80
)

// Record kinds (enum in legs.bpf.c).
const (
	recReq  = 1
	recCall = 2
)

// Counter indexes (enum in legs.bpf.c).
const (
	cntLost = iota
	cntUnmatched
	cntReqs
	cntCalls
	cntMax
)

// Stats counts what the measuring saw.
type Stats struct {
	Requests  uint64 // request records the kernel wrote
	Calls     uint64 // call records
	Lost      uint64 // records the ring buffer had no room for
	Unmatched uint64 // completions of requests whose queueing was not seen
	Filled    uint64 // events given their legs by Fill
	Missing   uint64 // events Fill found no request record for
}

// Tracer is the loaded and attached program.
type Tracer struct {
	coll    *ebpf.Collection
	links   []link.Link
	rd      *ringbuf.Reader
	origin  int64
	stop    chan struct{}
	done    chan struct{}
	closeMu sync.Once

	mu    sync.Mutex // guards slots, rec, stats
	slots []slot
	rec   ringbuf.Record
	stats Stats
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
// mount. origin is the trace's Header.Origin: times are stored relative to it.
func Open(origin int64) (*Tracer, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("measuring the kernel's legs needs root")
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(program))
	if err != nil {
		return nil, fmt.Errorf("legs: load program: %w", err)
	}
	if err := setOffsets(spec); err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("legs: load program into the kernel: %w", err)
	}
	t := &Tracer{coll: coll, origin: origin, stop: make(chan struct{}), done: make(chan struct{})}
	if err := t.attach(); err != nil {
		t.detach()
		return nil, err
	}
	t.slots = make([]slot, TableSlots)
	go t.run()
	return t, nil
}

// attach attaches the programs and opens the ring buffer.
func (t *Tracer) attach() error {
	for _, tp := range []struct{ prog, name string }{
		{"request_send", "fuse_request_send"},
		{"request_end", "fuse_request_end"},
		{"sched_waking", "sched_waking"},
		{"sys_enter", "sys_enter"},
		{"sys_exit", "sys_exit"},
	} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: t.coll.Programs[tp.prog]})
		if err != nil {
			return fmt.Errorf("legs: attach to raw tracepoint %s: %w", tp.name, err)
		}
		t.links = append(t.links, l)
	}
	rd, err := ringbuf.NewReader(t.coll.Maps["ring"])
	if err != nil {
		return fmt.Errorf("legs: open ring buffer: %w", err)
	}
	t.rd = rd
	return nil
}

// Watch starts measuring the FUSE mount at mountpoint, whose server is the process daemon
// (its threads' requests are the kernel's own, not a caller's).
func (t *Tracer) Watch(mountpoint string, daemon int) error {
	var st unix.Stat_t
	if err := unix.Stat(mountpoint, &st); err != nil {
		return fmt.Errorf("legs: %w", err)
	}
	// The tracepoints give the connection as the kernel's dev_t (major<<20 | minor).
	conn := unix.Major(st.Dev)<<20 | unix.Minor(st.Dev)
	var c [8]byte
	binary.LittleEndian.PutUint32(c[0:], conn)
	binary.LittleEndian.PutUint32(c[4:], uint32(daemon))
	if err := t.coll.Maps["config"].Put(uint32(0), c[:]); err != nil {
		return fmt.Errorf("legs: configure: %w", err)
	}
	return nil
}

// run drains the ring buffer every DrainInterval until Close.
func (t *Tracer) run() {
	defer close(t.done)
	tk := time.NewTicker(DrainInterval)
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
			t.mu.Lock()
			t.drain()
			t.mu.Unlock()
		}
	}
}

// drain moves every record in the ring buffer into the table. t.mu is held.
func (t *Tracer) drain() {
	if t.rd == nil || t.rd.AvailableBytes() == 0 {
		return
	}
	t.rd.SetDeadline(time.Now()) // never wait: take what is there
	for {
		if err := t.rd.ReadInto(&t.rec); err != nil {
			return
		}
		t.apply(t.rec.RawSample)
	}
}

// apply puts one record into the table. t.mu is held.
func (t *Tracer) apply(b []byte) {
	if len(b) < recSize {
		return
	}
	le := binary.LittleEndian
	kind := le.Uint16(b[0:])
	nr := le.Uint16(b[2:])
	unique := le.Uint64(b[8:])
	t0, t1, t2 := int64(le.Uint64(b[16:])), int64(le.Uint64(b[24:])), int64(le.Uint64(b[32:]))
	t3, t4 := int64(le.Uint64(b[48:])), int64(le.Uint64(b[56:]))
	t5, waker := int64(le.Uint64(b[64:])), le.Uint32(b[72:])
	s := &t.slots[(unique>>1)%TableSlots]
	switch kind {
	case recReq:
		*s = slot{unique: unique, queued: t.rel(t0), done: t.rel(t1), callStart: t.rel(t2), callEn: t.rel(t4)}
		if t2 != 0 {
			s.nr, s.runDelay = nr, t3
			if t5 != 0 {
				s.woken, s.waker = t.rel(t5), waker
			}
		}
	case recCall:
		if s.unique == unique {
			s.callEn = t.rel(t1)
		}
	}
}

// rel converts a kernel time to ns since the origin; 0 stays unknown.
func (t *Tracer) rel(ns int64) int64 {
	if ns == 0 {
		return 0
	}
	return max(ns-t.origin, 1)
}

// Fill gives each event with a request id the legs measured for it. It runs on the trace
// writer's encoder goroutine (trace.LegFiller).
func (t *Tracer) Fill(evs []trace.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drain()
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
	var per []uint64
	for i := uint32(0); i < cntMax; i++ {
		if err := t.coll.Maps["counters"].Lookup(i, &per); err != nil {
			continue
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		switch i {
		case cntLost:
			st.Lost = sum
		case cntUnmatched:
			st.Unmatched = sum
		case cntReqs:
			st.Requests = sum
		case cntCalls:
			st.Calls = sum
		}
	}
	return st
}

// Close stops measuring and frees the program. Events filled after Close keep no legs.
func (t *Tracer) Close() error {
	t.closeMu.Do(func() {
		close(t.stop)
		<-t.done
		t.mu.Lock()
		t.drain()
		t.mu.Unlock()
	})
	return nil
}

// Detach detaches the program and frees it; call it after the last Fill.
func (t *Tracer) Detach() {
	_ = t.Close()
	t.detach()
}

func (t *Tracer) detach() {
	for _, l := range t.links {
		_ = l.Close()
	}
	t.links = nil
	if t.rd != nil {
		_ = t.rd.Close()
		t.rd = nil
	}
	if t.coll != nil {
		t.coll.Close()
		t.coll = nil
	}
}

// offsets are the kernel structures' fields the program reads: its constant, and the path
// of struct and member names to the field. The run delay is optional: without it the
// program measures everything else.
var offsets = []struct {
	name     string
	path     []string
	optional bool
}{
	{"req_unique_off", []string{"fuse_req", "in", "h", "unique"}, false},
	{"req_opcode_off", []string{"fuse_req", "in", "h", "opcode"}, false},
	{"req_error_off", []string{"fuse_req", "out", "h", "error"}, false},
	{"req_fm_off", []string{"fuse_req", "fm"}, false},
	{"fm_fc_off", []string{"fuse_mount", "fc"}, false},
	{"fc_dev_off", []string{"fuse_conn", "dev"}, false},
	{"task_pid_off", []string{"task_struct", "pid"}, false},
	{"run_delay_off", []string{"task_struct", "sched_info", "run_delay"}, true},
}

// setOffsets finds each field of offsets in the kernel's BTF and sets the program's
// constant to it.
func setOffsets(spec *ebpf.CollectionSpec) error {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("legs: the kernel's BTF: %w", err)
	}
	for _, o := range offsets {
		off, err := fieldOffset(kernel, o.path)
		if err != nil {
			if o.optional {
				continue
			}
			return fmt.Errorf("legs: %w", err)
		}
		v := spec.Variables[o.name]
		if v == nil {
			return fmt.Errorf("legs: the program has no constant %s", o.name)
		}
		if err := v.Set(off); err != nil {
			return fmt.Errorf("legs: set %s: %w", o.name, err)
		}
	}
	return nil
}

// fieldOffset returns the byte offset of the field path[1:] (members, nested) in the
// struct named path[0].
func fieldOffset(spec *btf.Spec, path []string) (uint32, error) {
	var st *btf.Struct
	if err := spec.TypeByName(path[0], &st); err != nil {
		return 0, fmt.Errorf("struct %s: %w", path[0], err)
	}
	var off uint32
	members := st.Members
	for i, name := range path[1:] {
		var m *btf.Member
		for k := range members {
			if members[k].Name == name {
				m = &members[k]
				break
			}
		}
		if m == nil || m.Offset%8 != 0 || m.BitfieldSize != 0 {
			return 0, fmt.Errorf("struct %s has no field %s", path[0], strings.Join(path[1:i+2], "."))
		}
		off += m.Offset.Bytes()
		if i+2 < len(path) {
			inner, ok := btf.UnderlyingType(m.Type).(*btf.Struct)
			if !ok {
				return 0, fmt.Errorf("%s.%s is not a struct", path[0], strings.Join(path[1:i+2], "."))
			}
			members = inner.Members
		}
	}
	return off, nil
}

// LegStats returns what the trace footer keeps of Stats (trace.LegFiller).
func (t *Tracer) LegStats() trace.LegStats {
	st := t.Stats()
	return trace.LegStats{Filled: st.Filled, Missing: st.Missing, Lost: st.Lost}
}

var _ trace.LegFiller = (*Tracer)(nil)

// Available reports whether the kernel's legs can be measured on this machine (nil), or
// why not: it loads and attaches the program, then frees it.
func Available() error {
	t, err := Open(0)
	if err != nil {
		return err
	}
	t.Detach()
	return nil
}
