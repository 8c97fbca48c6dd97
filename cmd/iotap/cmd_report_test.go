package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func reportTestdata(name string) string { return filepath.Join("..", "..", "testdata", "report", name) }

// runReportCLI runs one in-process invocation and returns exit code, stdout and stderr.
func runReportCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	damaged := filepath.Join(dir, "damaged.iotap")
	full, err := os.ReadFile(reportTestdata("node1.iotap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, full[:len(full)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	notTrace := filepath.Join(dir, "notes.txt")
	empty := filepath.Join(dir, "empty.iotap")
	for f, data := range map[string][]byte{notTrace: []byte("hello, this is not a trace\n"), empty: nil} {
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	emptyDir := t.TempDir()
	out := filepath.Join(dir, "r.json")

	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // substrings expected on stdout
		stderr   []string // substrings expected on stderr
		noStdout bool
	}{
		{name: "text", args: []string{"report", reportTestdata("node1.iotap")}, stdout: []string{"p99.9", "read", "cache", "none", "files by time"}},
		{name: "directory", args: []string{"report", "--top", "2", reportTestdata("")}, stdout: []string{"5 trace(s)", "other-work.iotap", "s3fs.iotap", "replay.iotap"}},
		{name: "glob", args: []string{"report", "--by", "host", reportTestdata("node*.iotap")}, stdout: []string{"2 trace(s)", "-- host=node1", "-- host=node2", "straggler: host=node1: I/O time"}},
		{name: "csv intervals", args: []string{"report", "--format", "csv", "--table", "intervals", reportTestdata("node1.iotap")}, stdout: []string{"view,start,width_ns,t_s"}},
		{name: "json to file", args: []string{"report", "--format", "json", "-o", out, reportTestdata("node1.iotap")}, noStdout: true},
		{name: "html", args: []string{"report", "--format", "html", reportTestdata("node1.iotap")}, stdout: []string{"<!DOCTYPE html>", "<svg"}},
		{name: "missing", args: []string{"report", filepath.Join(dir, "nope.iotap")}, code: exitError, stderr: []string{"does not exist"}},
		{name: "no match", args: []string{"report", filepath.Join(dir, "*.nothing")}, code: exitError, stderr: []string{"no trace matches"}},
		{name: "empty dir", args: []string{"report", emptyDir}, code: exitError, stderr: []string{"no *.iotap trace in directory"}},
		{name: "not a trace", args: []string{"report", notTrace}, code: exitError, stderr: []string{"is not an iotap trace"}},
		{name: "empty file", args: []string{"report", empty}, code: exitError, stderr: []string{"is empty"}},
		{name: "damaged", args: []string{"report", damaged}, code: exitDamaged, stdout: []string{"DAMAGED", "op "}, stderr: []string{"damaged"}},
		{name: "no args", args: []string{"report"}, code: exitUsage, stderr: []string{"no trace given"}},
		{name: "bad format", args: []string{"report", "--format", "xml", reportTestdata("node1.iotap")}, code: exitUsage, stderr: []string{"--format"}},
		{name: "bad by", args: []string{"report", "--by", "color", reportTestdata("node1.iotap")}, code: exitUsage, stderr: []string{"--by"}},
		{name: "bad table", args: []string{"report", "--format", "csv", "--table", "x", reportTestdata("node1.iotap")}, code: exitUsage, stderr: []string{"--table"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runReportCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tt.code, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q: %s", s, stderr)
				}
			}
			if tt.noStdout && stdout != "" {
				t.Errorf("unexpected stdout: %s", stdout)
			}
		})
	}
	var doc struct {
		Schema string `json:"schema"`
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Schema != "iotap.report/v1" {
		t.Errorf("-o json: schema %q, err %v", doc.Schema, err)
	}
}

func TestCompareCommand(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{name: "same work", args: []string{"compare", reportTestdata("node1.iotap"), reportTestdata("s3fs.iotap")}, stdout: []string{"baseline node1", "most slower", "s3fs"}},
		{name: "three sides json", args: []string{"compare", "--format", "json", reportTestdata("node1.iotap"), reportTestdata("node2.iotap"), reportTestdata("s3fs.iotap")}, stdout: []string{`"schema": "iotap.compare/v1"`, `"name": "node2"`}},
		{name: "refused", args: []string{"compare", reportTestdata("node1.iotap"), reportTestdata("other-work.iotap")}, code: exitUsage, stderr: []string{"not the same work", "read calls 240 vs 80", "--force"}},
		{name: "refused per request", args: []string{"compare", "--view", "requests", reportTestdata("node1.iotap"), reportTestdata("other-work.iotap")}, code: exitUsage, stderr: []string{"not the same work", "read count 240 vs 80", "--force"}},
		{name: "forced", args: []string{"compare", "--force", reportTestdata("node1.iotap"), reportTestdata("other-work.iotap")}, stdout: []string{"NOT THE SAME WORK"}},
		{name: "tolerance", args: []string{"compare", "--tolerance", "0.9", reportTestdata("node1.iotap"), reportTestdata("other-work.iotap")}},
		{name: "record vs replay", args: []string{"compare", reportTestdata("node1.iotap"), reportTestdata("replay.iotap")}, stdout: []string{"per system call", "call time", "\nclose\n"}},
		{name: "record vs replay per request", args: []string{"compare", "--view", "requests", reportTestdata("node1.iotap"), reportTestdata("replay.iotap")}, stdout: []string{"work time", "compare the work time"}},
		{name: "bad view", args: []string{"compare", "--view", "ops", reportTestdata("node1.iotap"), reportTestdata("s3fs.iotap")}, code: exitUsage, stderr: []string{"--view"}},
		{name: "html", args: []string{"compare", "--format", "html", reportTestdata("node1.iotap"), reportTestdata("s3fs.iotap")}, stdout: []string{"<svg", "read latency CDF"}},
		{name: "one side", args: []string{"compare", reportTestdata("node1.iotap")}, code: exitUsage, stderr: []string{"at least two"}},
		{name: "missing", args: []string{"compare", reportTestdata("node1.iotap"), "/nonexistent/x.iotap"}, code: exitError, stderr: []string{"does not exist"}},
		{name: "bad tolerance", args: []string{"compare", "--tolerance", "2", reportTestdata("node1.iotap"), reportTestdata("s3fs.iotap")}, code: exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runReportCLI(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, tt.code, stderr)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q: %s", s, stderr)
				}
			}
		})
	}
}
