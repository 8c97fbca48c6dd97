package main

import (
	"container/heap"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// The Chrome trace-event JSON format (its "JSON Object Format"), which ui.perfetto.dev and
// chrome://tracing open: {"traceEvents": [...]}, times in microseconds. Each request (or
// call) is a complete event ("ph":"X", ts and dur) on its thread's track; complete events
// on one track must nest, so one that overlaps another without nesting (a thread with
// several requests in flight, the kernel's own requests) is an async slice instead ("ph"
// "b" and "e" sharing an id). Counters ("ph":"C") carry the job's MB/s and requests in
// flight per interval, and the memory and CPU of the sampled processes; metadata events
// ("ph":"M") name the processes and threads.
const (
	// perfettoJobPid holds the job's counters and perfettoKernelPid the requests no thread
	// of the job sent: pids above Linux's largest (pid_max is at most 2^22).
	perfettoJobPid    = 1<<22 + 1
	perfettoKernelPid = 1<<22 + 2
	// perfettoSlots bounds the counters' intervals: from 1 ms, an interval doubles when a
	// trace needs more.
	perfettoSlots     = 4096
	perfettoMinWidth  = int64(time.Millisecond)
	perfettoTimeUnits = "ns" // displayTimeUnit: how the viewers print durations
)

// perfettoCounts are what a Perfetto export holds.
type perfettoCounts struct {
	complete, async, counters, metadata uint64
	bytes                               int64
}

// perfettoWriter writes the trace-event JSON.
type perfettoWriter struct {
	w     io.Writer
	buf   []byte
	first bool // no event written yet
	n     perfettoCounts
	err   error

	tracks  map[uint32]*perfettoTrack // by tid
	pids    map[uint32]map[uint32]bool
	asyncID uint64
	series  perfettoSeries
}

// perfettoTrack is a thread's track: the ends of the complete events that hold the
// current time, innermost last.
type perfettoTrack struct {
	pid       uint32
	open      []int64
	lastStart int64
}

func (p *perfettoWriter) write(b []byte) {
	if p.err != nil {
		return
	}
	n, err := p.w.Write(b)
	p.n.bytes += int64(n)
	p.err = err
}

// begin starts p.buf with the separator before the next event.
func (p *perfettoWriter) begin() {
	if p.first {
		p.first = false
		p.buf = append(p.buf[:0], '\n')
	} else {
		p.buf = append(p.buf[:0], ",\n"...)
	}
}

// appendMicros appends ns as microseconds with three decimals, exactly.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	return append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
}

// appendJSONText appends s as a JSON string for a viewer: bytes that are not UTF-8
// become U+FFFD.
func appendJSONText(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = string([]rune(s)) // each invalid byte decodes to U+FFFD
	}
	return appendJSONString(b, s)
}

// op writes one request or call.
func (p *perfettoWriter) op(r *trace.Reader, o *xop) {
	pid, tid := o.pid, o.tid
	switch {
	case tid == 0:
		pid, tid = perfettoKernelPid, perfettoKernelPid
	case pid == 0:
		pid = tid
		if pr, ok := r.Process(tid); ok && pr.Pid != 0 {
			pid = pr.Pid
		}
	}
	t := p.tracks[tid]
	if t == nil {
		t = &perfettoTrack{pid: pid, lastStart: o.start}
		p.tracks[tid] = t
		if p.pids[pid] == nil {
			p.pids[pid] = map[uint32]bool{}
		}
		p.pids[pid][tid] = true
	}
	pid = t.pid // a thread stays on the track of the process it was first seen in
	end := o.start + max(o.dur, 0)
	for len(t.open) > 0 && t.open[len(t.open)-1] <= o.start {
		t.open = t.open[:len(t.open)-1]
	}
	nested := o.start >= t.lastStart && (len(t.open) == 0 || end <= t.open[len(t.open)-1])
	cat := "meta"
	if fold.IsDataOp(o.op) {
		cat = "data"
	}
	if nested {
		t.open = append(t.open, end)
		t.lastStart = o.start
		p.begin()
		p.buf = append(p.buf, `{"ph":"X","name":`...)
		p.buf = appendJSONText(p.buf, o.name)
		p.buf = append(p.buf, `,"cat":"`...)
		p.buf = append(p.buf, cat...)
		p.buf = append(p.buf, `","ts":`...)
		p.buf = appendMicros(p.buf, o.start)
		p.buf = append(p.buf, `,"dur":`...)
		p.buf = appendMicros(p.buf, end-o.start)
		p.buf = p.ids(p.buf, pid, tid)
		p.buf = appendOpArgs(p.buf, o)
		p.buf = append(p.buf, '}')
		p.write(p.buf)
		p.n.complete++
	} else {
		p.asyncID++
		for i, ph := range []string{"b", "e"} {
			p.begin()
			p.buf = append(p.buf, `{"ph":"`...)
			p.buf = append(p.buf, ph...)
			p.buf = append(p.buf, `","name":`...)
			p.buf = appendJSONText(p.buf, o.name)
			p.buf = append(p.buf, `,"cat":"`...)
			p.buf = append(p.buf, cat...)
			p.buf = append(p.buf, `","id":`...)
			p.buf = strconv.AppendUint(p.buf, p.asyncID, 10)
			p.buf = append(p.buf, `,"ts":`...)
			if i == 0 {
				p.buf = appendMicros(p.buf, o.start)
				p.buf = p.ids(p.buf, pid, tid)
				p.buf = appendOpArgs(p.buf, o)
			} else {
				p.buf = appendMicros(p.buf, end)
				p.buf = p.ids(p.buf, pid, tid)
			}
			p.buf = append(p.buf, '}')
			p.write(p.buf)
		}
		p.n.async++
	}
	p.series.add(o, end)
}

