package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/export"
	"github.com/iotap/iotap/internal/export/duckdbtest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
	"golang.org/x/sys/unix"
)

// traceEventSummary is what checkTraceEvents found in a Chrome trace-event JSON file.
type traceEventSummary struct {
	events, complete, async, counters, metadata int
	durNs                                       int64 // complete and async slices, summed
	firstNs                                     int64 // the earliest slice's start
	readBytes, writeBytes                       float64
	busyNs                                      float64 // "in flight" mean times the interval
	width                                       int64   // the counters' interval, ns
	names                                       map[string]int
	unnamedThreads                              int // threads of the job's processes with no thread_name
}

// micros parses a JSON number of microseconds with at most three decimals into ns.
func micros(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("time %v (%T) is not a number", v, v)
	}
	s := n.String()
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 {
		t.Fatalf("time %s: more than ns precision", s)
	}
	frac += strings.Repeat("0", 3-len(frac))
	var w, f int64
	if err := json.Unmarshal([]byte(whole), &w); err != nil {
		t.Fatalf("time %s: %v", s, err)
	}
	if err := json.Unmarshal([]byte(strings.TrimLeft(frac, "0")+"0"), &f); err != nil {
		t.Fatalf("time %s: %v", s, err)
	}
	f /= 10
	if w < 0 {
		t.Fatalf("time %s is negative", s)
	}
	return w*1000 + f
}

