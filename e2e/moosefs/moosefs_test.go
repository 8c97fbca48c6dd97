package moosefs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/e2e/e2etest"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// workloadReads is the size of the genomics job (WORKLOAD_READS): about 25 MiB read and
// written, 100-odd files.
const workloadReads = "20000"

// TestMooseFS records the genomics job over MooseFS and over a local directory, replays each
// recording onto the other storage, and compares, on one lab for all subtests.
func TestMooseFS(t *testing.T) {
	requireMooseFS(t)
	w := workDir(t)
	l := startLab(t, w, "lab")
	j := &jobs{w: w, l: l, script: filepath.Join(w.Repo, "scripts", "workload-genomics.sh")}
	if !t.Run("record genomics", j.testRecord) {
		t.Fatal("the recordings failed: replay and compare need them")
	}
	t.Run("report: metadata and data time per call, the client named", j.testReport)
	t.Run("replay local recording onto MooseFS", j.testReplayOntoMooseFS)
	t.Run("replay MooseFS recording onto local", j.testReplayOntoLocal)
	t.Run("compare", j.testCompare)
	t.Run("directory size after a write below it", j.testDirSize)
}

// jobs holds one lab's recordings and replays.
type jobs struct {
	w      *e2etest.Work
	l      *lab
	script string
	// local and mfs are the job's directories; localTrace and mfsTrace its recordings.
	local, mfs            string
	localTrace, mfsTrace  string
	localTree             map[string][]byte
	localRepMfs, mfsRepLo string // replay trace prefixes
}

// record runs the genomics job under iotap record in dir, in place.
func (j *jobs) record(t *testing.T, dir, out, backend string) {
	t.Helper()
	r := mustRun(t, dir, 5*time.Minute, []string{"WORKLOAD_READS=" + workloadReads}, j.w.Iotap, "record",
		"--target", dir, "-o", out, "--label", "backend="+backend, "--", "sh", j.script)
	if !strings.Contains(r.Stdout, "workload done: "+workloadReads+" reads") || !strings.Contains(r.Stderr, "iotap: job exit 0 after") {
		t.Fatalf("recording on %s: %s", backend, r)
	}
	t.Logf("record on %s:\n%s", backend, firstLines(r.Stderr, 16))
}

