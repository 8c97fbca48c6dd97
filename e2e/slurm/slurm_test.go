package slurm_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotap/iotap/e2e/e2etest"
	"github.com/iotap/iotap/internal/slurm"
)

// TestSlurm runs every scenario on a fresh cluster with each process tracking plugin:
// linuxproc (Slurm's default) and cgroup (what clusters such as AWS ParallelCluster use;
// there a process outliving its step is killed).
func TestSlurm(t *testing.T) {
	requireSlurm(t)
	w := workDir(t)
	for _, pt := range []string{"linuxproc", "cgroup"} {
		t.Run(pt, func(t *testing.T) { testCluster(t, w, pt) })
	}
}

// jobDir is one cluster run's directory, shared by all nodes.
type jobDir struct {
	w      *e2etest.Work
	c      *cluster
	dir    string // <work>/<proctrack>
	shared string // the traced directory (the workload's input and output)
}

func testCluster(t *testing.T, w *e2etest.Work, proctrack string) {
	c := startCluster(t, w, proctrack)
	d := &jobDir{w: w, c: c, dir: filepath.Join(w.Dir, proctrack)}
	d.shared = filepath.Join(d.dir, "shared")
	if err := os.MkdirAll(filepath.Join(d.shared, "input"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"traces", "flat"} {
		if err := os.MkdirAll(filepath.Join(d.dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeInputs(t, filepath.Join(d.shared, "input"))
	writeFile(t, filepath.Join(d.dir, "workload.sh"), workload, 0o755)

	var job string
	if !t.Run("sbatch record", func(t *testing.T) { job = d.testRecord(t) }) {
		t.Fatal("the recorded job failed: report and replay need its traces")
	}
	t.Run("report", func(t *testing.T) { d.testReport(t, job) })
	t.Run("sharded replay and compare", func(t *testing.T) { d.testReplay(t, job) })
	t.Run("placeholders", func(t *testing.T) { d.testPlaceholders(t) })
	t.Run("two tasks per node", func(t *testing.T) { d.testTasksPerNode(t) })
	t.Run("exit code", func(t *testing.T) { d.testExitCode(t) })
	t.Run("node error", func(t *testing.T) { d.testNodeError(t) })
	t.Run("background child", func(t *testing.T) { d.testBackgroundChild(t) })
}

// workload is the job each node runs under `iotap record`, in the traced directory: real
// programs, and node 1 writes 64 MiB more in 4 KiB writes so that it is the straggler.
const workload = `#!/bin/sh
set -eu
d=out/$SLURMD_NODENAME
rm -rf "$d"
mkdir -p "$d"
tar cf "$d/input.tar" input
sha256sum input/* > "$d/sums"
if command -v sqlite3 >/dev/null; then
	sqlite3 "$d/db.sqlite" 'create table t(a, b);' "insert into t values (1, '$SLURMD_NODENAME');" 'select count(*) from t;' > "$d/count"
fi
mkdir -p "$d/x"
tar xf "$d/input.tar" -C "$d/x"
cmp input/random.bin "$d/x/input/random.bin"
if [ "$SLURM_NODEID" = 1 ]; then
	dd if=/dev/zero of="$d/big" bs=4k count=16384 conv=fsync 2>/dev/null
fi
echo "workload done on $SLURMD_NODENAME"
`

func writeInputs(t *testing.T, dir string) {
	t.Helper()
	var b strings.Builder
	for i := 0; i < 50000; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	writeFile(t, filepath.Join(dir, "lines.txt"), b.String(), 0o644)
	rnd := make([]byte, 1<<20)
	for i := range rnd {
		rnd[i] = byte(i*7919 + i>>8)
	}
	writeFile(t, filepath.Join(dir, "random.bin"), string(rnd), 0o644)
	for i := 0; i < 20; i++ {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("small-%02d", i)), strings.Repeat("x", 100*i), 0o644)
	}
}

func writeFile(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
}

// sbatch submits script with --wait and returns the job id and sbatch's exit code.
func (d *jobDir) sbatch(t *testing.T, name, script string) (job string, code int) {
	t.Helper()
	path := filepath.Join(d.dir, name)
	writeFile(t, path, script, 0o755)
	r := d.c.run(t, d.dir, 5*time.Minute, "sbatch", "--wait", "--parsable", path)
	job = strings.TrimSpace(strings.Split(r.Stdout, ";")[0])
	if _, err := strconv.Atoi(job); err != nil {
		t.Fatalf("sbatch printed no job id: %s", r)
	}
	return job, r.Code
}

func (d *jobDir) slurmOut(t *testing.T, job string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(d.dir, "slurm-"+job+".out"))
	if err != nil {
		t.Fatalf("job output: %v", err)
	}
	return string(data)
}

// checkStepLeftNothing fails if an iotap process is still running or a node has a mount it
// did not have when the cluster started: the FUSE layer's lifetime stays inside the task.
func (d *jobDir) checkStepLeftNothing(t *testing.T) {
	t.Helper()
	if pids := procsRunning(filepath.Join(d.w.Bin, "iotap")); len(pids) > 0 {
		t.Errorf("iotap processes outlived their step: pids %v", pids)
	}
	d.c.checkNoNewMounts(t)
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(data), " "+d.dir) {
		t.Errorf("a mount under %s is visible on the host", d.dir)
	}
}

