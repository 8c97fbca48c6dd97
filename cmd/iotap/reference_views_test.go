package main

// The report's verdict, its groups by program and user, command lines, heat maps and
// access sizes, recomputed from `iotap export` of a real recorded job and of its replay,
// as reference_test.go does for the other figures: plain loops over the exported events,
// and the trace's process records read with the trace reader (the format, not the
// aggregation). Like reference_test.go it shares no code with trace/stats or
// report.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// refViewEvent is an exported event with the fields these checks need beyond refEvent's.
type refViewEvent struct {
	refEvent
	Uid   uint32 `json:"uid"`
	Flags uint32 `json:"flags"`
}

func refExportViews(t *testing.T, tracePath string) []refViewEvent {
	t.Helper()
	return refExportAs(t, tracePath, func(e *refViewEvent) int64 { return e.Start })
}

// refProcNames reads a trace's process records and names each process as the report
// documents: after its main thread's last record, else after the first of its threads
// that has one.
func refProcNames(t *testing.T, tracePath string) map[uint32]trace.Process {
	t.Helper()
	r, err := trace.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	for {
		if _, err := r.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	out := map[uint32]trace.Process{}
	for _, p := range r.Processes() { // the last record of each thread, by first seen
		if _, ok := out[p.Pid]; !ok || p.Tid == p.Pid {
			out[p.Pid] = p
		}
	}
	return out
}

// refReplayCall names the system call a replay's event is; ok false for a kind these checks
// do not map (the job below makes none).
func refReplayCall(e *refViewEvent) (string, bool) {
	switch e.Op {
	case "fsync":
		if e.Flags&1 != 0 {
			return "fdatasync", true
		}
		return "fsync", true
	case "setlk", "getlk", "setlkw":
		return "lock", true
	case "access", "unlink", "getxattr", "statfs":
		return e.Op, true
	}
	c, ok := refReplayCalls[e.Op]
	return c, ok
}

// refDarshan is the access-size bucket of a call that moved n bytes (Darshan's
// DARSHAN_BUCKET_INC: upper bounds 100, 1K, 10K, 100K, 1M, 4M, 10M, 100M, 1G, K = 1024).
func refDarshan(n int64) string {
	bounds := []int64{100, 1 << 10, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30}
	names := []string{"0-100", "100-1K", "1K-10K", "10K-100K", "100K-1M", "1M-4M", "4M-10M", "10M-100M", "100M-1G"}
	for i, b := range bounds {
		if n <= b {
			return names[i]
		}
	}
	return "1G+"
}

type refVerdictJSON struct {
	Text         string  `json:"text"`
	View         string  `json:"view"`
	Traces       int     `json:"traces"`
	WallNs       int64   `json:"wall_ns"`
	ActiveNs     int64   `json:"active_ns"`
	IOShare      float64 `json:"io_share"`
	IONs         int64   `json:"io_ns"`
	Top          string  `json:"top"`
	TopNs        int64   `json:"top_ns"`
	TopShare     float64 `json:"top_share"`
	TopPaths     int     `json:"top_paths"`
	TopPath      string  `json:"top_path"`
	TopPathNs    int64   `json:"top_path_ns"`
	TopPathShare float64 `json:"top_path_share"`
	Tail         string  `json:"tail"`
	TailCount    uint64  `json:"tail_count"`
	TailP99Ns    int64   `json:"tail_p99_ns"`
}

type refHeatJSON struct {
	Start   time.Time `json:"start"`
	WidthNs int64     `json:"width_ns"`
	Columns int       `json:"columns"`
	Rows    []struct {
		Name    string   `json:"name"`
		TotalNs int64    `json:"total_ns"`
		Bytes   uint64   `json:"bytes"`
		Ns      []int64  `json:"ns"`
		ByCol   []uint64 `json:"bytes_per_column"`
	} `json:"rows"`
}

type refViewJSON struct {
	Name    string          `json:"name"`
	Events  uint64          `json:"events"`
	TotalNs int64           `json:"total_ns"`
	CallNs  int64           `json:"call_ns"`
	Verdict *refVerdictJSON `json:"verdict_figures"`
	Job     struct {
		ReadBytes  uint64 `json:"read_bytes"`
		WriteBytes uint64 `json:"write_bytes"`
		ActiveNs   int64  `json:"active_ns"`
	} `json:"job"`
	Ops      []refRowJSON `json:"ops"`
	Syscalls []refRowJSON `json:"syscalls"`
	Procs    []struct {
		Pid     uint32   `json:"pid"`
		Comm    string   `json:"comm"`
		Exe     string   `json:"exe"`
		Cmdline []string `json:"cmdline"`
		TotalNs int64    `json:"total_ns"`
	} `json:"processes"`
	Commands []struct {
		Comm      string   `json:"comm"`
		Cmdline   []string `json:"cmdline"`
		Processes int      `json:"processes"`
		TotalNs   int64    `json:"total_ns"`
	} `json:"commands"`
	AccessSizes []struct {
		Bucket     string `json:"bucket"`
		Reads      uint64 `json:"reads"`
		ReadBytes  uint64 `json:"read_bytes"`
		ReadNs     int64  `json:"read_ns"`
		Writes     uint64 `json:"writes"`
		WriteBytes uint64 `json:"write_bytes"`
		WriteNs    int64  `json:"write_ns"`
	} `json:"access_sizes"`
	HeatFiles    *refHeatJSON `json:"heat_files"`
	HeatPrograms *refHeatJSON `json:"heat_programs"`
}

type refReportViewsJSON struct {
	Verdict string `json:"verdict"`
	Traces  []struct {
		WallStart time.Time `json:"wall_start"`
	} `json:"traces"`
	Total     refViewJSON   `json:"total"`
	Groups    []refViewJSON `json:"groups"`
	GroupRows []struct {
		Group     string `json:"group"`
		Processes int    `json:"processes"`
		Count     uint64 `json:"count"`
		TotalNs   int64  `json:"total_ns"`
		Bytes     uint64 `json:"bytes"`
		WallNs    int64  `json:"wall_ns"`
		Wall      struct {
			IOPS    float64 `json:"iops"`
			MetaOps float64 `json:"meta_ops_per_s"`
			MBps    float64 `json:"mb_per_s"`
		} `json:"wall"`
	} `json:"group_rows"`
}

func refReportViews(t *testing.T, args ...string) *refReportViewsJSON {
	t.Helper()
	var rep refReportViewsJSON
	if err := json.Unmarshal(refRun(t, "", append([]string{"report", "--format", "json", "--top", "100000"}, args...)...), &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// refCheckVerdictTime checks the verdict's first part: the share of the trace's wall time
// with at least one request in flight.
func refCheckVerdictTime(c *refChecker, v *refVerdictJSON, evs []refViewEvent) {
	c.t.Helper()
	all := make([]*refEvent, len(evs))
	first, last := evs[0].Start, evs[0].Start+evs[0].Dur
	for i := range evs {
		all[i] = &evs[i].refEvent
		first, last = min(first, evs[i].Start), max(last, evs[i].Start+evs[i].Dur)
	}
	active := refUnion(all)
	c.eq("verdict wall_ns", v.WallNs, last-first)
	c.eq("verdict active_ns", v.ActiveNs, active)
	c.eq("verdict io_share", v.IOShare, math.Round(float64(active)/float64(last-first)*1000)/1000)
	c.eq("verdict traces", v.Traces, 1)
}

// refCheckVerdictText checks the verdict's line against its figures, as documented.
func refCheckVerdictText(c *refChecker, v *refVerdictJSON) {
	c.t.Helper()
	pct := func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" }
	want := "I/O " + pct(v.IOShare) + " of "
	if !strings.HasPrefix(v.Text, want) {
		c.errorf("verdict %q does not start %q", v.Text, want)
	}
	switch {
	case v.TopPath != "":
		want = "; " + pct(v.TopPathShare) + " of it " + v.Top + " on " + v.TopPath
	default:
		want = fmt.Sprintf("; %s of it %s (over %d paths)", pct(v.TopShare), v.Top, v.TopPaths)
	}
	c.checked++
	if !strings.Contains(v.Text, want) {
		c.errorf("verdict %q does not say %q", v.Text, want)
	}
	if v.Tail != "" {
		c.checked++
		if !strings.Contains(v.Text, "; p99 "+v.Tail+" ") {
			c.errorf("verdict %q does not name the tail of %s", v.Text, v.Tail)
		}
	}
}

// refCall is one system call: its kind, path, time in the storage and outcome.
type refCall struct {
	kind, path string
	dur, ret   int64
	ok         bool
}

// refReplayCallsOf are a replay's calls: its events.
func refReplayCallsOf(t *testing.T, evs []refViewEvent) []refCall {
	t.Helper()
	var out []refCall
	for i := range evs {
		e := &evs[i]
		if e.Op == "forget" {
			continue
		}
		name, ok := refReplayCall(e)
		if !ok {
			t.Fatalf("the replay issued %s, which this check does not map to a call", e.Op)
		}
		out = append(out, refCall{kind: name, path: e.Path, dur: e.Dur, ret: e.Ret, ok: e.ok()})
	}
	return out
}

// refRecordedCalls are a recording's calls, as `export --view syscalls` gives them.
func refRecordedCalls(t *testing.T, tracePath string) []refCall {
	t.Helper()
	var out []refCall
	sc := bufio.NewScanner(bytes.NewReader(refRun(t, "", "export", "--view", "syscalls", tracePath)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Syscall string `json:"syscall"`
			Path    string `json:"path"`
			Time    int64  `json:"dur_ns"`
			Ret     int64  `json:"ret"`
			Errno   int    `json:"errno"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, refCall{kind: c.Syscall, path: c.Path, dur: c.Time, ret: c.Ret, ok: c.Errno == 0})
	}
	return out
}

// refCheckCallViews recomputes the verdict and the access sizes of a trace from its
// events (evs) and its calls.
func refCheckCallViews(t *testing.T, name, tracePath string, evs []refViewEvent, cs []refCall) {
	rep := refReportViews(t, tracePath)
	c := &refChecker{t: t, name: name}
	v := rep.Total.Verdict
	refCheckVerdictTime(c, v, evs)
	type callFig struct {
		total int64
		durs  []int64
		paths map[string]int64
	}
	calls := map[string]*callFig{}
	sizes := map[string]*[6]int64{} // reads, read bytes, read ns, writes, write bytes, write ns
	var callNs int64
	for _, e := range cs {
		callNs += e.dur
		f := calls[e.kind]
		if f == nil {
			f = &callFig{paths: map[string]int64{}}
			calls[e.kind] = f
		}
		f.total += e.dur
		f.durs = append(f.durs, e.dur)
		f.paths[e.path] += e.dur
		if e.ok && (e.kind == "read" || e.kind == "write") {
			b := refDarshan(max(e.ret, 0))
			if sizes[b] == nil {
				sizes[b] = &[6]int64{}
			}
			k := 0
			if e.kind == "write" {
				k = 3
			}
			sizes[b][k]++
			sizes[b][k+1] += max(e.ret, 0)
			sizes[b][k+2] += e.dur
		}
	}
	c.eq("verdict io_ns (the calls' summed time)", v.IONs, callNs)
	// The kind with the most time, ties by name.
	var top string
	for name, f := range calls {
		if top == "" || f.total > calls[top].total || (f.total == calls[top].total && name < top) {
			top = name
		}
	}
	c.eq("verdict top", v.Top, top)
	c.eq("verdict top_ns", v.TopNs, calls[top].total)
	c.eq("verdict top_paths", v.TopPaths, len(calls[top].paths))
	var bestPath string
	for p, ns := range calls[top].paths {
		if bestPath == "" || ns > calls[top].paths[bestPath] || (ns == calls[top].paths[bestPath] && p < bestPath) {
			bestPath = p
		}
	}
	if 2*calls[top].paths[bestPath] >= calls[top].total {
		c.eq("verdict top_path", v.TopPath, bestPath)
		c.eq("verdict top_path_ns", v.TopPathNs, calls[top].paths[bestPath])
		c.eq("verdict top_path_share", v.TopPathShare, math.Round(float64(calls[top].paths[bestPath])/float64(callNs)*1000)/1000)
	} else {
		c.eq("verdict top_path (none holds half)", v.TopPath, "")
		c.eq("verdict top_share", v.TopShare, math.Round(float64(calls[top].total)/float64(callNs)*1000)/1000)
	}
	// The tail: of the kinds of at least 100 calls, the highest p99. The report's p99s have
	// three significant digits, so a kind whose exact p99 is within 1/1024 of the highest
	// may win instead.
	var tail string
	var tailP99 int64
	for name, f := range calls {
		if len(f.durs) < 100 {
			continue
		}
		p := refNearestRank(slices.Sorted(slices.Values(f.durs)), 99)
		if tail == "" || p > tailP99 {
			tail, tailP99 = name, p
		}
	}
	if tail == "" {
		c.eq("verdict tail (no kind of 100 calls)", v.Tail, "")
	} else {
		f := calls[v.Tail]
		c.checked++
		if f == nil || len(f.durs) < 100 {
			c.errorf("verdict tail %q: %d calls", v.Tail, len(f.durs))
		} else if p := refNearestRank(slices.Sorted(slices.Values(f.durs)), 99); p+p/1024 < tailP99 {
			c.errorf("verdict tail %s (exact p99 %d ns), recomputed %s (%d ns)", v.Tail, p, tail, tailP99)
		} else {
			exact := refNearestRank(slices.Sorted(slices.Values(f.durs)), 99)
			c.checked++
			if v.TailP99Ns < exact || v.TailP99Ns > exact+exact/1024 {
				c.errorf("verdict tail_p99_ns = %d, exact %d (3 significant digits allow up to %d)", v.TailP99Ns, exact, exact+exact/1024)
			}
			c.eq("verdict tail_count", v.TailCount, len(f.durs))
		}
	}
	refCheckVerdictText(c, v)
	c.eq("verdict line", rep.Verdict, v.Text)
	// Access sizes.
	if len(rep.Total.AccessSizes) != 10 {
		c.errorf("%d access-size buckets, want Darshan's 10", len(rep.Total.AccessSizes))
	}
	for _, b := range rep.Total.AccessSizes {
		want := sizes[b.Bucket]
		if want == nil {
			want = &[6]int64{}
		}
		c.eq("access size "+b.Bucket, []any{b.Reads, b.ReadBytes, b.ReadNs, b.Writes, b.WriteBytes, b.WriteNs},
			[]any{want[0], want[1], want[2], want[3], want[4], want[5]})
	}
	t.Logf("%s: %d figures compared, %d differ; verdict %q", name, c.checked, c.n, v.Text)
}

// refProgram is a process's group under --by comm or exe.
func refProgram(names map[uint32]trace.Process, pid uint32, exe bool) string {
	p, ok := names[pid]
	n := p.Comm
	if exe {
		n = p.Exe
	}
	switch {
	case pid == 0:
		return "(kernel)"
	case !ok || n == "":
		return "(unknown)"
	}
	return n
}

// refCheckRecordingViews recomputes a recording's verdict and access sizes (from its calls as
// `export --view syscalls` folds them), groups, processes' command lines, command lines and
// heat maps.
func refCheckRecordingViews(t *testing.T, rec string) {
	evs := refExportViews(t, rec)
	names := refProcNames(t, rec)
	rep := refReportViews(t, rec)
	c := &refChecker{t: t, name: "recording views"}
	refCheckCallViews(t, "recording's calls", rec, evs, refRecordedCalls(t, rec))
	v := rep.Total.Verdict
	c.eq("verdict line", rep.Verdict, v.Text)

	// Processes: named after their main thread; their command lines.
	for _, p := range rep.Total.Procs {
		want := names[p.Pid]
		c.eq(fmt.Sprintf("process %d comm", p.Pid), p.Comm, refProgram(names, p.Pid, false))
		c.eq(fmt.Sprintf("process %d cmdline", p.Pid), strings.Join(p.Cmdline, "\x00"), strings.Join(want.Cmdline, "\x00"))
	}
	// Command lines: the distinct (comm, command line) of the processes that made requests.
	type cmdFig struct {
		procs map[uint32]bool
		ns    int64
	}
	cmds := map[string]*cmdFig{}
	for i := range evs {
		e := &evs[i]
		p, ok := names[e.Pid]
		if !ok || p.Cmdline == nil {
			continue
		}
		k := p.Comm + "\x01" + strings.Join(p.Cmdline, "\x00")
		if cmds[k] == nil {
			cmds[k] = &cmdFig{procs: map[uint32]bool{}}
		}
		cmds[k].procs[e.Pid] = true
		cmds[k].ns += e.Dur
	}
	c.eq("command lines", len(rep.Total.Commands), len(cmds))
	for _, cm := range rep.Total.Commands {
		f := cmds[cm.Comm+"\x01"+strings.Join(cm.Cmdline, "\x00")]
		if f == nil {
			c.errorf("command line %q of %s: not in the export", cm.Cmdline, cm.Comm)
			continue
		}
		c.eq(fmt.Sprintf("command line %q processes and time", cm.Cmdline), []any{cm.Processes, cm.TotalNs}, []any{len(f.procs), f.ns})
	}

	// Heat maps: every request in the column its start falls in.
	offset := rep.Total.HeatFiles.Start.Sub(rep.Traces[0].WallStart).Nanoseconds()
	heat := func(what string, m *refHeatJSON, key func(e *refViewEvent) []string, bytesOf func(e *refViewEvent, row string) uint64) {
		if m == nil {
			c.errorf("no %s heat map", what)
			return
		}
		for _, r := range m.Rows {
			ns, by := make([]int64, m.Columns), make([]uint64, m.Columns)
			for i := range evs {
				e := &evs[i]
				if !slices.Contains(key(e), r.Name) {
					continue
				}
				col := int((e.Start - offset) / m.WidthNs)
				if col < 0 || col >= m.Columns {
					c.errorf("%s heat map: an event of %s at %d ns is outside its %d columns of %d ns", what, r.Name, e.Start, m.Columns, m.WidthNs)
					continue
				}
				if key(e)[0] == r.Name {
					ns[col] += e.Dur
				}
				by[col] += bytesOf(e, r.Name)
			}
			c.eq(what+" heat of "+r.Name+" (time)", r.Ns, ns)
			c.eq(what+" heat of "+r.Name+" (bytes)", r.ByCol, by)
		}
	}
	moved := func(e *refViewEvent) uint64 {
		if e.ok() && e.Ret > 0 && (e.Op == "read" || e.Op == "write" || e.Op == "copy_file_range") {
			return uint64(e.Ret)
		}
		return 0
	}
	heat("file", rep.Total.HeatFiles, func(e *refViewEvent) []string { return []string{e.Path, e.Path2} }, func(e *refViewEvent, row string) uint64 {
		if e.Path == row || (e.Op == "copy_file_range" && e.Path2 == row) {
			return moved(e)
		}
		return 0
	})
	heat("program", rep.Total.HeatPrograms, func(e *refViewEvent) []string { return []string{refProgram(names, e.Pid, false)} }, func(e *refViewEvent, _ string) uint64 {
		if e.Op == "copy_file_range" {
			return 2 * moved(e)
		}
		return moved(e)
	})
	// The programs' rows are the busiest by time.
	byProg := map[string]int64{}
	for i := range evs {
		byProg[refProgram(names, evs[i].Pid, false)] += evs[i].Dur
	}
	progs := slices.Collect(func(yield func(string) bool) {
		for p := range byProg {
			if !yield(p) {
				return
			}
		}
	})
	sort.Slice(progs, func(i, j int) bool {
		if byProg[progs[i]] != byProg[progs[j]] {
			return byProg[progs[i]] > byProg[progs[j]]
		}
		return progs[i] < progs[j]
	})
	var rowNames []string
	for _, r := range rep.Total.HeatPrograms.Rows {
		rowNames = append(rowNames, r.Name)
	}
	c.eq("program heat map rows", rowNames, progs[:min(len(progs), 12)])

	// The recording's calls, for the groups' IOPS: each call's process, kind and outcome.
	type groupCall struct {
		Syscall string `json:"syscall"`
		Pid     uint32 `json:"pid"`
		Errno   int    `json:"errno"`
	}
	var calls []groupCall
	sc := bufio.NewScanner(bytes.NewReader(refRun(t, "", "export", "--view", "syscalls", rec)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var gc groupCall
		if err := json.Unmarshal(sc.Bytes(), &gc); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, gc)
	}
	uidOf := map[uint32]uint32{} // a process's user, when it made all its requests as one
	mixed := map[uint32]bool{}
	for i := range evs {
		if u, ok := uidOf[evs[i].Pid]; ok && u != evs[i].Uid {
			mixed[evs[i].Pid] = true
		}
		uidOf[evs[i].Pid] = evs[i].Uid
	}

	// Groups by program and by user.
	for _, by := range []string{"comm", "exe", "uid"} {
		g := refReportViews(t, "--by", by, rec)
		key := func(e *refViewEvent) string {
			if by == "uid" {
				return "uid=" + strconv.FormatUint(uint64(e.Uid), 10)
			}
			return by + "=" + refProgram(names, e.Pid, by == "exe")
		}
		type groupFig struct {
			events      uint64
			totalNs     int64
			read, write uint64
			ops         map[string]uint64
			pids        map[uint32]bool
			busy        []*refEvent
			first, last int64 // the group's first request's start and last one's end
			data, meta  uint64
			callsKnown  bool // every call's group is known (by uid: its process made all its requests as one user)
		}
		want := map[string]*groupFig{}
		for i := range evs {
			e := &evs[i]
			k := key(e)
			f := want[k]
			if f == nil {
				f = &groupFig{ops: map[string]uint64{}, pids: map[uint32]bool{}}
				want[k] = f
			}
			if f.events == 0 || e.Start < f.first {
				f.first = e.Start
			}
			f.last = max(f.last, e.Start+e.Dur)
			f.events++
			f.totalNs += e.Dur
			f.ops[e.Op]++
			f.pids[e.Pid] = true
			f.busy = append(f.busy, &e.refEvent)
			switch e.Op {
			case "read":
				f.read += moved(e)
			case "write":
				f.write += moved(e)
			case "copy_file_range":
				f.read += moved(e)
				f.write += moved(e)
			}
		}
		for _, f := range want {
			f.callsKnown = true
		}
		for _, cl := range calls {
			var k string
			switch {
			case by == "uid" && mixed[cl.Pid]:
				for _, f := range want {
					f.callsKnown = false
				}
				continue
			case by == "uid":
				k = "uid=" + strconv.FormatUint(uint64(uidOf[cl.Pid]), 10)
			default:
				k = by + "=" + refProgram(names, cl.Pid, by == "exe")
			}
			f := want[k]
			if f == nil || cl.Errno != 0 {
				continue
			}
			switch cl.Syscall {
			case "read", "write", "copy_file_range":
				f.data++
			default:
				f.meta++
			}
		}
		c.eq("--by "+by+" groups", len(g.Groups), len(want))
		for _, gv := range g.Groups {
			f := want[gv.Name]
			if f == nil {
				c.errorf("--by %s: group %s not in the export", by, gv.Name)
				continue
			}
			what := "--by " + by + " " + gv.Name
			c.eq(what+" events", gv.Events, f.events)
			c.eq(what+" total_ns", gv.TotalNs, f.totalNs)
			c.eq(what+" read and written", []uint64{gv.Job.ReadBytes, gv.Job.WriteBytes}, []uint64{f.read, f.write})
			c.eq(what+" active_ns", gv.Job.ActiveNs, refUnion(f.busy))
			ops := map[string]uint64{}
			for _, o := range gv.Ops {
				ops[o.Op] = o.Count
			}
			c.eq(what+" requests by op", ops, f.ops)
		}
		for _, r := range g.GroupRows {
			f := want[r.Group]
			if f == nil {
				continue
			}
			what := "--by " + by + " row " + r.Group
			c.eq(what+" processes and bytes", []any{r.Processes, r.Bytes}, []any{len(f.pids), f.read + f.write})
			// The table's rates are over the group's wall time: its IOPS are the reads and
			// writes that succeeded per second of it, as fio counts IOPS.
			wall := f.last - f.first
			c.eq(what+" wall_ns", r.WallNs, wall)
			c.rate(what+" MB/s over its wall time", r.Wall.MBps, float64(f.read+f.write)/1e6, wall)
			if f.callsKnown {
				c.rate(what+" IOPS over its wall time", r.Wall.IOPS, float64(f.data), wall)
				c.rate(what+" meta/s over its wall time", r.Wall.MetaOps, float64(f.meta), wall)
			}
		}
	}
	t.Logf("recording views: %d figures compared, %d differ; verdict %q", c.checked, c.n, v.Text)
}

// TestReferenceViews records a job of several programs (python3 writing a journal with
// fdatasync after each write, and reads and writes of the sizes at the edges of Darshan's
// buckets; dd with 4 MiB blocks; five cat processes; one cat as another user), replays it, and checks the verdict, groups, command lines, heat maps and access
// sizes of both against their exports.
func TestReferenceViews(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "python3", "dd", "cat", "sh", "setpriv")
	root := t.TempDir()
	dir := filepath.Join(root, "job")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // the other user's cat reads here
		t.Fatal(err)
	}
	rec := filepath.Join(root, "job.iotap")
	// --allow-other: another user's process may use the traced view.
	refRun(t, dir, "record", "--allow-other", "-o", rec, "--", "sh", "-c", `python3 -c '
import os
fd = os.open("journal", os.O_WRONLY | os.O_CREAT, 0o644)
for i in range(150):
    os.write(fd, b"x" * 4096)
    os.fdatasync(fd)
os.close(fd)
fd = os.open("sizes", os.O_RDWR | os.O_CREAT, 0o644)
for n in (100, 101, 1024, 1025, 10240, 10241):
    os.write(fd, b"y" * n)
os.lseek(fd, 0, 0)
for n in (100, 101, 1024, 1025, 10240, 10241):
    os.read(fd, n)
os.close(fd)
'
dd if=/dev/zero of=big bs=4M count=2 2>/dev/null
dd if=big of=/dev/null bs=4M 2>/dev/null
for i in 1 2 3 4 5; do cat big > /dev/null; done
setpriv --reuid 65534 --regid 65534 --clear-groups cat journal > /dev/null`)
	refCheckRecordingViews(t, rec)
	// The command lines are the job's.
	var cats int
	for _, p := range refProcNames(t, rec) {
		if p.Comm == "cat" && slices.Equal(p.Cmdline, []string{"cat", "big"}) {
			cats++
		}
	}
	if cats != 5 {
		t.Errorf("%d cat processes with the command line cat big, want 5", cats)
	}

	target := filepath.Join(root, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(root, "rep")
	refRun(t, root, "replay", rec, "--target", target, "-o", prefix, "--no-compare")
	replay := prefix + ".t1.r1.iotap"
	evs := refExportViews(t, replay)
	refCheckCallViews(t, "replay's calls", replay, evs, refReplayCallsOf(t, evs))
}
