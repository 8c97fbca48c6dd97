package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/export/duckdbtest"
)

// fleetJob is a job of the fleet test: its Slurm job id, pipeline label and shell script.
type fleetJob struct {
	id, pipeline, script string
}

// fleetJobs are three real jobs on one directory: two runs of a pipeline that read a shared
// reference (the first waits a while, the second makes more metadata calls: its I/O share
// grows), and one of another pipeline.
var fleetJobs = []fleetJob{
	{"101", "align", `cat ref/genome.fa > /dev/null; mkdir -p out101; for i in 1 2 3; do cat ref/genome.fa > out101/part$i; done; sleep 0.6; ls -l out101 > /dev/null`},
	{"102", "align", `cat ref/genome.fa > /dev/null; mkdir -p out102; for i in 1 2 3; do cat ref/genome.fa > out102/part$i; done; for i in $(seq 60); do ls -l out102 ref > /dev/null; stat ref/genome.fa > /dev/null; done`},
	{"103", "index", `cat ref/genome.fa ref/genome.fa > /dev/null; mkdir -p idx; head -c 300000 ref/genome.fa > idx/genome.idx; test -e idx/missing || true`},
}

// readJSONLines decodes every line of every file below dir (a dataset of JSON lines).
func readJSONLines(t *testing.T, dir string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read-only
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			d := json.NewDecoder(strings.NewReader(sc.Text()))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			rows = append(rows, m)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// num returns a JSON row's integer field (0 for null).
func jnum(m map[string]any, k string) int64 {
	n, _ := m[k].(json.Number)
	v, _ := n.Int64()
	return v
}

func jstr(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// fleetQueries returns the SQL of docs/fleet.md's questions, in order, reading the datasets
// below dir.
func fleetQueries(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	var qs []string
	for i, m := range regexp.MustCompile("(?s)<!-- fleet query (\\d) -->\n```sql\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if m[1] != fmt.Sprint(i+1) {
			t.Fatalf("docs/fleet.md: query %s comes %d-th", m[1], i+1)
		}
		qs = append(qs, strings.ReplaceAll(m[2], "'fleet/", "'"+dir+"/"))
	}
	if len(qs) != 5 {
		t.Fatalf("docs/fleet.md has %d queries, want the five questions", len(qs))
	}
	return qs
}

// TestFleetQueries: the five fleet questions of docs/fleet.md, run as written by DuckDB over
// the Parquet datasets of three recorded jobs (iotap export of many traces, iotap summary
// --by job), give the answers computed from the same jobs' JSON lines datasets.
func TestFleetQueries(t *testing.T) {
	duckdbtest.Require(t)
	requireRecord(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(filepath.Join(work, "ref"), 0o755))
	mustDo(t, os.WriteFile(filepath.Join(work, "ref", "genome.fa"), []byte(strings.Repeat(">chr\nACGTTGCA\n", 40000)), 0o644))
	traces := filepath.Join(dir, "traces")
	mustDo(t, os.MkdirAll(traces, 0o755))
	for _, j := range fleetJobs {
		cmd := exec.Command(iotapBin, "record", "--target", work, "-o", filepath.Join(traces, j.id+".iotap"), "--label", "pipeline="+j.pipeline, "--", "sh", "-c", j.script)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "SLURM_JOB_ID="+j.id, "SLURM_STEP_ID=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("record job %s: %v\n%s", j.id, err, out)
		}
		time.Sleep(10 * time.Millisecond) // the jobs start one after the other: the summary's order
	}
	fleet := filepath.Join(dir, "fleet")
	jl := filepath.Join(dir, "jsonl")
	for _, v := range []string{"syscalls", "requests", "files"} {
		for _, f := range [][2]string{{"parquet", fleet}, {"jsonl", jl}} {
			if code, _, stderr := runIotap(t, nil, "export", "--format", f[0], "--view", v, "-o", filepath.Join(f[1], v), traces); code != exitOK {
				t.Fatalf("export %s %s: exit %d\n%s", f[0], v, code, stderr)
			}
		}
	}
	if code, _, stderr := runIotap(t, nil, "summary", "--by", "job", "--format", "parquet", "-o", filepath.Join(fleet, "summary.parquet"), traces); code != exitOK {
		t.Fatalf("summary: exit %d\n%s", code, stderr)
	}
	code, sumJSON, stderr := runIotap(t, nil, "summary", "--by", "job", "--format", "jsonl", traces)
	if code != exitOK {
		t.Fatalf("summary jsonl: exit %d\n%s", code, stderr)
	}
	res := duckdbtest.Query(t, fleetQueries(t, fleet)...)
	calls := readJSONLines(t, filepath.Join(jl, "syscalls"))
	reqs := readJSONLines(t, filepath.Join(jl, "requests"))
	files := readJSONLines(t, filepath.Join(jl, "files"))
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	flt := func(r duckdbtest.Row, c string) float64 {
		n, _ := r[c].(json.Number)
		f, _ := n.Float64()
		if s, ok := r[c].(string); ok {
			_, _ = fmt.Sscan(s, &f)
		}
		return f
	}

	// 1. Time in metadata by program.
	type prog struct {
		jobs      map[string]bool
		meta, dur int64
	}
	progs := map[string]*prog{}
	for _, c := range calls {
		p := progs[jstr(c, "comm")]
		if p == nil {
			p = &prog{jobs: map[string]bool{}}
			progs[jstr(c, "comm")] = p
		}
		p.jobs[jstr(c, "job")] = true
		p.meta += jnum(c, "meta_ns")
		p.dur += jnum(c, "dur_ns")
	}
	if len(res[0]) != len(progs) || len(progs) < 3 {
		t.Errorf("question 1: %d programs, the exports have %d", len(res[0]), len(progs))
	}
	for _, r := range res[0] {
		p := progs[r.Str("comm")]
		if p == nil || r.Int(t, "jobs") != int64(len(p.jobs)) || !near(flt(r, "meta_s"), float64(p.meta)/1e9) || !near(flt(r, "io_s"), float64(p.dur)/1e9) {
			t.Errorf("question 1: %v; from the exports %+v", r, p)
		}
	}

	// 2. Files re-read across jobs.
	type fileAcc struct {
		jobs        map[string]bool
		read, first int64
	}
	byPath := map[string]*fileAcc{}
	for _, f := range files {
		if f["is_dir"] == true || jnum(f, "read_bytes") == 0 {
			continue
		}
		a := byPath[jstr(f, "path")]
		if a == nil {
			a = &fileAcc{jobs: map[string]bool{}}
			byPath[jstr(f, "path")] = a
		}
		a.jobs[jstr(f, "job")] = true
		a.read += jnum(f, "read_bytes")
		a.first += jnum(f, "first_read_bytes")
	}
	var shared []string
	for p, a := range byPath {
		if len(a.jobs) > 1 {
			shared = append(shared, p)
		}
	}
	if len(res[1]) != len(shared) || !slices.Contains(shared, "ref/genome.fa") {
		t.Errorf("question 2: %v; from the exports %v", res[1], shared)
	}
	for _, r := range res[1] {
		a := byPath[r.Str("path")]
		if a == nil || r.Int(t, "jobs") != int64(len(a.jobs)) || r.Int(t, "read_bytes") != a.read || r.Int(t, "first_read_bytes") != a.first {
			t.Errorf("question 2: %v; from the exports %+v", r, a)
		}
	}

	// 3. p99 of open per day.
	days := map[string][]int64{}
	for _, c := range calls {
		if jstr(c, "syscall") == "open" {
			day := jstr(c, "start_time")[:10]
			days[day] = append(days[day], jnum(c, "dur_ns"))
		}
	}
	if len(res[2]) != len(days) || len(days) == 0 {
		t.Errorf("question 3: %v; from the exports %d days", res[2], len(days))
	}
	for _, r := range res[2] {
		d := days[r.Str("day")[:10]]
		slices.Sort(d)
		if want := refNearestRank(d, 99); r.Int(t, "opens") != int64(len(d)) || r.Int(t, "p99_open_ns") != want {
			t.Errorf("question 3: %v; from the exports %d opens, p99 %d", r, len(d), want)
		}
	}

	// 4. Jobs whose I/O share grew.
	var sums []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(sumJSON), "\n") {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		mustDo(t, d.Decode(&m))
		sums = append(sums, m)
	}
	slices.SortFunc(sums, func(a, b map[string]any) int { return strings.Compare(jstr(a, "start_time"), jstr(b, "start_time")) })
	grew := map[string]float64{}
	last := map[string]float64{}
	for _, s := range sums {
		p := s["labels"].(map[string]any)["pipeline"].(string)
		share := float64(jnum(s, "io_ns")) / float64(jnum(s, "node_ns"))
		if prev, ok := last[p]; ok && share > prev {
			grew[jstr(s, "job")] = share - prev
		}
		last[p] = share
	}
	if len(res[3]) != len(grew) || len(grew) == 0 {
		t.Errorf("question 4: %v; from the summary %v", res[3], grew)
	}
	for _, r := range res[3] {
		if g, ok := grew[r.Str("job")]; !ok || math.Abs(flt(r, "growth")-g) > 1e-4 {
			t.Errorf("question 4: %v; from the summary %v", r, grew)
		}
	}

	// 5. Bytes per storage client.
	type client struct {
		traces      map[string]bool
		read, write int64
	}
	clients := map[string]*client{}
	for _, q := range reqs {
		k := jstr(q, "target_fs_type") + " " + jstr(q, "target_source")
		c := clients[k]
		if c == nil {
			c = &client{traces: map[string]bool{}}
			clients[k] = c
		}
		c.traces[jstr(q, "trace_id")] = true
		switch jstr(q, "op") {
		case "read":
			c.read += jnum(q, "bytes")
		case "write":
			c.write += jnum(q, "bytes")
		case "copy_file_range":
			c.read += jnum(q, "bytes")
			c.write += jnum(q, "bytes")
		}
	}
	if len(res[4]) != len(clients) {
		t.Errorf("question 5: %v; from the exports %d clients", res[4], len(clients))
	}
	for _, r := range res[4] {
		c := clients[r.Str("target_fs_type")+" "+r.Str("target_source")]
		if c == nil || r.Int(t, "traces") != int64(len(c.traces)) || r.Int(t, "read_bytes") != c.read || r.Int(t, "write_bytes") != c.write {
			t.Errorf("question 5: %v; from the exports %+v", r, c)
		}
	}
	for i, rows := range res {
		t.Logf("question %d: %v", i+1, rows)
	}
}