// testRecord runs the 2-node sbatch job under iotap record and checks one trace per node
// with the right labels. It returns the job id.
func (d *jobDir) testRecord(t *testing.T) string {
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH -N2
#SBATCH --ntasks-per-node=1
#SBATCH -t 5
#SBATCH -o %[1]s/slurm-%%j.out
mkdir -p %[1]s/traces/$SLURM_JOB_ID
cd %[2]s
srun %[3]s/iotap record --target %[2]s -o '%[1]s/traces/%%j/%%n-%%t.iotap' -- %[1]s/workload.sh
`, d.dir, d.shared, d.w.Bin)
	job, code := d.sbatch(t, "record.sbatch", script)
	out := d.slurmOut(t, job)
	t.Logf("job %s output:\n%s", job, out)
	if code != 0 {
		t.Fatalf("sbatch --wait: exit %d", code)
	}
	for _, n := range nodes {
		if !strings.Contains(out, "workload done on "+n) {
			t.Errorf("workload did not finish on %s", n)
		}
	}
	if got := strings.Count(out, "iotap: job exit 0 after"); got != 2 {
		t.Errorf("%d record summaries with job exit 0, want 2", got)
	}
	files, _ := filepath.Glob(filepath.Join(d.dir, "traces", job, "*"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if want := []string{"n1-0.iotap", "n2-1.iotap"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("traces of job %s: %q, want %q (one per node)", job, names, want)
	}
	for i, n := range nodes {
		h, counts, _, complete := e2etest.ReadTrace(t, filepath.Join(d.dir, "traces", job, fmt.Sprintf("%s-%d.iotap", n, i)))
		if h.Hostname != n {
			t.Errorf("%s: header host %q, want %q", n, h.Hostname, n)
		}
		labels := map[string]string{}
		for _, l := range h.Labels {
			labels[l.Key] = l.Value
		}
		want := map[string]string{"SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_NODEID": strconv.Itoa(i),
			"SLURM_PROCID": strconv.Itoa(i), "SLURMD_NODENAME": n}
		if !reflect.DeepEqual(labels, want) {
			t.Errorf("%s: labels %v, want %v", n, labels, want)
		}
		if !complete {
			t.Errorf("%s: trace has no footer (the recorder did not close it)", n)
		}
		if counts["read"] == 0 || counts["write"] == 0 || counts["create"] == 0 {
			t.Errorf("%s: op counts %v: want reads, writes and creates", n, counts)
		}
		t.Logf("%s: %d labels ok, ops %v", n, len(labels), counts)
	}
	d.checkStepLeftNothing(t)
	return job
}

// exportCounts counts a trace's events by op through `iotap export`.
func (d *jobDir) exportCounts(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	r := d.c.mustRun(t, d.dir, time.Minute, filepath.Join(d.w.Bin, "iotap"), "export", "--format", "jsonl", path)
	counts := map[string]uint64{}
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Op string `json:"op"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("export %s: %v", path, err)
		}
		counts[ev.Op]++
	}
	return counts
}

