package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/replay/campaign"
)

// readCopies reads a --copies run's figures.
func readCopies(t *testing.T, path string) campaign.CopiesSummary {
	t.Helper()
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cs campaign.CopiesSummary
	if err := json.Unmarshal(js, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkCopies checks the figures of n copies of writeSmallTrace's job: each copy read and
// wrote 8 KiB and opened two files, and the aggregate is their sum.
func checkCopies(t *testing.T, cs campaign.CopiesSummary, n int) {
	t.Helper()
	if cs.Copies != n || len(cs.PerCopy) != n {
		t.Fatalf("%d copies, %d rows; want %d", cs.Copies, len(cs.PerCopy), n)
	}
	for _, f := range cs.PerCopy {
		if f.Bytes != 16384 || f.IOs != 3 || f.Files != 2 || f.Diverged != 0 || f.SpanNs <= 0 || f.DataP99 <= 0 || f.MetaP99 <= 0 {
			t.Errorf("copy %d: %+v", f.Copy, f)
		}
		if f.MBps <= 0 || f.IOPS <= 0 || f.FilesPS <= 0 {
			t.Errorf("copy %d: rates %+v", f.Copy, f)
		}
	}
	a := cs.Aggregate
	if a.Bytes != int64(n)*16384 || a.IOs != uint64(n)*3 || a.Files != uint64(n)*2 || a.SpanNs < cs.PerCopy[0].SpanNs {
		t.Errorf("aggregate %+v", a)
	}
}

// TestReplayCopies: --copies 3 replays the job three times at once, each copy in its own
// subdirectory with its own starting file; the run's figures give the aggregate and each
// copy; compare shows each copy as a side next to a single run.
func TestReplayCopies(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "small.iotap")
	writeSmallTrace(t, tr)
	single, many := filepath.Join(dir, "single"), filepath.Join(dir, "many")
	mustDo(t, os.Mkdir(single, 0o755))
	mustDo(t, os.Mkdir(many, 0o755))
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", single, "-o", filepath.Join(dir, "one"), "--timing", "afap")
	if code != 0 {
		t.Fatalf("single run: exit %d\n%s\n%s", code, out, errs)
	}
	prefix := filepath.Join(dir, "three")
	code, out, errs = runReplayCLI(t, "replay", tr, "--target", many, "--copies", "3", "-o", prefix)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	for _, want := range []string{"3 copies at once", "divergences 0", "MB/s", "files/s", "\n  all "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	for _, c := range []string{"copy1", "copy2", "copy3"} {
		for name, size := range map[string]int{"in.dat": 8192, "out.dat": 8192} {
			if b, err := os.ReadFile(filepath.Join(many, c, name)); err != nil || len(b) != size {
				t.Errorf("%s/%s: %d bytes, %v", c, name, len(b), err)
			}
		}
	}
	for _, k := range []string{"1", "2", "3"} {
		js, err := os.ReadFile(prefix + ".t1.r1.c" + k + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var s replay.Summary
		mustDo(t, json.Unmarshal(js, &s))
		if s.ReplayedOps != 7 || s.Divergences != 0 {
			t.Errorf("copy %s: %d ops, %d divergences", k, s.ReplayedOps, s.Divergences)
		}
	}
	checkCopies(t, readCopies(t, prefix+".t1.r1.copies.json"), 3)

	code, out, errs = runReplayCLI(t, "compare", filepath.Join(dir, "one.t1.r1.iotap"), prefix+".t1.r1.c*.iotap")
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"4 sides", "three.t1.r1.c1 ", "three.t1.r1.c2 ", "three.t1.r1.c3 "} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}
	// Another run of copies is not overwritten by accident: the copies' directories hold
	// the previous run.
	code, _, errs = runReplayCLI(t, "replay", tr, "--target", many, "--copies", "3", "-o", prefix)
	if code != exitUsage || !strings.Contains(errs, "not empty") {
		t.Errorf("replay onto a used target: exit %d, %s", code, errs)
	}
	code, _, errs = runReplayCLI(t, "replay", tr, "--target", many, "--copies", "0")
	if code != exitUsage || !strings.Contains(errs, "--copies 0") {
		t.Errorf("--copies 0: exit %d, %s", code, errs)
	}
}

// TestReplayCopiesS3: copies of a replay onto an s3:// target each get their own key
// prefix, their own starting objects and their own request tallies.
func TestReplayCopiesS3(t *testing.T) {
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
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", "s3://data/cp", "--copies", "2", "--s3-endpoint", srv.URL, "--s3-profile", "s3fs", "-o", prefix)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	if !strings.Contains(out, "s3://data/cp/: 2 copies at once") {
		t.Errorf("output:\n%s", out)
	}
	checkCopies(t, readCopies(t, prefix+".t1.r1.copies.json"), 2)
	for _, k := range []string{"1", "2"} {
		if _, err := os.Stat(prefix + ".t1.r1.c" + k + ".requests.json"); err != nil {
			t.Errorf("copy %s: no request tallies: %v", k, err)
		}
		code, out, _ := runReplayCLI(t, "info", prefix+".t1.r1.c"+k+".iotap")
		if code != 0 || !strings.Contains(out, "s3://data/cp/copy"+k) {
			t.Errorf("copy %s: target is not its own prefix:\n%s", k, out)
		}
	}
}

// TestReplayCopiesShard: with --shard auto each task replays its traces with N copies
// each, in TARGET/<trace name>/copyK, prepared before the barrier.
func TestReplayCopiesShard(t *testing.T) {
	dir := t.TempDir()
	traces := filepath.Join(dir, "traces")
	mustDo(t, os.Mkdir(traces, 0o755))
	writeSmallTrace(t, filepath.Join(traces, "n1-0.iotap"))
	t.Setenv("SLURMD_NODENAME", "n1")
	t.Setenv("SLURM_JOB_ID", "9")
	t.Setenv("SLURM_STEP_ID", "0")
	t.Setenv("SLURM_PROCID", "0")
	t.Setenv("SLURM_NTASKS", "1")
	cand, res := filepath.Join(dir, "cand"), filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", traces, "--shard", "auto", "--copies", "2", "--target", cand, "-o", res, "--timing", "afap")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	for _, c := range []string{"copy1", "copy2"} {
		if b, err := os.ReadFile(filepath.Join(cand, "n1-0", c, "out.dat")); err != nil || len(b) != 8192 {
			t.Errorf("%s: out.dat %d bytes, %v", c, len(b), err)
		}
	}
	checkCopies(t, readCopies(t, filepath.Join(res, "n1-0.t1.r1.copies.json")), 2)
}