// checkTraceEvents checks data against the rules of the trace-event format that the
// viewers apply: valid JSON with a traceEvents array; each event of a known phase with its
// fields (pid, tid, ts and dur in microseconds); complete events on one thread's track
// nesting properly; async begin and end paired by id; counters with numeric values;
// every process and thread named by a metadata event.
func checkTraceEvents(t *testing.T, data []byte) traceEventSummary {
	t.Helper()
	var doc struct {
		DisplayTimeUnit string           `json:"displayTimeUnit"`
		TraceEvents     []map[string]any `json:"traceEvents"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if doc.DisplayTimeUnit != "ns" && doc.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q", doc.DisplayTimeUnit)
	}
	s := traceEventSummary{events: len(doc.TraceEvents), firstNs: math.MaxInt64, names: map[string]int{}}
	type slice struct{ start, end int64 }
	type track struct{ pid, tid string }
	tracks := map[track][]slice{}
	begins := map[string]map[string]any{}
	named := map[string]bool{}
	threadNamed := map[track]bool{}
	used := map[track]bool{}
	counterTs := map[string][]int64{}
	for i, ev := range doc.TraceEvents {
		ph, _ := ev["ph"].(string)
		pid := ev["pid"]
		if _, ok := pid.(json.Number); !ok {
			t.Fatalf("event %d: pid %v", i, pid)
		}
		tr := track{pid: pid.(json.Number).String()}
		if tid, ok := ev["tid"].(json.Number); ok {
			tr.tid = tid.String()
		}
		name, _ := ev["name"].(string)
		switch ph {
		case "X":
			start, dur := micros(t, ev["ts"]), micros(t, ev["dur"])
			tracks[tr] = append(tracks[tr], slice{start, start + dur})
			used[tr] = true
			s.complete++
			s.durNs += dur
			s.firstNs = min(s.firstNs, start)
			s.names[name]++
		case "b", "e":
			id := ev["id"].(json.Number).String() + "/" + ev["cat"].(string)
			used[tr] = true
			if ph == "b" {
				if begins[id] != nil {
					t.Fatalf("event %d: async id %s begun twice", i, id)
				}
				begins[id] = ev
				s.async++
				s.names[name]++
				s.firstNs = min(s.firstNs, micros(t, ev["ts"]))
				continue
			}
			b := begins[id]
			if b == nil || b["name"] != name || b["tid"] != ev["tid"] || b["pid"] != ev["pid"] {
				t.Fatalf("event %d: async end %s without its begin", i, id)
			}
			d := micros(t, ev["ts"]) - micros(t, b["ts"])
			if d < 0 {
				t.Fatalf("event %d: async %s ends before it begins", i, id)
			}
			s.durNs += d
			delete(begins, id)
		case "C":
			args, _ := ev["args"].(map[string]any)
			if len(args) == 0 {
				t.Fatalf("event %d: counter without values", i)
			}
			vals := map[string]float64{}
			for k, v := range args {
				n, ok := v.(json.Number)
				f, err := n.Float64()
				if !ok || err != nil {
					t.Fatalf("event %d: counter %s=%v is not a number", i, k, v)
				}
				vals[k] = f
			}
			s.counters++
			ts := micros(t, ev["ts"])
			counterTs[name] = append(counterTs[name], ts)
			switch name {
			case "MB/s":
				s.readBytes += vals["read"]
				s.writeBytes += vals["write"]
			case "in flight":
				s.busyNs += vals["mean"]
			}
		case "M":
			s.metadata++
			args, _ := ev["args"].(map[string]any)
			switch name {
			case "process_name":
				named[tr.pid] = args["name"] != ""
			case "thread_name":
				threadNamed[tr] = args["name"] != ""
			case "process_labels", "process_sort_index":
			default:
				t.Errorf("event %d: metadata %q", i, name)
			}
		default:
			t.Fatalf("event %d: phase %q", i, ph)
		}
	}
	if len(begins) > 0 {
		t.Errorf("%d async slices never end", len(begins))
	}
	// Complete events on one track nest: one that starts inside another ends inside it.
	for tr, sl := range tracks {
		slices.SortFunc(sl, func(a, b slice) int {
			if a.start != b.start {
				return int(a.start - b.start)
			}
			return int(b.end - a.end)
		})
		var open []slice
		for _, x := range sl {
			for len(open) > 0 && open[len(open)-1].end <= x.start {
				open = open[:len(open)-1]
			}
			if len(open) > 0 && x.end > open[len(open)-1].end {
				t.Fatalf("track %v: [%d,%d] overlaps [%d,%d] without nesting", tr, x.start, x.end, open[len(open)-1].start, open[len(open)-1].end)
			}
			open = append(open, x)
		}
	}
	for tr := range used {
		if !named[tr.pid] {
			t.Errorf("process %s has no process_name", tr.pid)
		}
		if !threadNamed[tr] && tr.pid != fmt.Sprint(export.PerfettoKernelPid) {
			s.unnamedThreads++
		}
	}
	// The job's counters come every interval; their units: MB/s over the interval gives
	// bytes, the mean in flight times the interval gives the time in flight.
	if ts := counterTs["MB/s"]; len(ts) > 1 {
		s.width = ts[1] - ts[0]
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] != s.width {
				t.Fatalf("MB/s counters at %d and %d: not every %d ns", ts[i-1], ts[i], s.width)
			}
		}
		sec := float64(s.width) / 1e9
		s.readBytes *= sec * 1e6
		s.writeBytes *= sec * 1e6
		s.busyNs *= float64(s.width)
	}
	return s
}

// TestExportPerfetto: each request is a slice on its thread's track, the overlapping ones
// async, with counters whose units add up to the trace's bytes and time.
func TestExportPerfetto(t *testing.T) {
	b := tracetest.NewFUSE(t)
	b.AddProcess(trace.Process{Tid: 10, Pid: 10, PPid: 1, Comm: "tar", Exe: "/usr/bin/tar"})
	b.AddProcess(trace.Process{Tid: 11, Pid: 11, PPid: 1, Comm: "sqlite3", Exe: "/usr/bin/sqlite3"})
	b.AddProcess(trace.Process{Tid: 12, Pid: 12, PPid: 1, Comm: "ls", Exe: "/usr/bin/ls"})
	b.AddProcess(trace.Process{Tid: 13, Pid: 13, PPid: 1, Comm: "fio", Exe: "/usr/bin/fio"})
	tracetest.Workload(b, 6)
	// A thread with several reads in flight (io_uring): they overlap without nesting.
	fh := b.Open(13, "in/archive.tar", unix.O_RDONLY)
	for i := range 4 {
		b.At(13, 5e9+int64(i)*10000)
		b.RW(13, trace.OpRead, "in/archive.tar", fh, int64(i)<<20, 1<<20, 1<<20)
		b.Ev(13, trace.OpRead, "in/archive.tar", 40000, 0, func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = fh, int64(i)<<20+4096, 4096, 4096
			e.Start -= 5000
		})
	}
	b.Ev(0, trace.OpForget, "in", 1000, 0, func(e *trace.Event) { e.Tid, e.Pid = 0, 0 }) // the kernel's own
	b.W.AddSamples(trace.Samples{Role: trace.RoleClient, Pid: 77, Name: "s3fs",
		Points: []trace.Sample{{T: 1e9, RSS: 10 << 20}, {T: 1.1e9, RSS: 12 << 20, User: 50 * time.Millisecond}}})
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.iotap")
	if err := os.WriteFile(tr, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var durNs, readB, writeB int64
	var events, forgets int
	r := tracetest.Reader(t, b.Bytes())
	first := int64(math.MaxInt64)
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		events++
		if ev.Op == trace.OpForget {
			forgets++
		}
		durNs += ev.Dur
		first = min(first, ev.Start)
		if ev.Errno == 0 && ev.Ret > 0 {
			switch ev.Op {
			case trace.OpRead:
				readB += ev.Ret
			case trace.OpWrite:
				writeB += ev.Ret
			}
		}
	}

	code, out, stderr := runIotap(t, nil, "export", "--format", "perfetto", tr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	s := checkTraceEvents(t, []byte(out))
	if s.complete+s.async != events || s.durNs != durNs || s.firstNs != first {
		t.Errorf("%d complete and %d async slices of %d ns from %d ns; the trace has %d events of %d ns from %d ns",
			s.complete, s.async, s.durNs, s.firstNs, events, durNs, first)
	}
	if s.unnamedThreads != 0 {
		t.Errorf("%d threads without a name", s.unnamedThreads)
	}
	if s.async < 3 || s.names["forget"] != forgets {
		t.Errorf("%d async slices, want the overlapping reads; forgets %d, want %d", s.async, s.names["forget"], forgets)
	}
	if math.Abs(s.readBytes-float64(readB)) > 1000 || math.Abs(s.writeBytes-float64(writeB)) > 1000 || math.Abs(s.busyNs-float64(durNs)) > 1000 {
		t.Errorf("counters add up to %.0f read, %.0f written, %.0f ns in flight; the trace: %d, %d, %d",
			s.readBytes, s.writeBytes, s.busyNs, readB, writeB, durNs)
	}
	for _, want := range []string{`"name":"s3fs (storage client)"`, `"name":"memory (MiB)"`, `"name":"CPU (%)"`, `"args":{"cpu":50}`,
		`"tid":10,"args":{"name":"tar"}`, `"name":"process_labels"`, `"name":"read in flight"`} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %s", want)
		}
	}
	if !strings.Contains(stderr, "complete events") {
		t.Errorf("stderr: %s", stderr)
	}

	// The system calls: a slice per call, its time in the storage.
	code, calls, stderr := runIotap(t, nil, "export", "--format", "perfetto", "--view", "syscalls", tr)
	if code != exitOK {
		t.Fatalf("--view syscalls: exit %d\n%s", code, stderr)
	}
	cs := checkTraceEvents(t, []byte(calls))
	_, rep, _ := runIotap(t, nil, "report", "--format", "json", tr)
	var totals struct {
		Total struct {
			CallNs int64 `json:"call_ns"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(rep), &totals); err != nil {
		t.Fatal(err)
	}
	if cs.names["close"] == 0 || cs.names["flush"] != 0 || cs.durNs != totals.Total.CallNs {
		t.Errorf("calls: %v, %d ns (the report's calls: %d ns)", cs.names, cs.durNs, totals.Total.CallNs)
	}
}

