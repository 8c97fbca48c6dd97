package export

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
	"github.com/iotap/iotap/trace/stats"
)

// The Chrome trace-event JSON format (its "JSON Object Format"), which ui.perfetto.dev and
// chrome://tracing open: {"traceEvents": [...]}, times in microseconds. Each request (or
// call) is a complete event ("ph":"X", ts and dur) on its thread's track; complete events
// on one track must nest, so one that overlaps another without nesting (a thread with
// several requests in flight, the kernel's own requests) is an async slice instead ("ph"
// "b" and "e" sharing an id). Counters ("ph":"C") carry the job's MB/s and requests in
// flight per interval (trace/stats' per-interval series of the requests, whichever the
// view), and the memory and CPU of the sampled processes; metadata events ("ph":"M") name
// the processes and threads.
const (
	// PerfettoJobPid holds the job's counters and PerfettoKernelPid the requests no thread
	// of the job sent: pids above Linux's largest (pid_max is at most 2^22).
	PerfettoJobPid    = 1<<22 + 1
	PerfettoKernelPid = 1<<22 + 2
	// perfettoSlots bounds the counters' intervals: from 1 ms, an interval doubles when a
	// trace needs more.
	perfettoSlots    = 4096
	perfettoMinWidth = time.Millisecond
	// perfettoOpSeries bounds the operations that get an "in flight" track of their own.
	perfettoOpSeries  = 4
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
	job     bool          // the job's counters are written
	width   time.Duration // their interval
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
func (p *perfettoWriter) op(r *trace.Reader, o *span) {
	pid, tid := o.pid, o.tid
	switch {
	case tid == 0:
		pid, tid = PerfettoKernelPid, PerfettoKernelPid
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
}

func (p *perfettoWriter) ids(b []byte, pid, tid uint32) []byte {
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(pid), 10)
	b = append(b, `,"tid":`...)
	return strconv.AppendUint(b, uint64(tid), 10)
}

// appendOpArgs appends the args object of a request or call: its fields that are set.
func appendOpArgs(b []byte, o *span) []byte {
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
	data := o.act == actRead || o.act == actWrite || o.act == actCopy
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

// counters writes the job's per-interval counters, from the statistics of its requests,
// and the sampled processes' memory and CPU.
func (p *perfettoWriter) counters(r *trace.Reader, st *stats.Stats) {
	if se := &st.Series; len(se.Slots) > 0 {
		p.job, p.width = true, se.Width
		sec := se.Width.Seconds()
		for i, sl := range se.Slots {
			p.counter(PerfettoJobPid, "MB/s", int64(i)*int64(se.Width), []string{"read", "write"},
				[]float64{round3(float64(sl.ReadBytes) / sec / 1e6), round3(float64(sl.WriteBytes) / sec / 1e6)})
		}
		p.counter(PerfettoJobPid, "MB/s", int64(len(se.Slots))*int64(se.Width), []string{"read", "write"}, []float64{0, 0})
	}
	if ds := &st.Inflight.Series; ds.Len() > 0 {
		p.job = true
		w := int64(ds.Width)
		// All the requests: the mean number in flight per interval.
		area := make([]int64, ds.Len())
		for op := range ds.Ops {
			for i, sl := range ds.Ops[op] {
				area[i] += sl.AreaNs
			}
		}
		for i, a := range area {
			p.counter(PerfettoJobPid, "in flight", int64(i)*w, []string{"mean"}, []float64{round3(float64(a) / float64(w))})
		}
		p.counter(PerfettoJobPid, "in flight", int64(len(area))*w, []string{"mean"}, []float64{0})
		// The operations that had several requests in flight at once, busiest first, as
		// the report's in-flight intervals: the mean and the most of each.
		var ops []trace.Op
		for op := range st.Inflight.Ops {
			if st.Inflight.Ops[op].Max >= 2 && len(ds.Ops[op]) > 0 {
				ops = append(ops, trace.Op(op))
			}
		}
		slices.SortStableFunc(ops, func(a, b trace.Op) int {
			return cmp.Compare(st.Inflight.Ops[b].AreaNs, st.Inflight.Ops[a].AreaNs)
		})
		for _, op := range ops[:min(len(ops), perfettoOpSeries)] {
			name := op.String() + " in flight"
			for i, sl := range ds.Ops[op] {
				p.counter(PerfettoJobPid, name, int64(i)*w, []string{"mean", "max"}, []float64{round3(float64(sl.AreaNs) / float64(w)), float64(sl.Max)})
			}
			p.counter(PerfettoJobPid, name, int64(len(ds.Ops[op]))*w, []string{"mean", "max"}, []float64{0, 0})
		}
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
	if p.job {
		p.meta("process_name", PerfettoJobPid, 0, "name", "job I/O (all threads)")
		p.meta("process_sort_index", PerfettoJobPid, 0, "sort_index", -1)
	}
	for _, pid := range slices.Sorted(maps.Keys(p.pids)) {
		tids := slices.Sorted(maps.Keys(p.pids[pid]))
		if pid == PerfettoKernelPid {
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

// writePerfetto writes r's requests or calls (o.View) to w as Chrome trace-event JSON.
func writePerfetto(ctx context.Context, r *trace.Reader, w io.Writer, o Options) (Result, error) {
	p := &perfettoWriter{w: w, first: true, tracks: map[uint32]*perfettoTrack{}, pids: map[uint32]map[uint32]bool{}}
	h := r.Header()
	p.buf = append(p.buf[:0], `{"displayTimeUnit":"`+perfettoTimeUnits+`","otherData":{"source":"iotap","view":`...)
	p.buf = appendJSONString(p.buf, o.View)
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
	// The counters are the requests' per-interval statistics, whichever the view.
	acc := stats.NewAccumulator("", h, stats.Options{Interval: perfettoMinWidth, MaxIntervals: perfettoSlots})
	s := newSpans(&events{r: r, tap: acc.Add}, o.View)
	var readErr error // the file is still closed as JSON: it holds what was read before
	for n := 0; ; n++ {
		if n%stopEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Result{}, err
			}
		}
		sp, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		p.op(r, sp)
		if p.err != nil {
			return Result{}, writeError(p.err)
		}
	}
	p.counters(r, acc.Finish(r, nil, nil))
	p.names(r)
	p.write([]byte("\n]}\n"))
	if p.err != nil {
		return Result{}, writeError(p.err)
	}
	if readErr != nil {
		return Result{}, readErr
	}
	return Result{Note: fmt.Sprintf("perfetto: %d complete events, %d async slices, %d counter and %d metadata events; %d bytes; counters every %v\n",
		p.n.complete, p.n.async, p.n.counters, p.n.metadata, p.n.bytes, p.width)}, nil
}