// reportJSON is the part of `iotap report --format json` (schema iotap.report/v1) the test reads.
type reportJSON struct {
	Schema string     `json:"schema"`
	Total  viewJSON   `json:"total"`
	By     string     `json:"by"`
	Groups []viewJSON `json:"groups"`
}

type viewJSON struct {
	Name       string `json:"name"`
	Events     uint64 `json:"events"`
	DurationNs int64  `json:"duration_ns"`
	TotalNs    int64  `json:"total_ns"`
	Ops        []struct {
		Op    string `json:"op"`
		Count uint64 `json:"count"`
		P99   int64  `json:"p99_ns"`
	} `json:"ops"`
}

func (v viewJSON) counts() map[string]uint64 {
	m := map[string]uint64{}
	for _, o := range v.Ops {
		if o.Count > 0 {
			m[o.Op] = o.Count
		}
	}
	return m
}

// testReport merges both nodes' traces: the merged op counts must equal the sum of the
// per-trace counts, the per-node view must have one group per node with that node's
// counts, and node n2 (which writes 32 MiB more) must come out as the straggler.
func (d *jobDir) testReport(t *testing.T, job string) {
	iotap := filepath.Join(d.w.Bin, "iotap")
	tdir := filepath.Join("traces", job) + "/"
	text := d.c.mustRun(t, d.dir, time.Minute, iotap, "report", "--by", "host", tdir)
	t.Logf("iotap report --by host %s:\n%s", tdir, firstLines(text.Stdout, 60))
	for _, n := range nodes {
		if !strings.Contains(text.Stdout, "-- host="+n+":") {
			t.Errorf("text report has no per-node view for %s", n)
		}
	}
	// Once report prints straggler lines (writeStragglers), n2 must be among them for its
	// I/O or wall time (a node's p99 may stand out on a busy machine: logged only).
	if strings.Contains(text.Stdout, "straggler: ") {
		if !strings.Contains(text.Stdout, "straggler: host=n2: I/O time") && !strings.Contains(text.Stdout, "straggler: host=n2: wall time") {
			t.Errorf("report does not name n2 for its I/O or wall time")
		}
		for _, l := range strings.Split(text.Stdout, "\n") {
			if strings.HasPrefix(l, "straggler: ") {
				t.Logf("report: %s", l)
			}
		}
	} else {
		t.Errorf("iotap report --by host prints no straggler section for a multi-node job:\n%s", text.Stdout)
	}
	r := d.c.mustRun(t, d.dir, time.Minute, iotap, "report", "--format", "json", "--by", "host", tdir)
	var rep reportJSON
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	sum := map[string]uint64{}
	per := map[string]map[string]uint64{}
	for i, n := range nodes {
		c := d.exportCounts(t, filepath.Join(tdir, fmt.Sprintf("%s-%d.iotap", n, i)))
		per["host="+n] = c
		for op, k := range c {
			sum[op] += k
		}
	}
	if got := rep.Total.counts(); !reflect.DeepEqual(got, sum) {
		t.Errorf("merged op counts %v != sum of per-trace counts %v", got, sum)
	} else {
		t.Logf("merged op counts = sum of per-trace counts (iotap export): %v", sum)
	}
	if rep.By != "host" || len(rep.Groups) != len(nodes) {
		t.Fatalf("report by %q has %d groups, want host and %d", rep.By, len(rep.Groups), len(nodes))
	}
	var ns []slurm.NodeStat
	for _, g := range rep.Groups {
		if want, ok := per[g.Name]; !ok || !reflect.DeepEqual(g.counts(), want) {
			t.Errorf("group %s: counts %v, want %v", g.Name, g.counts(), want)
		}
		n := slurm.NodeStat{Name: g.Name, IOTime: time.Duration(g.TotalNs), Wall: time.Duration(g.DurationNs)}
		for _, o := range g.Ops {
			n.Ops = append(n.Ops, slurm.OpLatency{Op: o.Op, Count: o.Count, P99: time.Duration(o.P99)})
		}
		ns = append(ns, n)
		t.Logf("%s: I/O time %v, wall %v, %d events", g.Name, n.IOTime, n.Wall, g.Events)
	}
	ss := slurm.Stragglers(ns, slurm.StragglerOptions{MinExcess: 20 * time.Millisecond})
	// n2 writes 64 MiB more: it must stand out by I/O or wall time, and n1 must not. A
	// p99 line may name either node on a busy machine (logged only).
	n2 := false
	for _, s := range ss {
		t.Log(s)
		switch {
		case s.Node == "host=n2" && (s.Metric == "I/O time" || s.Metric == "wall time"):
			n2 = true
		case s.Node == "host=n1" && (s.Metric == "I/O time" || s.Metric == "wall time"):
			t.Errorf("%s: n1 does less I/O than n2", s)
		}
	}
	if !n2 {
		t.Errorf("host=n2 (it writes 64 MiB more) is not named for its I/O or wall time")
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...\n")
	}
	return strings.Join(lines, "")
}

