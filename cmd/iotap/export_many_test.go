package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/export/duckdbtest"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// writeHostTrace writes the test workload as recorded on host into dir/name.iotap.
func writeHostTrace(t *testing.T, dir, name, host, job string) string {
	t.Helper()
	h := trace.Header{Kind: "record", Hostname: host, Target: trace.Target{Path: "/data", FSType: "fuse.s3fs", Source: "s3fs"},
		Labels: []trace.Label{{Key: "SLURM_JOB_ID", Value: job}, {Key: "owner", Value: "ann"}}}
	b := tracetest.NewWithHeader(t, h)
	b.AddProcess(trace.Process{Tid: 10, Pid: 10, PPid: 1, Comm: "secretprog", Exe: "/usr/bin/secretprog"})
	tracetest.Workload(b, 3)
	p := filepath.Join(dir, name+".iotap")
	mustDo(t, os.WriteFile(p, b.Bytes(), 0o644))
	return p
}

// TestExportManyBadInput: over many traces, each trace that cannot be read (not a trace, a
// newer format, cut short before its header), is damaged (truncated, corrupt) or dropped
// events is named with its reason on stderr and counted, and the others are exported (and
// summed up); an existing dataset and an unwritable destination are clear errors; a dataset
// of an anonymised export holds no name of the traces.
func TestExportManyBadInput(t *testing.T) {
	fx := traceFixtures(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	mustDo(t, os.MkdirAll(in, 0o755))
	good := []string{writeHostTrace(t, in, "a", "nodea", "7"), writeHostTrace(t, in, "b", "nodeb", "7"), writeHostTrace(t, in, "c", "nodec", "8")}
	bad := map[string]string{}
	d, err := os.ReadFile(writeHostTrace(t, dir, "d", "noded", "9"))
	mustDo(t, err)
	bad["truncated"] = filepath.Join(in, "truncated.iotap")
	mustDo(t, os.WriteFile(bad["truncated"], d[:len(d)-40], 0o644))
	for _, k := range []string{"text", "v9", "empty", "corrupt"} {
		b, err := os.ReadFile(fx[k])
		mustDo(t, err)
		bad[k] = filepath.Join(in, k+".iotap")
		mustDo(t, os.WriteFile(bad[k], b, 0o644))
	}
	bad["dropped"] = filepath.Join(in, "dropped.iotap")
	writeDroppedTrace(t, bad["dropped"])

	out := filepath.Join(dir, "ds")
	code, _, stderr := runIotap(t, nil, "export", "--format", "parquet", "-o", out, in)
	if code != exitError {
		t.Errorf("exit %d, want %d (traces could not be read)\n%s", code, exitError, stderr)
	}
	for k, why := range map[string]string{"text": "is not an iotap trace", "v9": "version", "empty": "empty",
		"truncated": "damaged", "corrupt": "damaged"} {
		if !strings.Contains(stderr, bad[k]+": ") || !strings.Contains(stderr, why) {
			t.Errorf("stderr does not name %s with %q:\n%s", k, why, stderr)
		}
	}
	if !strings.Contains(stderr, "3 of 9 traces could not be read") || !strings.Contains(stderr, "dropped") {
		t.Errorf("stderr does not count the traces that could not be read, or the dropped events:\n%s", stderr)
	}
	var written []string
	mustDo(t, filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			written = append(written, rel)
		}
		return err
	}))
	// The three good traces, the two damaged ones (their readable events) and the dropped one.
	if len(written) != 6 || !strings.Contains(strings.Join(written, " "), "host=nodea/job=7/") {
		t.Errorf("dataset holds %v", written)
	}

	// summary: the same traces named, the others summed up.
	code, sum, stderr := runIotap(t, nil, "summary", "--format", "csv", in)
	if code != exitError || strings.Count(sum, "\n") != 1+6 || !strings.Contains(stderr, bad["text"]) {
		t.Errorf("summary: exit %d, %d lines\n%s\n%s", code, strings.Count(sum, "\n"), sum, stderr)
	}
	code, sum, stderr = runIotap(t, nil, append([]string{"summary", "--by", "job", "--format", "jsonl"}, good...)...)
	if code != exitOK || strings.Count(sum, "\n") != 2 || !strings.Contains(sum, `"name":"job 7","traces":2`) || !strings.Contains(sum, `"hosts":2`) {
		t.Errorf("summary --by job: exit %d\n%s\n%s", code, sum, stderr)
	}

	// Destinations.
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"existing dataset", []string{"export", "--format", "parquet", "-o", out, in}, exitUsage, "is not empty"},
		{"unwritable", []string{"export", "--format", "parquet", "-o", filepath.Join(good[0], "ds"), in}, exitUsage, "dataset directory"},
		{"no output", []string{"export", "--format", "parquet", in}, exitUsage, "many traces make a dataset"},
		{"fio of many", []string{"export", "--format", "fio", "-o", filepath.Join(dir, "f"), in}, exitUsage, "takes one trace"},
		{"perfetto of files", []string{"export", "--format", "perfetto", "--view", "files", good[0]}, exitUsage, "takes the requests or syscalls view"},
		{"unwritable file", []string{"export", "--format", "parquet", "-o", filepath.Join(good[0], "x.parquet"), good[0]}, exitUsage, "create output"},
		{"no traces", []string{"summary", filepath.Join(dir, "none*.iotap")}, exitError, "no trace matches"},
		{"summary format", []string{"summary", "--format", "xml", in}, exitUsage, "want table, csv, jsonl or parquet"},
		{"summary stdin", []string{"summary", "-", good[0]}, exitUsage, "standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d (want %d), stderr lacks %q:\n%s", code, tc.code, tc.msg, stderr)
			}
		})
	}

	// Anonymised: no name of the traces in the dataset.
	anon := filepath.Join(dir, "anon")
	if code, _, stderr := runIotap(t, nil, "export", "--anonymize", "--format", "jsonl", "--view", "requests", "-o", anon, good[0], good[1]); code != exitOK {
		t.Fatalf("anonymised dataset: exit %d\n%s", code, stderr)
	}
	var all strings.Builder
	mustDo(t, filepath.WalkDir(anon, func(p string, d os.DirEntry, err error) error {
		all.WriteString(p + "\n")
		if err == nil && !d.IsDir() {
			b, err := os.ReadFile(p)
			all.Write(b)
			return err
		}
		return err
	}))
	for _, name := range []string{"nodea", "nodeb", "secretprog", "archive", "ann"} {
		if strings.Contains(all.String(), name) {
			t.Errorf("the anonymised dataset names %q", name)
		}
	}
	t.Run("parquet anonymised", func(t *testing.T) {
		duckdbtest.Require(t)
		pq := filepath.Join(dir, "anon.parquet")
		if code, _, stderr := runIotap(t, nil, "export", "--anonymize", "--format", "parquet", "-o", pq, good[0]); code != exitOK {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		rows := duckdbtest.Rows(t, "SELECT string_agg(DISTINCT path, ' ') || string_agg(DISTINCT comm, ' ') || any_value(host) || any_value(labels['owner']) AS names FROM "+duckdbtest.Literal(pq))
		for _, name := range []string{"nodea", "secretprog", "archive", "ann"} {
			if strings.Contains(rows[0].Str("names"), name) {
				t.Errorf("the anonymised Parquet file names %q: %s", name, rows[0].Str("names"))
			}
		}
	})
}
