// Package legs measures the legs of a FUSE mount's requests that lie outside its server:
// when the kernel queued each request and when it completed it, and the system call of the
// application that sent it, from its entry to its return. A recording stores them in each
// event (trace.Event's Queued, Done, CallStart, CallEnd and CallNr), so that a replay can
// tell what the application spent outside the file system from what FUSE added.
//
// The measuring is a small BPF program (legs.bpf.c, built into legs.bpf.o by gen.go) on the
// tracepoints fuse:fuse_request_send, fuse:fuse_request_end and sched:sched_waking and the
// raw tracepoints sys_enter and sys_exit. It needs root (CAP_BPF and CAP_PERFMON), a kernel with those
// tracepoints (Linux 6.1 and later have the FUSE ones) and tracefs, which Open mounts at
// /sys/kernel/tracing when it is not mounted. Open returns an error saying which of these
// is missing; a recorder then falls back to its round-trip probe.
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
	"strconv"
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
func Open(origin int64) (t *Tracer, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("measuring the kernel's legs needs root")
	}
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	if err := checkLayout(); err != nil {
		return nil, err
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(program))
	if err != nil {
		return nil, fmt.Errorf("legs: load program: %w", err)
	}
	// Without the offset the program measures everything but the run delay.
	if off, err := runDelayOffset(); err == nil {
		if v := spec.Variables["run_delay_off"]; v != nil {
			_ = v.Set(off)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("legs: load program into the kernel: %w", err)
	}
	t = &Tracer{coll: coll, origin: origin, stop: make(chan struct{}), done: make(chan struct{})}
	defer func() {
		if err != nil {
			t.detach()
		}
	}()
	for _, tp := range []struct{ prog, name string }{
		{"request_send", "fuse_request_send"},
		{"request_end", "fuse_request_end"},
	} {
		l, err := link.Tracepoint("fuse", tp.name, coll.Programs[tp.prog], nil)
		if err != nil {
			return nil, fmt.Errorf("legs: attach to tracepoint fuse:%s: %w", tp.name, err)
		}
		t.links = append(t.links, l)
	}
	l, err := link.Tracepoint("sched", "sched_waking", coll.Programs["sched_waking"], nil)
	if err != nil {
		return nil, fmt.Errorf("legs: attach to tracepoint sched:sched_waking: %w", err)
	}
	t.links = append(t.links, l)
	for _, name := range []string{"sys_enter", "sys_exit"} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: coll.Programs[name]})
		if err != nil {
			return nil, fmt.Errorf("legs: attach to raw tracepoint %s: %w", name, err)
		}
		t.links = append(t.links, l)
	}
	t.rd, err = ringbuf.NewReader(coll.Maps["ring"])
	if err != nil {
		return nil, fmt.Errorf("legs: open ring buffer: %w", err)
	}
	t.slots = make([]slot, TableSlots)
	go t.run()
	return t, nil
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

// runDelayOffset returns the offset of sched_info.run_delay in struct task_struct, from
// the kernel's BTF.
func runDelayOffset() (uint32, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return 0, err
	}
	var task *btf.Struct
	if err := spec.TypeByName("task_struct", &task); err != nil {
		return 0, err
	}
	for _, m := range task.Members {
		if m.Name != "sched_info" {
			continue
		}
		si, ok := btf.UnderlyingType(m.Type).(*btf.Struct)
		if !ok {
			break
		}
		for _, f := range si.Members {
			if f.Name == "run_delay" && f.Offset%8 == 0 {
				return uint32(m.Offset.Bytes() + f.Offset.Bytes()), nil
			}
		}
	}
	return 0, errors.New("task_struct has no sched_info.run_delay")
}

// tracefs is where the FUSE tracepoints are described.
const tracefs = "/sys/kernel/tracing"

// ensureTracefs mounts tracefs at its usual place when it is not mounted there (the
// tracepoints' ids are read from it).
func ensureTracefs() error {
	if _, err := os.Stat(tracefs + "/events"); err == nil {
		return nil
	}
	if _, err := os.Stat("/sys/kernel/debug/tracing/events"); err == nil {
		return nil
	}
	if err := unix.Mount("tracefs", tracefs, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("legs: tracefs is not mounted and mounting it at %s failed: %w", tracefs, err)
	}
	return nil
}

// fieldOffsets are the tracepoint fields the program reads, at the offsets it reads them.
var fieldOffsets = map[string]map[string]int{
	"fuse/fuse_request_send": {"connection": 8, "unique": 16, "opcode": 24},
	"fuse/fuse_request_end":  {"connection": 8, "unique": 16, "error": 28},
	"sched/sched_waking":     {"pid": 24},
}

// checkLayout checks that this kernel's FUSE tracepoints exist and have the fields the
// program reads where it reads them.
func checkLayout() error {
	for ev, want := range fieldOffsets {
		var data []byte
		var err error
		for _, dir := range []string{tracefs, "/sys/kernel/debug/tracing"} {
			if data, err = os.ReadFile(dir + "/events/" + ev + "/format"); err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("legs: this kernel has no tracepoint %s (Linux 6.1 or later has the FUSE ones): %w", strings.Replace(ev, "/", ":", 1), err)
		}
		got := parseFormat(string(data))
		for f, off := range want {
			if o, ok := got[f]; !ok || o != off {
				return fmt.Errorf("legs: tracepoint %s has field %s at offset %d, not %d", strings.Replace(ev, "/", ":", 1), f, o, off)
			}
		}
	}
	return nil
}

// parseFormat returns the offsets of the fields a tracefs format file lists.
func parseFormat(s string) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		var name string
		off := -1
		for _, part := range strings.Split(line, ";") {
			part = strings.TrimSpace(part)
			switch {
			case strings.HasPrefix(part, "field:"):
				decl := strings.Fields(strings.TrimPrefix(part, "field:"))
				if len(decl) > 0 {
					name = strings.TrimLeft(decl[len(decl)-1], "*")
					if i := strings.IndexByte(name, '['); i >= 0 {
						name = name[:i]
					}
				}
			case strings.HasPrefix(part, "offset:"):
				if v, err := strconv.Atoi(strings.TrimPrefix(part, "offset:")); err == nil {
					off = v
				}
			}
		}
		if name != "" && off >= 0 {
			out[name] = off
		}
	}
	return out
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
