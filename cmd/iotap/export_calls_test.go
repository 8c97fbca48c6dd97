package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/export"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// writeWorkloadTrace writes a synthetic trace of several programs (tracetest.Workload) with
// names worth hiding, and returns its path.
func writeWorkloadTrace(t *testing.T, dir string) string {
	t.Helper()
	b := tracetest.NewWithHeader(t, trace.Header{
		Kind: "record", Hostname: "node17.example.org", Target: trace.Target{Path: "/home/ann/job", FSType: "ext4", Source: "/dev/sda1", Mount: "/home"},
		FUSE: trace.FUSEOptions{Cache: "none"}, Command: []string{"/home/ann/pipeline.sh", "secret-sample"},
		Labels: []trace.Label{{Key: "SLURM_JOB_ID", Value: "4242"}},
	})
	b.AddProcess(trace.Process{Tid: 10, Pid: 10, PPid: 1, Comm: "tar", Exe: "/usr/bin/tar"})
	b.AddProcess(trace.Process{Tid: 11, Pid: 11, PPid: 1, Comm: "sqlite3", Exe: "/usr/bin/sqlite3"})
	b.AddProcess(trace.Process{Tid: 12, Pid: 12, PPid: 1, Comm: "ls", Exe: "/usr/bin/ls"})
	tracetest.Workload(b, 8)
	b.W.AddSamples(trace.Samples{Role: trace.RoleClient, Pid: 77, Name: "s3fs",
		Points: []trace.Sample{{T: 1e9, RSS: 10 << 20, User: time.Millisecond}, {T: 1.1e9, RSS: 12 << 20, User: 30 * time.Millisecond}}})
	p := filepath.Join(dir, "job.iotap")
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// reportTotals returns the per-call and per-request counts, errors, bytes and times of a
// report in JSON, and its job line.
func reportTotals(t *testing.T, js string) (map[string][4]float64, string) {
	t.Helper()
	var rep struct {
		Total struct {
			Syscalls []map[string]any `json:"syscalls"`
			Ops      []map[string]any `json:"ops"`
			Job      json.RawMessage  `json:"job"`
			Events   uint64           `json:"events"`
			Duration int64            `json:"duration_ns"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	rows := map[string][4]float64{}
	num := func(m map[string]any, k string) float64 { v, _ := m[k].(float64); return v }
	for _, r := range rep.Total.Syscalls {
		rows["call "+r["call"].(string)] = [4]float64{num(r, "count"), num(r, "errors"), num(r, "bytes"), num(r, "total_ns")}
	}
	for _, r := range rep.Total.Ops {
		rows["op "+r["op"].(string)] = [4]float64{num(r, "count"), num(r, "errors"), num(r, "bytes"), num(r, "total_ns")}
	}
	rows["events"] = [4]float64{float64(rep.Total.Events), float64(rep.Total.Duration)}
	return rows, string(rep.Total.Job)
}

// callTotals sums an export --view syscalls in JSON lines per syscall: count, errors,
// bytes and time in the storage.
func callTotals(t *testing.T, jsonl string) map[string][4]float64 {
	t.Helper()
	out := map[string][4]float64{}
	sc := bufio.NewScanner(strings.NewReader(jsonl))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Syscall string
			DurNs   int64 `json:"dur_ns"`
			Errno   int
			Bytes   *int64
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		v := out["call "+c.Syscall]
		v[0]++
		v[3] += float64(c.DurNs)
		if c.Errno != 0 {
			v[1]++
		}
		if c.Bytes != nil {
			v[2] += float64(*c.Bytes)
		}
		out["call "+c.Syscall] = v
	}
	return out
}

// TestExportSyscalls: export --view syscalls gives the calls the report counts, with the
// same counts, errors, bytes and times per call, for a recording (folded) and for a
// replay's trace (whose events are calls).
func TestExportSyscalls(t *testing.T) {
	fx := traceFixtures(t)
	dir := t.TempDir()
	replayTrace := filepath.Join(dir, "replay.iotap")
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "replay", Target: trace.Target{Path: "/r", FSType: "ext4"}})
	tracetest.Workload(b, 4)
	if err := os.WriteFile(replayTrace, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tr := range map[string]string{"golden": fx["good"], "workload": writeWorkloadTrace(t, dir), "replay": replayTrace} {
		t.Run(name, func(t *testing.T) {
			code, jsonl, stderr := runIotap(t, nil, "export", "--view", "syscalls", tr)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			_, rep, _ := runIotap(t, nil, "report", "--format", "json", tr)
			want, _ := reportTotals(t, rep)
			got := callTotals(t, jsonl)
			if len(got) < 3 {
				t.Fatalf("%d kinds of call exported", len(got))
			}
			for k, v := range want {
				if strings.HasPrefix(k, "call ") && got[k] != v {
					t.Errorf("%s: export %v, report %v", k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("%s: not in the report", k)
				}
			}
			// Field names in order, and CSV with the same records.
			first, _, _ := strings.Cut(jsonl, "\n")
			dec := json.NewDecoder(strings.NewReader(first))
			var keys []string
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k.(string))
				var v any
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(keys, export.ColumnNames(export.Columns(export.ViewSyscalls))) {
				t.Errorf("JSON fields %v", keys)
			}
			_, csvOut, _ := runIotap(t, nil, "export", "--view", "syscalls", "--format", "csv", tr)
			rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rows[0], export.ColumnNames(export.Columns(export.ViewSyscalls))) || len(rows)-1 != strings.Count(jsonl, "\n") {
				t.Errorf("CSV header %v, %d rows for %d JSON lines", rows[0], len(rows)-1, strings.Count(jsonl, "\n"))
			}
		})
	}
}
