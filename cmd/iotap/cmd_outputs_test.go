package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/iotap/iotap/trace"
)

// TestOutputsArePrivate: every file iotap writes (exports, reports, comparisons, replay
// traces and summaries) is 0600, also when it replaces a file that was 0644.
func TestOutputsArePrivate(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeEvilTrace(t, tr)
	tgt := filepath.Join(dir, "target")
	if err := os.Mkdir(tgt, 0o755); err != nil {
		t.Fatal(err)
	}
	out := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var files []string
	for _, args := range [][]string{
		{"export", tr, "-o", out("events.jsonl")},
		{"export", "--format", "csv", tr, "-o", out("events.csv")},
		{"report", tr, "-o", out("report.txt")},
		{"report", "--format", "html", tr, "-o", out("report.html")},
		{"compare", tr, tr, "-o", out("compare.txt")},
		{"replay", "--target", tgt, "-o", filepath.Join(dir, "res"), tr},
	} {
		out("res.t1.r1.iotap")
		out("res.t1.r1.json")
		if code, _, stderr := runIotap(t, nil, args...); code != exitOK {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		if args[0] != "replay" {
			files = append(files, args[len(args)-1])
		}
	}
	files = append(files, filepath.Join(dir, "res.t1.r1.iotap"), filepath.Join(dir, "res.t1.r1.json"))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(f), st.Mode().Perm())
		}
	}
}

// TestReplayChecksBeforeTouchingTargets: replay refuses, before it empties a target, a
// results prefix in a missing directory and a target that is a symbolic link; the
// targets' contents stay.
func TestReplayChecksBeforeTouchingTargets(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeEvilTrace(t, tr)
	real := filepath.Join(dir, "precious")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(real, "keep.txt")
	if err := os.WriteFile(keep, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "scratch-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing-output-dir", []string{"replay", "--scratch", "--target", real, "-o", filepath.Join(dir, "missing", "dir", "p"), tr}, "results directory"},
		{"symlink-target", []string{"replay", "--scratch", "--target", link, "-o", filepath.Join(dir, "res"), tr}, "is a symbolic link to " + real},
		{"symlink-target-slash", []string{"replay", "--scratch", "--target", link + "/", "-o", filepath.Join(dir, "res"), tr}, "is a symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, nil, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
			if b, err := os.ReadFile(keep); err != nil || string(b) != "data" {
				t.Errorf("target contents gone: %v", err)
			}
		})
	}
}

// TestDryRunCountsRefusedOps: a trace with paths that leave the root is not called
// reproducible by the dry run, which counts the ops the real replay refuses; a directory
// found to be a symlink is named once ("finds a symlink").
func TestDryRunCountsRefusedOps(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "escape.iotap")
	w, err := trace.Create(tr, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	up := w.Path(trace.RootPath, "..")
	out := w.Path(up, "etc")
	l := w.Path(trace.RootPath, "l")
	lx := w.Path(l, "x")
	for i := range 3 {
		w.Append(&trace.Event{Op: trace.OpLookup, Start: int64(i) * 1000, Dur: 10, Path: out, Tid: 1, Pid: 1})
	}
	w.Append(&trace.Event{Op: trace.OpSymlink, Start: 5000, Dur: 10, Path: l, Path2: w.Raw("elsewhere"), Tid: 1, Pid: 1})
	w.Append(&trace.Event{Op: trace.OpMkdir, Start: 6000, Dur: 10, Path: lx, Mode: syscall.S_IFDIR | 0o755, Tid: 1, Pid: 1})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runIotap(t, nil, "replay", "--dry-run", tr)
	t.Logf("dry run:\n%s", stdout)
	if code != exitOK || strings.Contains(stdout, "reproducible") || !strings.Contains(stdout, "3 ops name a path that leaves the root") {
		t.Errorf("exit %d; stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "finds a symlink") || strings.Contains(stdout, "more") {
		t.Errorf("no symlink problem in:\n%s", stdout)
	}
}