func (p *perfettoWriter) ids(b []byte, pid, tid uint32) []byte {
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(pid), 10)
	b = append(b, `,"tid":`...)
	return strconv.AppendUint(b, uint64(tid), 10)
}

// appendOpArgs appends the args object of a request or call: its fields that are set.
func appendOpArgs(b []byte, o *xop) []byte {
	b = append(b, `,"args":{`...)
	sep := false
	key := func(k string) {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, `":`...)
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			b = appendJSONText(b, v)
		}
	}
	num := func(k string, v int64, always bool) {
		if v != 0 || always {
			key(k)
			b = strconv.AppendInt(b, v, 10)
		}
	}
	str("path", o.path)
	str("path2", o.path2)
	data := o.kind == xRead || o.kind == xWrite || o.kind == xCopy
	num("offset", o.offset, data)
	num("size", o.size, false)
	num("ret", o.ret, data)
	num("handle", int64(o.handle), false)
	if o.errno != 0 {
		str("errno", trace.ErrnoName(o.errno))
	}
	num("requests", int64(o.requests), false)
	if o.op != 0 && o.name != o.op.String() {
		str("request", o.op.String())
	}
	return append(b, '}')
}

// perfettoSeries sums the job's bytes and requests in flight per interval of width ns,
// slot i covering [i*width, (i+1)*width) since the trace origin; an op's bytes count in
// the interval it starts in, as the report's per-interval view does.
type perfettoSeries struct {
	width int64
	slots []perfettoSlot
	ends  endHeap // ends of the ops in flight
	last  int64   // when the number in flight last changed
}

type perfettoSlot struct {
	read, write uint64
	busy        int64 // ns of op time in the interval: its mean in flight times width
	max         int   // most ops in flight at once
}

// slot returns the index of the interval holding t, growing the series.
func (s *perfettoSeries) slot(t int64) int {
	t = max(t, 0)
	for t/s.width >= perfettoSlots {
		s.coarsen()
	}
	i := int(t / s.width)
	for len(s.slots) <= i {
		s.slots = append(s.slots, perfettoSlot{})
	}
	return i
}

// coarsen doubles the width, merging pairs of intervals.
func (s *perfettoSeries) coarsen() {
	n := (len(s.slots) + 1) / 2
	for i := range n {
		a := s.slots[2*i]
		if 2*i+1 < len(s.slots) {
			b := s.slots[2*i+1]
			a.read += b.read
			a.write += b.write
			a.busy += b.busy
			a.max = max(a.max, b.max)
		}
		s.slots[i] = a
	}
	s.slots = s.slots[:n]
	s.width *= 2
}

// mark raises the most in flight to d over the intervals from t0 to t1.
func (s *perfettoSeries) mark(t0, t1 int64, d int) {
	if d == 0 {
		return
	}
	i1 := s.slot(max(t0, t1))
	for i := s.slot(min(t0, t1)); i <= i1; i++ {
		s.slots[i].max = max(s.slots[i].max, d)
	}
}