// TestExportDamaged: every format and view exports a damaged trace as far as it reads and
// exits 3, and with --strict stops at the first damaged chunk with what it read before in
// a well-formed file.
func TestExportDamaged(t *testing.T) {
	fx := traceFixtures(t)
	for _, format := range []string{"jsonl", "csv", "parquet", "fio", "perfetto"} {
		for _, view := range []string{"requests", "syscalls", "files"} {
			if view == "files" && (format == "fio" || format == "perfetto") {
				continue
			}
			for _, strict := range []bool{false, true} {
				name := format + "-" + view
				args := []string{"export", "--format", format, "--view", view, fx["truncated"]}
				if strict {
					name += "-strict"
					args = append(args, "--strict")
				}
				t.Run(name, func(t *testing.T) {
					code, out, stderr := runIotap(t, nil, args...)
					if code != exitDamaged || !strings.Contains(stderr, "no footer") {
						t.Fatalf("exit %d, want %d\n%s", code, exitDamaged, stderr)
					}
					switch format {
					case "perfetto":
						if s := checkTraceEvents(t, []byte(out)); s.complete+s.async == 0 {
							t.Error("no slice of the events read")
						}
					case "fio":
						if n := checkIolog(t, out); n.files == 0 {
							t.Error("no file in the iolog")
						}
					case "parquet":
						// A complete file: footer and magic at its end, its rows readable.
						if !strings.HasPrefix(out, "PAR1") || !strings.HasSuffix(out, "PAR1") {
							t.Fatalf("not a complete Parquet file: %d bytes", len(out))
						}
						if !testenv.DuckDB.Required() && !testenv.FUSE.Required() {
							if _, err := exec.LookPath("node"); err != nil {
								return // the file's ends were checked
							}
						}
						pq := filepath.Join(t.TempDir(), "d.parquet")
						mustDo(t, os.WriteFile(pq, []byte(out), 0o600))
						if rows := duckdbtest.Rows(t, "SELECT count(*) AS n FROM "+duckdbtest.Literal(pq)); rows[0].Int(t, "n") < 5 {
							t.Errorf("%v rows", rows[0])
						}
					default:
						if strings.Count(out, "\n") < 5 {
							t.Errorf("%d lines", strings.Count(out, "\n"))
						}
					}
				})
			}
		}
	}
}