// shardReplay runs `iotap replay TRACES --shard auto` as a 2-node step: each task replays
// its share of the traces, each onto ROOT/<trace name>, results into OUT/<trace name>.
func (d *jobDir) shardReplay(t *testing.T, traces, out, root string, extra ...string) e2etest.Result {
	t.Helper()
	args := append([]string{"srun", "-N2", "--ntasks-per-node=1", "-l", "sh", "-c",
		`root=$1 iotap=$2 traces=$3 out=$4; shift 4; mkdir -p "$root" && exec "$iotap" replay "$traces" --shard auto --target "$root" --scratch --progress never -o "$out" "$@"`,
		"sh", root, filepath.Join(d.w.Bin, "iotap"), traces, out}, extra...)
	return d.c.run(t, d.dir, 3*time.Minute, args...)
}

// testReplay replays the job sharded over both nodes (task i gets trace i), once onto a
// baseline directory on the shared file system and once onto each node's own /tmp (the
// candidate), and compares the two runs as whole jobs.
func (d *jobDir) testReplay(t *testing.T, job string) {
	iotap := filepath.Join(d.w.Bin, "iotap")
	tdir := filepath.Join(d.dir, "traces", job)
	rdir := filepath.Join(d.dir, "replays", job)
	cand := "/tmp/iotap-cand-" + job // node-local: each node has its own /tmp
	runs := []struct{ name, root string }{
		{"base", filepath.Join(d.dir, "replay-base", job)},
		{"cand", cand},
	}
	for _, run := range runs {
		r := d.shardReplay(t, tdir, filepath.Join(rdir, run.name), run.root, "--on-diverge", "warn")
		t.Logf("replay onto %s:\n%s%s", run.root, firstLines(r.Stdout, 20), firstLines(r.Stderr, 10))
		if r.Code != 0 {
			t.Fatalf("sharded replay onto %s: %s", run.root, r)
		}
		for i, n := range nodes {
			want := fmt.Sprintf("%d: task %d of 2 on %s: replaying %s/%s-%d.iotap onto %s/%s-%d\n", i, i, n, tdir, n, i, run.root, n, i)
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("want %q in the output (shard rule: task %d replays trace %d)", want, i, i)
			}
			res := filepath.Join(rdir, run.name, fmt.Sprintf("%s-%d.t1.r1.iotap", n, i))
			h, counts, _, complete := e2etest.ReadTrace(t, res)
			if h.Hostname != n || !complete || counts["write"] == 0 {
				t.Errorf("%s: host %q (want %s), complete %v, ops %v", res, h.Hostname, n, complete, counts)
			}
		}
	}
	// The candidate really was node-local: each node's /tmp is <lab>/nodes/<node>/tmp.
	for i, n := range nodes {
		p := filepath.Join(d.c.dir, "nodes", n, "tmp", filepath.Base(cand), fmt.Sprintf("%s-%d", n, i), "out", n, "input.tar")
		if _, err := os.Stat(p); err != nil {
			t.Errorf("candidate replay of %s did not land on its node's /tmp: %v", n, err)
		}
	}
	r := d.c.run(t, d.dir, time.Minute, iotap, "compare", filepath.Join("replays", job, "base")+"/", filepath.Join("replays", job, "cand")+"/")
	t.Logf("iotap compare replays/%s/base/ replays/%s/cand/:\n%s%s", job, job, firstLines(r.Stdout, 30), r.Stderr)
	if r.Code != 0 || !strings.Contains(r.Stdout, "2 sides") || !strings.Contains(r.Stdout, "n1,n2") {
		t.Errorf("compare of the two replays: %s", r)
	}
	// Recorded job against its replay: compare's same-work check decides; logged, not
	// asserted (replay folds the kernel's lookups and does not re-issue releases).
	r = d.c.run(t, d.dir, time.Minute, iotap, "compare", filepath.Join("traces", job)+"/", filepath.Join("replays", job, "cand")+"/")
	t.Logf("iotap compare traces/%s/ replays/%s/cand/ (exit %d):\n%s%s", job, job, r.Code, firstLines(r.Stdout, 12), r.Stderr)
	d.checkStepLeftNothing(t)
}