// until counts the ops that end by t out of flight.
func (s *perfettoSeries) until(t int64) {
	for s.ends.Len() > 0 && s.ends[0] <= t {
		e := heap.Pop(&s.ends).(int64)
		s.mark(s.last, e, s.ends.Len()+1)
		s.last = max(s.last, e)
	}
	s.mark(s.last, t, s.ends.Len())
	s.last = max(s.last, t)
}

func (s *perfettoSeries) add(o *xop, end int64) {
	if s.width == 0 {
		s.width = perfettoMinWidth
	}
	s.until(o.start)
	heap.Push(&s.ends, end)
	s.mark(o.start, o.start, s.ends.Len())
	if o.errno == 0 && o.ret > 0 {
		switch o.kind {
		case xRead:
			s.slots[s.slot(o.start)].read += uint64(o.ret)
		case xWrite:
			s.slots[s.slot(o.start)].write += uint64(o.ret)
		case xCopy:
			s.slots[s.slot(o.start)].read += uint64(o.ret)
			s.slots[s.slot(o.start)].write += uint64(o.ret)
		}
	}
	for t := max(o.start, 0); t < end; {
		i := s.slot(t)
		k := min(end, int64(i+1)*s.width) - t
		s.slots[i].busy += k
		t += k
	}
}

// endHeap is a min-heap of times.
type endHeap []int64

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// counter writes one counter event of pid at ts (ns) with its values.
func (p *perfettoWriter) counter(pid uint32, name string, ts int64, keys []string, vals []float64) {
	p.begin()
	p.buf = append(p.buf, `{"ph":"C","name":`...)
	p.buf = appendJSONText(p.buf, name)
	p.buf = append(p.buf, `,"pid":`...)
	p.buf = strconv.AppendUint(p.buf, uint64(pid), 10)
	p.buf = append(p.buf, `,"ts":`...)
	p.buf = appendMicros(p.buf, ts)
	p.buf = append(p.buf, `,"args":{`...)
	for i, k := range keys {
		if i > 0 {
			p.buf = append(p.buf, ',')
		}
		p.buf = appendJSONString(p.buf, k)
		p.buf = append(p.buf, ':')
		p.buf = strconv.AppendFloat(p.buf, vals[i], 'f', -1, 64)
	}
	p.buf = append(p.buf, `}}`...)
	p.write(p.buf)
	p.n.counters++
}

// meta writes a metadata event (process_name, thread_name, ...) with one argument.
func (p *perfettoWriter) meta(name string, pid, tid uint32, key string, val any) {
	p.begin()
	p.buf = append(p.buf, `{"ph":"M","name":"`...)
	p.buf = append(p.buf, name...)
	p.buf = append(p.buf, '"')
	p.buf = p.ids(p.buf, pid, tid)
	p.buf = append(p.buf, `,"args":{"`...)
	p.buf = append(p.buf, key...)
	p.buf = append(p.buf, `":`...)
	switch v := val.(type) {
	case string:
		p.buf = appendJSONText(p.buf, v)
	case int:
		p.buf = strconv.AppendInt(p.buf, int64(v), 10)
	}
	p.buf = append(p.buf, `}}`...)
	p.write(p.buf)
	p.n.metadata++
}

// round3 returns v rounded to 3 decimals.
func round3(v float64) float64 {
	return float64(int64(v*1000+0.5)) / 1000
}