// TestExportAnonymizeDamaged: export --anonymize of a damaged trace ends as the plain
// export does (exit 3, the events read before the damage), also when --strict stops the
// anonymised copy at a corrupt chunk.
func TestExportAnonymizeDamaged(t *testing.T) {
	fx := traceFixtures(t)
	for _, tc := range []struct {
		name  string
		trace string
		args  []string
	}{
		{name: "corrupt", trace: fx["corrupt"]},
		{name: "corrupt-strict", trace: fx["corrupt"], args: []string{"--strict"}},
		{name: "truncated", trace: fx["truncated"]},
		{name: "truncated-strict", trace: fx["truncated"], args: []string{"--strict"}},
		{name: "truncated-strict-fio", trace: fx["truncated"], args: []string{"--strict", "--format", "fio"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, plain, _ := runIotap(t, nil, append([]string{"export", tc.trace}, tc.args...)...)
			code, out, stderr := runIotap(t, nil, append([]string{"export", "--anonymize", tc.trace}, tc.args...)...)
			if code != exitDamaged || strings.Count(out, "\n") != strings.Count(plain, "\n") {
				t.Errorf("exit %d, %d lines (without --anonymize %d)\n%s", code, strings.Count(out, "\n"), strings.Count(plain, "\n"), stderr)
			}
		})
	}
}