// testPlaceholders checks every -o placeholder of iotap record in a 2-node step.
func (d *jobDir) testPlaceholders(t *testing.T) {
	r := d.c.mustRun(t, d.shared, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=1", "-l", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", d.shared, "-o", filepath.Join(d.dir, "flat", "ph-%j-%n-%t-%h-%p-%%.iotap"), "--",
		"sh", "-c", `echo "job=$SLURM_JOB_ID"`)
	job := ""
	for _, l := range strings.Split(r.Stdout, "\n") {
		if _, v, ok := strings.Cut(l, "job="); ok {
			job = v
		}
	}
	for i, n := range nodes {
		// %h is the host name: the node's own (n1, n2) in this cluster's UTS namespaces.
		pattern := filepath.Join(d.dir, "flat", fmt.Sprintf("ph-%s-%s-%d-%s-*-%%.iotap", job, n, i, n))
		m, _ := filepath.Glob(pattern)
		if len(m) != 1 {
			all, _ := filepath.Glob(filepath.Join(d.dir, "flat", "ph-*"))
			t.Fatalf("no trace matches %s; have %q", pattern, all)
		}
		pid := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m[0]), fmt.Sprintf("ph-%s-%s-%d-%s-", job, n, i, n)), "-%.iotap")
		if _, err := strconv.Atoi(pid); err != nil {
			t.Errorf("%s: %%p gave %q, not a pid", m[0], pid)
		}
		t.Logf("task %d: %s", i, filepath.Base(m[0]))
	}
	// The issue's own example: a bare srun naming a directory per job, which nobody could
	// create beforehand: record creates it.
	r = d.c.run(t, d.shared, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=1", "-l", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", d.shared, "-o", filepath.Join(d.dir, "perjob", "%j", "%n-%t.iotap"), "--", "sh", "-c", `echo "job=$SLURM_JOB_ID"`)
	m, _ := filepath.Glob(filepath.Join(d.dir, "perjob", "*", "n[12]-[01].iotap"))
	if r.Code != 0 || len(m) != 2 {
		t.Errorf("srun iotap record -o 'perjob/%%j/%%n-%%t.iotap': traces %q: %s", m, r)
	}
}