// testRecord records the job on both storages, checks byte-identical outputs and that each
// trace is complete and shows the job's calls on its own storage.
func (j *jobs) testRecord(t *testing.T) {
	j.local = filepath.Join(j.w.Dir, "local-job")
	j.mfs = filepath.Join(j.l.mnt, "job")
	for _, d := range []string{j.local, j.mfs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j.localTrace = filepath.Join(j.w.Dir, "local.iotap")
	j.mfsTrace = filepath.Join(j.w.Dir, "moosefs.iotap")
	j.record(t, j.local, j.localTrace, "local")
	j.record(t, j.mfs, j.mfsTrace, "moosefs")

	want := treeFiles(t, j.local)
	got := treeFiles(t, j.mfs)
	if strings.Join(keys(want), ",") != strings.Join(keys(got), ",") {
		t.Fatalf("file lists differ:\nlocal:   %v\nMooseFS: %v", keys(want), keys(got))
	}
	var total int
	for _, name := range keys(want) {
		total += len(want[name])
		if !bytes.Equal(want[name], got[name]) {
			t.Errorf("%s differs: local %d bytes, MooseFS %d bytes", name, len(want[name]), len(got[name]))
		}
	}
	for _, name := range []string{"reads.sorted.bam", "reads.sorted.bam.bai", "flagstat.txt", "archive.tar", "sqlite.out", "dump.sql", "extract/tree/b/reads.sam"} {
		if len(want[name]) == 0 {
			t.Errorf("%s is missing or empty", name)
		}
	}
	t.Logf("outputs byte-identical on MooseFS and on the local directory: %d files, %d bytes", len(want), total)
	j.localTree = want

	for _, side := range []struct{ path, backend string }{{j.localTrace, "local"}, {j.mfsTrace, "moosefs"}} {
		h, counts, ft, ok := e2etest.ReadTrace(t, side.path)
		if !ok || ft.Lost != 0 || ft.Dropped != 0 || ft.Events != uint64(sum(counts)) {
			t.Errorf("%s: complete %v, footer %+v, %d events read: want a complete trace with nothing lost", side.path, ok, ft, sum(counts))
		}
		for _, op := range []string{"read", "write", "create", "mkdir", "fsync", "unlink", "copy_file_range", "readdirplus"} {
			if counts[op] == 0 {
				t.Errorf("%s: no %s events (ops %v)", side.backend, op, counts)
			}
		}
		isMfs := h.Target.FSType == "fuse" && strings.HasPrefix(h.Target.Source, "mfs#")
		if isMfs != (side.backend == "moosefs") {
			t.Errorf("%s trace: target file system %q from %q", side.backend, h.Target.FSType, h.Target.Source)
		}
		t.Logf("%s: target %s (%s from %s), %d events: read %d, write %d, lookup %d, getattr %d", side.backend,
			h.Target.Path, h.Target.FSType, h.Target.Source, sum(counts), counts["read"], counts["write"], counts["lookup"], counts["getattr"])
	}
}

// testReport reads the MooseFS recording's report: each system call's time splits into its
// metadata requests' (path walks, opens, closes: round trips to the master) and its data
// requests' (reads and writes: the chunk server), the two adding up to the call's time; the
// storage is named "fuse (mfs)" and its client, sampled while recording, mfsmount.
func (j *jobs) testReport(t *testing.T) {
	r := mustRun(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "report", "--format", "json", j.mfsTrace)
	var doc struct {
		Traces []struct {
			Target struct {
				FSName string `json:"fs_name"`
			} `json:"target"`
			Client *struct {
				Name string `json:"name"`
			} `json:"client"`
		} `json:"traces"`
		Total struct {
			Syscalls []struct {
				Call    string `json:"call"`
				Count   uint64 `json:"count"`
				TotalNs int64  `json:"total_ns"`
				MetaNs  *int64 `json:"meta_ns"`
				DataNs  *int64 `json:"data_ns"`
			} `json:"syscalls"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &doc); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	if len(doc.Traces) != 1 || doc.Traces[0].Target.FSName != "fuse (mfs)" {
		t.Errorf("traces %+v: want the storage named fuse (mfs)", doc.Traces)
	} else if c := doc.Traces[0].Client; c == nil || c.Name != "mfsmount" {
		t.Errorf("storage client %+v: want mfsmount", c)
	}
	split := map[string][2]int64{}
	var lines []string
	for _, c := range doc.Total.Syscalls {
		if c.MetaNs == nil || c.DataNs == nil {
			t.Errorf("%s: no meta_ns/data_ns", c.Call)
			continue
		}
		if *c.MetaNs < 0 || *c.DataNs < 0 || *c.MetaNs+*c.DataNs != c.TotalNs {
			t.Errorf("%s: meta %d + data %d is not its time %d", c.Call, *c.MetaNs, *c.DataNs, c.TotalNs)
		}
		split[c.Call] = [2]int64{*c.MetaNs, *c.DataNs}
		lines = append(lines, fmt.Sprintf("%-10s %6d calls  meta %-12v data %v", c.Call, c.Count, time.Duration(*c.MetaNs), time.Duration(*c.DataNs)))
	}
	t.Logf("MooseFS recording, time per system call in metadata and data requests:\n%s", strings.Join(lines, "\n"))
	for _, call := range []string{"read", "write"} {
		if split[call][1] == 0 {
			t.Errorf("%s calls: no data time (%v)", call, split[call])
		}
	}
	for _, call := range []string{"open", "close", "stat", "mkdir", "unlink"} {
		if sp := split[call]; sp[0] == 0 || sp[1] != 0 {
			t.Errorf("%s calls: meta %d data %d, want metadata only", call, sp[0], sp[1])
		}
	}
	r = mustRun(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "report", j.mfsTrace)
	if !strings.Contains(r.Stdout, "fuse (mfs)") || !strings.Contains(r.Stdout, "meta and data: ") {
		t.Errorf("text report lacks the storage name or the meta/data split:\n%s", firstLines(r.Stdout, 30))
	}
}

// replayOnto replays tr onto targets (side by side) and checks each run's summary.
func (j *jobs) replayOnto(t *testing.T, tr, prefix string, targets ...string) {
	t.Helper()
	args := []string{j.w.Iotap, "replay", tr, "--progress", "never", "-o", prefix}
	for _, d := range targets {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--target", d)
	}
	r := mustRun(t, j.w.Dir, 5*time.Minute, nil, args...)
	t.Logf("replay output:\n%s", firstLines(r.Stdout, 40))
	for i, d := range targets {
		s := readSummary(t, fmt.Sprintf("%s.t%d.r1.json", prefix, i+1))
		checkSummary(t, d, s)
		// The replayed job leaves the tree the recorded job left: the same files, the same
		// sizes (replay writes zeros, not the job's data).
		got := treeSizes(t, d)
		want := map[string]int64{}
		for name, data := range j.localTree {
			want[name] = int64(len(data))
		}
		if !sameSizes(t, d, want, got) {
			continue
		}
		t.Logf("%s: the replayed tree has the job's %d files with their sizes", d, len(want))
	}
}

func (j *jobs) testReplayOntoMooseFS(t *testing.T) {
	j.localRepMfs = filepath.Join(j.w.Dir, "replay-local")
	j.replayOnto(t, j.localTrace, j.localRepMfs, filepath.Join(j.l.mnt, "replay-local"), filepath.Join(j.w.Dir, "replay-local-onto-local"))
}

func (j *jobs) testReplayOntoLocal(t *testing.T) {
	j.mfsRepLo = filepath.Join(j.w.Dir, "replay-moosefs")
	j.replayOnto(t, j.mfsTrace, j.mfsRepLo, filepath.Join(j.w.Dir, "replay-moosefs-onto-local"))
}

// testCompare compares each recording with its replays (the same work: no --force), and the
// two recordings with each other. Those are not the same work: MooseFS reports a 64 KiB
// st_blksize where ext4 reports 4 KiB, and the job's programs size their reads and writes by
// it, so compare needs --force there.
func (j *jobs) testCompare(t *testing.T) {
	if j.localRepMfs == "" || j.mfsRepLo == "" {
		t.Fatal("the replays did not run (see the replay subtests)")
	}
	r := mustRun(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "compare", j.localTrace, j.localRepMfs+".t1.r1.iotap", j.localRepMfs+".t2.r1.iotap")
	t.Logf("iotap compare local.iotap replay-local.t1.r1.iotap (MooseFS) replay-local.t2.r1.iotap (local):\n%s", firstLines(r.Stdout, 40))
	if !strings.Contains(r.Stdout, "3 sides, baseline local") {
		t.Errorf("compare header: %s", firstLines(r.Stdout, 1))
	}
	// Tables per system call: creates are opens, sqlite's syncs are fdatasync.
	for _, op := range []string{"\nread\n", "\nwrite\n", "\nopen\n", "\nfdatasync\n"} {
		if !strings.Contains(r.Stdout, op) {
			t.Errorf("compare has no table for %q", strings.TrimSpace(op))
		}
	}
	mustRun(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "compare", j.mfsTrace, j.mfsRepLo+".t1.r1.iotap")

	r = run(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "compare", j.localTrace, j.mfsTrace)
	t.Logf("iotap compare local.iotap moosefs.iotap (exit %d):\n%s", r.Code, r.Stderr)
	r = mustRun(t, j.w.Dir, time.Minute, nil, j.w.Iotap, "compare", "--force", j.localTrace, j.mfsTrace)
	t.Logf("iotap compare --force local.iotap moosefs.iotap:\n%s", r.Stdout)
	if !strings.Contains(r.Stdout, "2 sides, baseline local") {
		t.Errorf("compare header: %s", firstLines(r.Stdout, 1))
	}
}

// testDirSize: MooseFS reports a directory's size from what lies below it and its client
// keeps the attributes a GETATTR fetched for about a second. A directory whose subdirectory
// just got a file must show the same size through iotap as natively: a tracing layer that
// stats the directory on its own during the path walk would make the application see the
// cached, older size (tar: "file changed as we read it").
func (j *jobs) testDirSize(t *testing.T) {
	const job = `mkdir -p d/b && head -c 48411 /dev/zero > d/b/f && stat -c '%s %n' d d/b`
	for i := 0; i < 3; i++ {
		native := filepath.Join(j.l.mnt, fmt.Sprintf("dirsize-native-%d", i))
		traced := filepath.Join(j.l.mnt, fmt.Sprintf("dirsize-traced-%d", i))
		for _, d := range []string{native, traced} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		want := mustRun(t, native, time.Minute, nil, "sh", "-c", job).Stdout
		got := mustRun(t, traced, time.Minute, nil, j.w.Iotap, "record", "--target", traced,
			"-o", filepath.Join(j.w.Dir, fmt.Sprintf("dirsize-%d.iotap", i)), "--", "sh", "-c", job).Stdout
		if got != want {
			t.Errorf("round %d: through iotap %q, natively %q", i, got, want)
		}
		if i == 0 {
			t.Logf("natively and through iotap: %q", want)
		}
	}
}

// TestLabScripts checks the lab scripts themselves: a failed start leaves nothing behind,
// ports and address are the caller's, a second start refuses a running lab, and stop ends
// everything even while a process still works in the mount.
func TestLabScripts(t *testing.T) {
	requireMooseFS(t)
	w := workDir(t)

	t.Run("failed start", func(t *testing.T) {
		// mfsmount rejects the option after the master and the chunk server are up.
		l := newLab(w, "failing", "MFSLAB_MOUNT_OPTS=iotap-no-such-option", "MFSLAB_KEEP=1")
		out, err := l.script("start.sh")
		if err == nil {
			t.Fatalf("start.sh with a bad mount option succeeded:\n%s", out)
		}
		for _, want := range []string{"start failed; log tails:", "mfsmount.log", "unknown option", "stopped in"} {
			if !strings.Contains(out, want) {
				t.Errorf("start.sh output lacks %q:\n%s", want, out)
			}
		}
		s := l.state(t)
		if s.pids["mfsmaster"] == 0 || s.pids["mfschunkserver"] == 0 {
			t.Errorf("the failing start did not get as far as the daemons: %v", s.pids)
		}
		s.checkGone(t)
		out, err = l.script("stop.sh", "MFSLAB_KEEP=0")
		if err != nil {
			t.Errorf("stop.sh after a failed start: %v\n%s", err, out)
		}
		if _, err := os.Stat(l.dir); err == nil {
			t.Errorf("stop.sh left %s", l.dir)
		}
		if out, err := l.script("stop.sh"); err != nil || !strings.Contains(out, "nothing to stop") {
			t.Errorf("stop.sh once more: %v\n%s", err, out)
		}
	})

	t.Run("own ports, refuse a second start, stop a busy mount", func(t *testing.T) {
		l := startLab(t, w, "busy", "MFSLAB_ADDR=10.254.7.1", "MFSLAB_PORT_BASE=19419")
		l.stopped = true // this test stops it itself
		if src := mountSource(t, l.mnt); src != "mfs#10.254.7.1:19421" {
			t.Errorf("mount source %q, want mfs#10.254.7.1:19421 (the client port is MFSLAB_PORT_BASE+2)", src)
		}
		if out, err := l.script("start.sh"); err == nil || !strings.Contains(out, "already running") {
			t.Errorf("a second start.sh on a running lab: %v\n%s", err, out)
		}
		// A process of ours that keeps a file open and its working directory in the mount.
		if err := os.WriteFile(filepath.Join(l.mnt, "held"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		holder := exec.Command("sh", "-c", "exec sleep 300 < held")
		holder.Dir = l.mnt
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kill(holder.Process) })
		s := l.state(t)
		out, err := l.script("stop.sh")
		if err != nil {
			t.Errorf("stop.sh with a busy mount: %v\n%s", err, out)
		}
		if !strings.Contains(out, "is busy") || !strings.Contains(out, "detaching it lazily") {
			t.Errorf("stop.sh does not say the mount was busy:\n%s", out)
		}
		s.checkGone(t)
		if !e2etest.Alive(holder.Process.Pid) {
			t.Errorf("stop.sh ended a process outside the lab (pid %d)", holder.Process.Pid)
		}
		t.Logf("%s", out)
	})
}

func readSummary(t *testing.T, path string) replay.Summary {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s replay.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// checkSummary wants every recorded op replayed (replay does not issue ioctl), the same
// bytes, no divergence, no backend difference and no implicit open.
func checkSummary(t *testing.T, target string, s replay.Summary) {
	t.Helper()
	if s.Divergences != 0 || s.BackendDifferences != 0 || s.ImplicitOpens != 0 || s.Escapes != 0 {
		t.Errorf("%s: divergences %d, backend differences %d, implicit opens %d, escapes %d: %v %v",
			target, s.Divergences, s.BackendDifferences, s.ImplicitOpens, s.Escapes, s.Examples, s.BackendExamples)
	}
	if s.ReplayedOps+s.SkippedOps != s.RecordedOps || s.ReplayedOps == 0 {
		t.Errorf("%s: replayed %d + skipped %d of %d ops", target, s.ReplayedOps, s.SkippedOps, s.RecordedOps)
	}
	for _, o := range s.Ops {
		if o.Skipped > 0 && o.Op != trace.OpIoctl {
			t.Errorf("%s: %d %v ops skipped", target, o.Skipped, o.Op)
		}
	}
	if s.ReplayedRead != s.RecordedRead || s.ReplayedWrite != s.RecordedWrite || s.RecordedWrite == 0 {
		t.Errorf("%s: read %d of %d bytes, written %d of %d", target, s.ReplayedRead, s.RecordedRead, s.ReplayedWrite, s.RecordedWrite)
	}
	t.Logf("%s (%s): %d of %d ops replayed (%d ioctl skipped), divergences 0, read %d B, written %d B, replay %v vs recorded %v",
		target, s.Target.FSType, s.ReplayedOps, s.RecordedOps, s.SkippedOps, s.ReplayedRead, s.ReplayedWrite,
		s.ReplaySpan.Round(time.Millisecond), s.RecordedSpan.Round(time.Millisecond))
}

// treeFiles reads every regular file under root, by relative path.
func treeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// treeSizes returns the size of every regular file under root, by relative path.
func treeSizes(t *testing.T, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st, err := os.Lstat(p)
		if err == nil {
			out[rel] = st.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSizes reports (and fails t on) differences between two name -> size maps.
func sameSizes(t *testing.T, where string, want, got map[string]int64) bool {
	t.Helper()
	ok := true
	for name, n := range want {
		if g, found := got[name]; !found || g != n {
			t.Errorf("%s: %s has %d bytes (present %v), want %d", where, name, g, found, n)
			ok = false
		}
	}
	for name := range got {
		if _, found := want[name]; !found {
			t.Errorf("%s: %s is not in the recorded job's tree", where, name)
			ok = false
		}
	}
	return ok
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...\n")
	}
	return strings.Join(lines, "")
}
