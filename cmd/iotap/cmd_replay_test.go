package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// writeSmallTrace writes a trace that reads a pre-existing file and creates another.
func writeSmallTrace(t *testing.T, path string) {
	t.Helper()
	w, err := trace.Create(path, trace.Header{Kind: "record", Target: trace.Target{Path: "/x", FSType: "ext4"}}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := w.Path(trace.RootPath, "in.dat")
	out := w.Path(trace.RootPath, "out.dat")
	w.AddFile(trace.File{Path: in, Type: trace.TypeFile, Mode: 0o644, Size: 8192})
	evs := []trace.Event{
		{Op: trace.OpLookup, Path: in, Mode: unix.S_IFREG | 0o644, Ret: 8192},
		{Op: trace.OpOpen, Path: in, Handle: 1, Flags: unix.O_RDONLY},
		{Op: trace.OpRead, Path: in, Handle: 1, Size: 4096, Ret: 4096},
		{Op: trace.OpRead, Path: in, Handle: 1, Offset: 4096, Size: 8192, Ret: 4096},
		{Op: trace.OpFlush, Path: in, Handle: 1},
		{Op: trace.OpRelease, Path: in, Handle: 1},
		{Op: trace.OpLookup, Path: out, Errno: uint16(unix.ENOENT)},
		{Op: trace.OpCreate, Path: out, Handle: 2, Flags: unix.O_WRONLY | unix.O_CREAT, Mode: 0o644},
		{Op: trace.OpWrite, Path: out, Handle: 2, Size: 8192, Ret: 8192},
		{Op: trace.OpFlush, Path: out, Handle: 2},
		{Op: trace.OpRelease, Path: out, Handle: 2},
	}
	for i := range evs {
		evs[i].Start, evs[i].Dur, evs[i].Tid, evs[i].Pid = int64(1e6+i*20000), 5000, 7, 7
		w.Append(&evs[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func runReplayCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestReplayCommand(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	t1, t2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	for _, d := range []string{t1, t2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prefix := filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", t1, "--target", t2, "--repeat", "2", "-o", prefix, "--timing", "afap")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"starting state: 0 directories, 1 files", "replayed 7 of 7 (skipped 0), divergences 0", "iotap compare", "baseline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// --no-compare: the runs' summaries without the comparison of the targets.
	code, out, errs = runReplayCLI(t, "replay", tr, "--target", t1, "--target", t2, "--scratch", "-o", filepath.Join(dir, "nc"), "--timing", "afap", "--no-compare")
	if code != 0 || strings.Count(out, "replayed 7 of 7 (skipped 0), divergences 0") != 2 || strings.Contains(out, "baseline") {
		t.Errorf("--no-compare: exit %d\n%s\n%s", code, out, errs)
	}
	for _, f := range []string{"res.t1.r1", "res.t2.r1", "res.t1.r2", "res.t2.r2"} {
		js, err := os.ReadFile(filepath.Join(dir, f+".json"))
		if err != nil {
			t.Fatal(err)
		}
		checkSummaryJSON(t, f, js)
		var s replay.Summary
		if err := json.Unmarshal(js, &s); err != nil {
			t.Fatal(err)
		}
		if s.ReplayedOps != 7 || s.Divergences != 0 || s.ReplayedRead != 8192 || s.ReplayedWrite != 8192 {
			t.Errorf("%s: ops %d divergences %d read %d written %d", f, s.ReplayedOps, s.Divergences, s.ReplayedRead, s.ReplayedWrite)
		}
		r, err := trace.Open(filepath.Join(dir, f+".iotap"))
		if err != nil {
			t.Fatal(err)
		}
		if h := r.Header(); h.Kind != "replay" || h.Target.FSType == "" {
			t.Errorf("%s: header %+v", f, h)
		}
		_ = r.Close()
	}
	if b, _ := os.ReadFile(filepath.Join(t1, "out.dat")); len(b) != 8192 {
		t.Errorf("out.dat has %d bytes", len(b))
	}
	// Dry run needs no target.
	code, out, _ = runReplayCLI(t, "replay", tr, "--dry-run")
	if code != 0 || !strings.Contains(out, "reproducible") {
		t.Fatalf("dry run: exit %d\n%s", code, out)
	}
}

func TestReplayCommandErrors(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	full := filepath.Join(dir, "full")
	mustDo(t, os.Mkdir(full, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(full, "keep"), []byte("x"), 0o644))
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no target", []string{"replay", tr}, exitUsage, "--target"},
		{"no trace", []string{"replay", "--target", dir}, exitUsage, "exactly one trace"},
		{"stdin", []string{"replay", "-", "--target", dir}, exitUsage, "standard input"},
		{"bad timing", []string{"replay", tr, "--target", dir, "--timing", "fast"}, exitUsage, "timing"},
		{"bad policy", []string{"replay", tr, "--target", dir, "--on-diverge", "panic"}, exitUsage, "on-diverge"},
		{"bad round trip", []string{"replay", tr, "--target", dir, "--round-trip", "fast"}, exitUsage, "--round-trip"},
		{"negative round trip", []string{"replay", tr, "--target", dir, "--round-trip", "-5us"}, exitUsage, "--round-trip"},
		{"bad think cpu", []string{"replay", tr, "--target", dir, "--think-cpu", "burn"}, exitUsage, "--think-cpu"},
		{"non-empty target", []string{"replay", tr, "--target", full}, exitUsage, "not empty"},
		{"missing target", []string{"replay", tr, "--target", filepath.Join(dir, "nope")}, exitUsage, "nope"},
		{"missing trace", []string{"replay", filepath.Join(dir, "nope.iotap"), "--target", full}, exitError, "nope.iotap"},
		{"trace inside the target", []string{"replay", tr, "--target", dir, "--scratch"}, exitUsage, "holds the trace"},
		{"results inside the target", []string{"replay", tr, "--target", full, "--scratch", "-o", filepath.Join(full, "res")}, exitUsage, "would hold the results"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errs := runReplayCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(errs, tt.msg) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tt.code, errs, tt.msg)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep")); err != nil || string(b) != "x" {
		t.Fatal("a refused replay touched the non-empty target")
	}
	// With --scratch the non-empty target is cleared and used.
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", full, "--scratch", "-o", filepath.Join(dir, "s"))
	if code != 0 || !strings.Contains(out, "divergences 0") {
		t.Fatalf("scratch: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(full, "keep")); err == nil {
		t.Fatal("scratch target was not cleared")
	}
}

// TestReplayRecordedAA records a real job (tar and sqlite3) in place, replays the trace
// onto two fresh directories, and checks op counts and bytes match exactly with no
// divergence.
func TestReplayRecordedAA(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "tar", "sqlite3")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	src := filepath.Join(dir, "src")
	mustDo(t, os.MkdirAll(work, 0o755))
	mustDo(t, os.MkdirAll(src, 0o755))
	for i := 0; i < 20; i++ {
		mustDo(t, os.WriteFile(filepath.Join(src, "f"+string(rune('a'+i))), bytes.Repeat([]byte{byte(i)}, 1000*(i+1)), 0o644))
	}
	if out, err := exec.Command("tar", "cf", filepath.Join(work, "in.tar"), "-C", dir, "src").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	tr := filepath.Join(dir, "rec.iotap")
	job := `mkdir x && tar xf in.tar -C x && sqlite3 db "create table t(a); insert into t values(1);" && sqlite3 db "insert into t select a+1 from t;" && cat x/src/fa > /dev/null && rm x/src/fb && mv x/src/fc x/fc`
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	t1, t2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	mustDo(t, os.Mkdir(t1, 0o755))
	mustDo(t, os.Mkdir(t2, 0o755))
	prefix := filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", t1, "--target", t2, "-o", prefix)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	// The comparison of the targets is printed once, the verdict first.
	if v, c := strings.Index(out, t2+": "), strings.Index(out, "iotap compare:"); strings.Count(out, "iotap compare:") != 1 ||
		strings.Count(out, "the baseline's I/O time") != 1 || v < 0 || v > c {
		t.Errorf("the comparison is not printed once, verdict first:\n%s", out)
	}
	for _, f := range []string{"res.t1.r1.json", "res.t2.r1.json"} {
		js, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		checkSummaryJSON(t, f, js)
		var s replay.Summary
		if err := json.Unmarshal(js, &s); err != nil {
			t.Fatal(err)
		}
		if s.Divergences != 0 || s.ReplayedOps != s.RecordedOps || s.SkippedOps != 0 ||
			s.ReplayedRead != s.RecordedRead || s.ReplayedWrite != s.RecordedWrite || s.ImplicitOpens != 0 {
			t.Errorf("%s: ops %d/%d skipped %d divergences %d read %d/%d written %d/%d implicit %d: %v", f,
				s.ReplayedOps, s.RecordedOps, s.SkippedOps, s.Divergences, s.ReplayedRead, s.RecordedRead,
				s.ReplayedWrite, s.RecordedWrite, s.ImplicitOpens, s.Examples)
		}
	}
	// The replayed tree matches the recorded job's result.
	for _, p := range []string{"x/src/fa", "x/fc", "db"} {
		a, err1 := os.Stat(filepath.Join(work, p))
		b, err2 := os.Stat(filepath.Join(t1, p))
		if err1 != nil || err2 != nil || a.Size() != b.Size() {
			t.Errorf("%s: recorded %v %v, replayed %v %v", p, a, err1, b, err2)
		}
	}
	if _, err := os.Stat(filepath.Join(t1, "x/src/fb")); err == nil {
		t.Error("x/src/fb exists after the replay removed it")
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplayCommandS3 replays onto a directory and onto an s3:// target (an in-process
// fake S3) side by side: the command drives any Backend, and writes the S3 request
// tallies next to the replay trace.
func TestReplayCommandS3(t *testing.T) {
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"data"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	t1 := filepath.Join(dir, "t1")
	mustDo(t, os.Mkdir(t1, 0o755))
	prefix := filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", t1, "--target", "s3://data/run1", "--s3-endpoint", srv.URL, "-o", prefix)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	if !strings.Contains(out, "iotap compare") || strings.Count(out, "divergences 0") != 2 {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(prefix + ".t2.r1.requests.json"); err != nil {
		t.Errorf("no request tallies for the S3 target: %v", err)
	}
	// The report of the S3 replay shows the requests each call issued, and their cost.
	code, out, errs = runReplayCLI(t, "report", prefix+".t2.r1.iotap", "--s3-prices", "GetObject=0.0004,PutObject=0.005")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"S3 requests, replay phase (mountpoint profile)", "requests:", "est. cost"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// compare of the two targets lists the S3 side's requests under the tables.
	code, out, errs = runReplayCLI(t, "compare", prefix+".t1.r1.iotap", prefix+".t2.r1.iotap")
	if code != 0 || strings.Count(out, "S3 requests, replay phase") != 1 {
		t.Errorf("compare: exit %d, want one S3 request table:\n%s\n%s", code, out, errs)
	}
	// The S3 side names its profile, and its requests' bytes beside the bytes its calls used.
	if !regexp.MustCompile(`(?m)^s3://data/run1/ +replay +\S+ +s3 \(mountpoint\) `).MatchString(out) ||
		!regexp.MustCompile(`bytes +fetched by GET \S+ for \S+ used \([0-9.]+×\); sent by PUT and UploadPart \S+ for \S+ used \([0-9.]+×\)`).MatchString(out) {
		t.Errorf("compare: no S3 profile or request bytes:\n%s", out)
	}
	code, out, _ = runReplayCLI(t, "report", prefix+".t1.r1.iotap")
	if code != 0 || strings.Contains(out, "S3 requests") {
		t.Errorf("report of the directory replay: exit %d, mentions S3 requests:\n%s", code, out)
	}
}

// TestReplaySidesToldApart: two S3 targets that differ only in their settings are told
// apart in each run's header and summary, and a standalone compare of the replay traces
// names each side by its target and settings (and, for runs of one target, its run), not
// by the traces' file names.
func TestReplaySidesToldApart(t *testing.T) {
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"data"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	prefix := filepath.Join(dir, "res")
	t16, t64 := "s3://data/p?memory_limit=16MiB", "s3://data/p?memory_limit=64MiB"
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", t16, "--target", t64, "--repeat", "2", "--no-compare",
		"--s3-endpoint", srv.URL, "-o", prefix, "--sample-interval", "0")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"run 1/2, target 1 (" + t16 + "): ", "run 1/2, target 2 (" + t64 + "): ",
		"replay onto s3://data/p/ (s3, profile=mountpoint memory_limit=16MiB)",
		"replay onto s3://data/p/ (s3, profile=mountpoint memory_limit=64MiB)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runReplayCLI(t, "compare", prefix+".t1.r1.iotap", prefix+".t2.r1.iotap", prefix+".t2.r2.iotap")
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{
		"baseline s3://data/p/?memory_limit=16MiB;",
		"\ns3://data/p/?memory_limit=64MiB run 1 ", "\ns3://data/p/?memory_limit=64MiB run 2 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compare output lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)(^|baseline )res\.t\d\.r\d[ ;:]`).MatchString(out) {
		t.Errorf("compare names a side by its file:\n%s", out)
	}
	// A side of both runs of one target merged is that target.
	code, out, errs = runReplayCLI(t, "compare", prefix+".t1.r*.iotap", prefix+".t2.r*.iotap")
	if code != 0 || !strings.Contains(out, "\ns3://data/p/?memory_limit=64MiB ") || strings.Contains(out, " run 1") {
		t.Errorf("compare of merged runs: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestReplayDivergedExitStatus: a replay that ran to the end exits 0 under
// --on-diverge=warn (the default) and ignore, with the divergences counted in the summary
// and its JSON; --on-diverge=abort exits 1.
func TestReplayDivergedExitStatus(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	for _, tc := range []struct {
		policy string
		code   int
	}{{"warn", 0}, {"ignore", 0}, {"abort", exitError}} {
		t.Run(tc.policy, func(t *testing.T) {
			tgt := filepath.Join(dir, "t-"+tc.policy)
			mustDo(t, os.Mkdir(tgt, 0o755))
			prefix := filepath.Join(dir, "res-"+tc.policy)
			// --prepare=skip on an empty directory: in.dat is missing, its open diverges.
			code, out, errs := runReplayCLI(t, "replay", tr, "--target", tgt, "--prepare", "skip", "--on-diverge", tc.policy, "-o", prefix)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errs)
			}
			if tc.code != 0 {
				return
			}
			if !strings.Contains(out, "divergences ") || strings.Contains(out, "divergences 0,") {
				t.Errorf("summary does not count the divergences:\n%s", out)
			}
			js, err := os.ReadFile(prefix + ".t1.r1.json")
			if err != nil {
				t.Fatal(err)
			}
			var s replay.Summary
			if err := json.Unmarshal(js, &s); err != nil {
				t.Fatal(err)
			}
			if s.Divergences == 0 {
				t.Errorf("JSON summary has no divergences: %s", js)
			}
			if tc.policy == "warn" && !strings.Contains(errs, "diverged from the trace") {
				t.Errorf("no warning on stderr: %q", errs)
			}
		})
	}
}

// TestReplayRecordedPrograms records real programs whose replay is easy to get wrong, replays
// the recording onto a fresh directory, and compares the two without --force:
//   - a shell redirection (`> file`) opened by the shell and written by the command it
//     forked, closed by the shell right after;
//   - a redirection of a group of commands (several children write one descriptor);
//   - GNU cp, which copies with copy_file_range (the copy is then read back), and GNU
//     cat of two files into one (copy_file_range at the output's position);
//   - rm -rf of a name the next command creates.
func TestReplayRecordedPrograms(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "awk", "cp", "seq")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	tr := filepath.Join(dir, "rec.iotap")
	job := `awk 'BEGIN { for (i = 0; i < 20000; i++) print "line", i }' > out.txt; ` +
		`{ seq 1 5000; awk 'BEGIN { print "x" }'; } > group.txt; ` +
		`cp out.txt copy.txt && cat copy.txt > /dev/null && cat out.txt group.txt > cat.txt && ` +
		`rm -rf d && mkdir d && echo done > d/f`
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	t1 := filepath.Join(dir, "t1")
	mustDo(t, os.Mkdir(t1, 0o755))
	prefix := filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", t1, "-o", prefix)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	js, err := os.ReadFile(prefix + ".t1.r1.json")
	if err != nil {
		t.Fatal(err)
	}
	var s replay.Summary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if s.Divergences != 0 || s.ReplayedRead != s.RecordedRead || s.ReplayedWrite != s.RecordedWrite {
		t.Errorf("divergences %d, read %d of %d, written %d of %d: %v", s.Divergences,
			s.ReplayedRead, s.RecordedRead, s.ReplayedWrite, s.RecordedWrite, s.Examples)
	}
	var copies bool
	for _, o := range s.Ops {
		if o.Op == trace.OpCopyFileRange {
			copies = true
			if o.Replayed != o.Recorded || o.Skipped != 0 {
				t.Errorf("copy_file_range: replayed %d of %d, skipped %d", o.Replayed, o.Recorded, o.Skipped)
			}
		}
	}
	if !copies {
		t.Logf("this cp (%s) did not use copy_file_range: only its read/write copy was checked", cpVersion())
	}
	for _, p := range []string{"out.txt", "group.txt", "copy.txt", "cat.txt", "d/f"} {
		a, err1 := os.Stat(filepath.Join(work, p))
		b, err2 := os.Stat(filepath.Join(t1, p))
		if err1 != nil || err2 != nil || a.Size() != b.Size() {
			t.Errorf("%s: recorded %v %v, replayed %v %v", p, a, err1, b, err2)
		}
	}
	// The recording and its replay are the same work: compare needs no --force.
	code, out, errs = runReplayCLI(t, "compare", tr, prefix+".t1.r1.iotap")
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "NOTE: same-work check of recorded against replayed traces leaves out") {
		t.Errorf("compare does not say which ops it left out:\n%s", out)
	}
}

func cpVersion() string {
	out, err := exec.Command("cp", "--version").Output()
	if err != nil {
		return "unknown version"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return first
}

// checkSummaryJSON checks the form of a replay's .json: the schema name, snake_case keys
// throughout, and per-op figures as named rows whose counts add up to the totals.
func checkSummaryJSON(t *testing.T, name string, js []byte) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if doc["schema"] != replay.SummarySchema {
		t.Errorf("%s: schema %v", name, doc["schema"])
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k != strings.ToLower(k) || strings.ContainsAny(k, " -") {
					t.Errorf("%s: key %s.%s is not snake_case", name, path, k)
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				if _, ok := x.(map[string]any); !ok {
					if _, isStr := x.(string); !isStr {
						t.Errorf("%s: %s holds an unnamed %T, not an object", name, path, x)
					}
				}
				walk(path+"[]", x)
			}
		}
	}
	walk("", doc)
	rows := func(key string, v any, count string) (sum float64) {
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			t.Errorf("%s: %s is %T %v, want rows", name, key, v, v)
			return 0
		}
		for _, r := range arr {
			m := r.(map[string]any)
			if op, ok := m["op"].(string); !ok {
				t.Errorf("%s: %s row without an op name: %v", name, key, m)
			} else if _, err := trace.ParseOp(op); err != nil {
				t.Errorf("%s: %s: %v", name, key, err)
			}
			sum += m[count].(float64)
		}
		return sum
	}
	fold, _ := doc["fold"].(map[string]any)
	if got, want := rows("fold.by_op", fold["by_op"], "events"), fold["events"]; got != want {
		t.Errorf("%s: fold.by_op events add up to %v, fold.events is %v", name, got, want)
	}
	if got, want := rows("ops", doc["ops"], "recorded"), doc["recorded_ops"]; got != want {
		t.Errorf("%s: ops recorded add up to %v, recorded_ops is %v", name, got, want)
	}
	if tg, _ := doc["target"].(map[string]any); tg == nil || tg["fs_type"] == "" || tg["path"] == "" {
		t.Errorf("%s: target %v", name, doc["target"])
	}
}

// TestReplayWarningsUnderTheirTarget checks, on one stream as a terminal shows stdout and
// stderr, that each target's divergence warnings stand under that target's header, after
// the previous target's summary.
func TestReplayWarningsUnderTheirTarget(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	t1, t2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	mustDo(t, os.Mkdir(t1, 0o755))
	mustDo(t, os.Mkdir(t2, 0o755))
	prefix := filepath.Join(dir, "res")
	var both bytes.Buffer
	// --prepare=skip on empty directories: in.dat is missing on both, its open diverges.
	code := run(context.Background(), []string{"replay", tr, "--target", t1, "--target", t2, "--prepare", "skip", "-o", prefix},
		strings.NewReader(""), &both, &both)
	out := both.String()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	h1, h2 := strings.Index(out, "target 1 ("+t1+"): "+prefix+".t1.r1.iotap"), strings.Index(out, "target 2 ("+t2+"): "+prefix+".t2.r1.iotap")
	s1, s2 := strings.Index(out, "replay onto "+t1), strings.Index(out, "replay onto "+t2)
	if inOrder := h1 < s1 && s1 < h2 && h2 < s2; h1 < 0 || h2 < 0 || s1 < 0 || s2 < 0 || !inOrder {
		t.Fatalf("headers at %d, %d and summaries at %d, %d:\n%s", h1, h2, s1, s2, out)
	}
	w1, w2 := strings.Count(out[h1:s1], "replay diverged"), strings.Count(out[h2:s2], "replay diverged")
	if w1 == 0 || w2 == 0 || strings.Count(out, "replay diverged") != w1+w2 {
		t.Errorf("warnings: %d under target 1, %d under target 2, %d in all:\n%s", w1, w2, strings.Count(out, "replay diverged"), out)
	}
}