// testTasksPerNode records 4 tasks on 2 nodes (each task mounts over the same directory in
// its own mount namespace, two at a time on each node), then replays the 4 traces with 2
// tasks: under the shard rule each task replays two traces, one after the other.
func (d *jobDir) testTasksPerNode(t *testing.T) {
	out := filepath.Join(d.dir, "multi")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	d.c.mustRun(t, d.shared, 2*time.Minute, "srun", "-N2", "-n4", "--ntasks-per-node=2", "-l", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", d.shared, "-o", filepath.Join(out, "%n-%t.iotap"), "--",
		"sh", "-c", `cat input/lines.txt > /dev/null && sha256sum input/random.bin > /dev/null`)
	want := map[string]string{"n1-0.iotap": "n1", "n1-1.iotap": "n1", "n2-2.iotap": "n2", "n2-3.iotap": "n2"}
	for f, host := range want {
		h, counts, _, complete := e2etest.ReadTrace(t, filepath.Join(out, f))
		if h.Hostname != host || !complete || counts["read"] == 0 {
			t.Errorf("%s: host %q (want %s), complete %v, ops %v", f, h.Hostname, host, complete, counts)
		}
	}
	d.checkStepLeftNothing(t)
	r := d.shardReplay(t, out, filepath.Join(d.dir, "multi-replays"), "/tmp/iotap-multi")
	if r.Code != 0 {
		t.Fatalf("sharded replay of 4 traces on 2 tasks: %s", r)
	}
	// Natural order n1-0, n1-1, n2-2, n2-3: task 0 (on n1) gets the 1st and 3rd.
	for f, host := range map[string]string{"n1-0": "n1", "n2-2": "n1", "n1-1": "n2", "n2-3": "n2"} {
		h, _, _, complete := e2etest.ReadTrace(t, filepath.Join(d.dir, "multi-replays", f+".t1.r1.iotap"))
		if h.Hostname != host || !complete {
			t.Errorf("replay of %s ran on %q, want %s (shard rule), complete %v", f, h.Hostname, host, complete)
		}
	}
	t.Logf("%s", firstLines(r.Stdout, 4))
}

// testExitCode: one task's job fails; its exit code and message reach the user through
// iotap record, srun and sbatch --wait, and the failing node's trace is still complete.
func (d *jobDir) testExitCode(t *testing.T) {
	script := fmt.Sprintf(`#!/bin/bash
#SBATCH -N2
#SBATCH --ntasks-per-node=1
#SBATCH -t 5
#SBATCH -o %[1]s/slurm-%%j.out
mkdir -p %[1]s/traces/$SLURM_JOB_ID
cd %[2]s
srun %[3]s/iotap record --target %[2]s -o '%[1]s/traces/%%j/%%n-%%t.iotap' -- sh -c 'cat input/lines.txt > /dev/null; if [ "$SLURM_PROCID" = 1 ]; then echo "boom on $SLURMD_NODENAME" >&2; exit 3; fi'
`, d.dir, d.shared, d.w.Bin)
	job, code := d.sbatch(t, "fail.sbatch", script)
	out := d.slurmOut(t, job)
	t.Logf("job %s (sbatch --wait exit %d) output:\n%s", job, code, out)
	if code != 3 {
		t.Errorf("sbatch --wait exit %d, want 3 (the failing task's exit code)", code)
	}
	for _, want := range []string{"boom on n2", "srun: error: n2: task 1: Exited with exit code 3", "iotap: job exit 3 after", "iotap: job exit 0 after"} {
		if !strings.Contains(out, want) {
			t.Errorf("job output lacks %q", want)
		}
	}
	if r := d.c.run(t, d.dir, time.Minute, "scontrol", "show", "job", job); !strings.Contains(r.Stdout, "ExitCode=3:0") {
		t.Errorf("scontrol show job %s: want ExitCode=3:0:\n%s", job, r.Stdout)
	}
	for i, n := range nodes {
		if _, counts, _, complete := e2etest.ReadTrace(t, filepath.Join(d.dir, "traces", job, fmt.Sprintf("%s-%d.iotap", n, i))); !complete || counts["read"] == 0 {
			t.Errorf("%s: trace complete %v, ops %v: the trace must be closed whatever the job's status", n, complete, counts)
		}
	}
	// The same through srun alone: srun exits with the largest task exit code.
	r := d.c.run(t, d.shared, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=1", "-l", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", d.shared, "-o", filepath.Join(d.dir, "flat", "%j-%n-%t.iotap"), "--",
		"sh", "-c", `if [ "$SLURM_PROCID" = 0 ]; then exit 5; fi`)
	if r.Code != 5 || !strings.Contains(r.Stderr, "n1: task 0: Exited with exit code 5") {
		t.Errorf("srun iotap record with task 0 exiting 5: %s", r)
	}
	d.checkStepLeftNothing(t)
}