// counters writes the job's per-interval counters and the sampled processes' memory and CPU.
func (p *perfettoWriter) counters(r *trace.Reader) {
	s := &p.series
	if s.width > 0 {
		s.until(1<<62 - 1)
		sec := float64(s.width) / 1e9
		for i, sl := range s.slots {
			ts := int64(i) * s.width
			p.counter(perfettoJobPid, "MB/s", ts, []string{"read", "write"},
				[]float64{round3(float64(sl.read) / sec / 1e6), round3(float64(sl.write) / sec / 1e6)})
			p.counter(perfettoJobPid, "in flight", ts, []string{"mean", "max"},
				[]float64{round3(float64(sl.busy) / float64(s.width)), float64(sl.max)})
		}
		end := int64(len(s.slots)) * s.width
		p.counter(perfettoJobPid, "MB/s", end, []string{"read", "write"}, []float64{0, 0})
		p.counter(perfettoJobPid, "in flight", end, []string{"mean", "max"}, []float64{0, 0})
	}
	for _, ss := range r.Samples() {
		if p.pids[ss.Pid] == nil { // a process of the job has its name (names)
			role := "storage client"
			if ss.Role == trace.RoleSelf {
				role = "iotap " + r.Header().Kind
			}
			p.meta("process_name", ss.Pid, 0, "name", ss.Name+" ("+role+")")
		}
		var prev trace.Sample
		for i, pt := range ss.Points {
			p.counter(ss.Pid, "memory (MiB)", pt.T, []string{"rss"}, []float64{round3(float64(pt.RSS) / (1 << 20))})
			if i > 0 && pt.T > prev.T {
				cpu := float64(pt.User+pt.Sys-prev.User-prev.Sys) / float64(pt.T-prev.T) * 100
				p.counter(ss.Pid, "CPU (%)", prev.T, []string{"cpu"}, []float64{round3(max(cpu, 0))})
			}
			prev = pt
		}
	}
}

// names writes the metadata events naming the processes and threads.
func (p *perfettoWriter) names(r *trace.Reader) {
	if p.series.width > 0 {
		p.meta("process_name", perfettoJobPid, 0, "name", "job I/O (all threads)")
		p.meta("process_sort_index", perfettoJobPid, 0, "sort_index", -1)
	}
	for _, pid := range slices.Sorted(maps.Keys(p.pids)) {
		tids := slices.Sorted(maps.Keys(p.pids[pid]))
		if pid == perfettoKernelPid {
			p.meta("process_name", pid, 0, "name", "kernel (requests no thread of the job sent)")
			continue
		}
		pr, ok := r.Process(pid)
		for _, tid := range tids {
			if ok {
				break
			}
			pr, ok = r.Process(tid)
		}
		name := pr.Comm
		if name == "" {
			name = "pid " + strconv.FormatUint(uint64(pid), 10)
		}
		p.meta("process_name", pid, 0, "name", name)
		if pr.Exe != "" {
			p.meta("process_labels", pid, 0, "labels", pr.Exe)
		}
		for _, tid := range tids {
			if tp, ok := r.Process(tid); ok && tp.Comm != "" {
				p.meta("thread_name", pid, tid, "name", tp.Comm)
			}
		}
	}
}

// exportPerfetto writes r's requests or calls (view) to w as Chrome trace-event JSON.
func exportPerfetto(e *env, r *trace.Reader, view string, w io.Writer, stop func(n int) error) error {
	p := &perfettoWriter{w: w, first: true, tracks: map[uint32]*perfettoTrack{}, pids: map[uint32]map[uint32]bool{}}
	h := r.Header()
	p.buf = append(p.buf[:0], `{"displayTimeUnit":"`+perfettoTimeUnits+`","otherData":{"source":"iotap","view":`...)
	p.buf = appendJSONString(p.buf, view)
	p.buf = append(p.buf, `,"kind":`...)
	p.buf = appendJSONText(p.buf, h.Kind)
	p.buf = append(p.buf, `,"host":`...)
	p.buf = appendJSONText(p.buf, h.Hostname)
	p.buf = append(p.buf, `,"target":`...)
	p.buf = appendJSONText(p.buf, h.Target.Path)
	p.buf = append(p.buf, `,"started":`...)
	p.buf = appendJSONString(p.buf, h.WallStart.UTC().Format(time.RFC3339Nano))
	p.buf = append(p.buf, `,"time_unit":"ts and dur in microseconds since the trace's start"},"traceEvents":[`...)
	p.write(p.buf)
	s := newOpStream(r, view)
	var readErr error // the file is still closed as JSON: it holds what was read before
	for n := 0; ; n++ {
		if err := stop(n); err != nil {
			return err
		}
		o, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		p.op(r, o)
		if p.err != nil {
			return writeError(p.err)
		}
	}
	p.counters(r)
	p.names(r)
	p.write([]byte("\n]}\n"))
	if p.err != nil {
		return writeError(p.err)
	}
	if readErr != nil {
		return readErr
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap export: perfetto: %d complete events, %d async slices, %d counter and %d metadata events; %d bytes; counters every %v\n",
		p.n.complete, p.n.async, p.n.counters, p.n.metadata, p.n.bytes, time.Duration(p.series.width))
	return nil
}