// testNodeError: iotap itself fails on one node (its target exists only on n1, in n1's
// private /tmp); the error names the node's task and reaches srun's exit code, while n1
// records its node-local directory.
func (d *jobDir) testNodeError(t *testing.T) {
	local := "/tmp/iotap-local"
	d.c.mustRun(t, d.dir, time.Minute, "srun", "-N1", "-w", "n1", "sh", "-c", "mkdir -p "+local+" && echo data > "+local+"/f")
	r := d.c.run(t, d.dir, 2*time.Minute, "srun", "-N2", "--ntasks-per-node=1", "-l", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", local, "-o", filepath.Join(d.dir, "flat", "local-%j-%n-%t.iotap"), "--", "cat", local+"/f")
	t.Logf("%s", r)
	if r.Code != 2 {
		t.Errorf("srun exit %d, want 2 (iotap's usage error on n2: a missing target)", r.Code)
	}
	all := r.Stdout + r.Stderr
	for _, want := range []string{"1: iotap record: usage: target " + local + " does not exist", "srun: error: n2: task 1: Exited with exit code 2", "0: data"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	m, _ := filepath.Glob(filepath.Join(d.dir, "flat", "local-*-n1-0.iotap"))
	if len(m) != 1 {
		t.Errorf("n1's trace of its node-local target: %q", m)
	}
	d.checkStepLeftNothing(t)
}

// testBackgroundChild: the job leaves a background process holding the traced directory.
// iotap record must still end with its job (detaching the busy mount, closing the trace)
// and leave no daemon and no mount behind; what becomes of the user's own background
// process is up to Slurm's process tracking (cgroup: killed at step end).
func (d *jobDir) testBackgroundChild(t *testing.T) {
	pidFile := filepath.Join(d.dir, "bg.pid")
	t0 := time.Now()
	r := d.c.run(t, d.shared, 2*time.Minute, "srun", "-N1", "-w", "n1", filepath.Join(d.w.Bin, "iotap"), "record",
		"--target", d.shared, "-o", filepath.Join(d.dir, "flat", "bg-%j-%n-%t.iotap"), "--",
		"sh", "-c", "sleep 30 < /dev/null > /dev/null 2>&1 & echo $! > "+pidFile+"; cat input/lines.txt > /dev/null")
	took := time.Since(t0)
	t.Logf("%s", r)
	data, _ := os.ReadFile(pidFile)
	bg, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	t.Cleanup(func() {
		if bg > 0 && e2etest.Alive(bg) {
			_ = syscall.Kill(bg, syscall.SIGKILL) // the test's own background sleep, by PID
		}
	})
	if r.Code != 0 {
		t.Errorf("srun exit %d, want 0", r.Code)
	}
	if took > 20*time.Second {
		t.Errorf("the step took %v: iotap waited for the background child", took)
	}
	if !strings.Contains(r.Stderr, "still in use") {
		t.Errorf("record did not say the traced directory was still in use")
	}
	d.checkStepLeftNothing(t)
	gone := bg > 0 && !e2etest.Alive(bg)
	// Under proctrack/cgroup slurmstepd kills what is left in the step's cgroup as the step
	// ends; give it KillWait (5 s in scripts/labs/slurm) to do so. Under linuxproc the child escapes.
	for i := 0; i < 70 && !gone && d.c.proctrack == "cgroup"; i++ {
		time.Sleep(100 * time.Millisecond)
		gone = !e2etest.Alive(bg)
	}
	t.Logf("proctrack/%s: the job's background child (pid %d) after its step: gone=%v", d.c.proctrack, bg, gone)
	if d.c.proctrack == "cgroup" && !gone {
		t.Errorf("proctrack/cgroup did not end the step's background child")
	}
}
