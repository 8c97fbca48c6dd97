package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/export"
)

func TestExport(t *testing.T) {
	fx := traceFixtures(t)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		lines  int // output lines (CSV: header included)
		stderr string
		file   string // output file to check instead of stdout
	}{
		{name: "jsonl", args: []string{fx["good"]}, code: exitOK, lines: 25},
		{name: "csv", args: []string{"--format", "csv", fx["good"]}, code: exitOK, lines: 26},
		{name: "output-file", args: []string{fx["good"], "-o", out}, code: exitOK, lines: 25, file: out},
		{name: "truncated", args: []string{fx["truncated"]}, code: exitDamaged, lines: 25, stderr: "no footer"},
		{name: "corrupt", args: []string{fx["corrupt"]}, code: exitDamaged, lines: 9, stderr: "payload checksum mismatch"},
		{name: "corrupt-strict", args: []string{"--strict", fx["corrupt"]}, code: exitDamaged, lines: 0, stderr: "stopped at the first damaged chunk"},
		{name: "bad-format", args: []string{"--format", "xml", fx["good"]}, code: exitUsage, stderr: `--format "xml": want jsonl, csv, parquet, fio or perfetto`},
		{name: "two-traces", args: []string{fx["good"], fx["good"]}, code: exitUsage, stderr: "many traces make a dataset: give its directory or s3://bucket/prefix/ with -o"},
		{name: "missing", args: []string{fx["missing"]}, code: exitError, stderr: "does not exist"},
		{name: "not-a-trace", args: []string{fx["text"]}, code: exitError, stderr: "is not an iotap trace"},
		{name: "unwritable", args: []string{fx["good"], "-o", filepath.Join(fx["missing"], "x.jsonl")}, code: exitUsage, stderr: "create output:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIotap(t, nil, append([]string{"export"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, tc.code, stderr)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
			if tc.file != "" {
				if stdout != "" {
					t.Errorf("stdout not empty with -o: %q", stdout)
				}
				b, err := os.ReadFile(tc.file)
				if err != nil {
					t.Fatal(err)
				}
				stdout = string(b)
			}
			if n := strings.Count(stdout, "\n"); n != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", n, tc.lines, stdout)
			}
		})
	}
}

// TestExportFields checks the documented field names and values of both formats.
func TestExportFields(t *testing.T) {
	fx := traceFixtures(t)
	_, jsonl, _ := runIotap(t, nil, "export", fx["good"])
	_, csvOut, _ := runIotap(t, nil, "export", "--format", "csv", fx["good"])
	rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rows[0], exportFields()) {
		t.Fatalf("csv header %v", rows[0])
	}
	lines := strings.Split(strings.TrimSuffix(jsonl, "\n"), "\n")
	if len(lines) != len(rows)-1 {
		t.Fatalf("%d json lines, %d csv rows", len(lines), len(rows)-1)
	}
	for i, l := range lines {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		if len(m) != len(exportFields()) {
			t.Fatalf("line %d has %d fields", i, len(m))
		}
		for j, f := range exportFields() {
			got := string(mustJSON(t, m[f]))
			switch {
			case got == "null":
				got = "" // NULL: an empty CSV field
			case strings.HasPrefix(got, `"`):
				got = strings.Trim(got, `"`)
			}
			if got != rows[i+1][j] {
				t.Errorf("line %d field %s: json %s, csv %s", i, f, got, rows[i+1][j])
			}
		}
	}
	want := map[string]string{
		"op": "read", "path": "data/in.bam", "file_offset": "1048576", "size": "1048576", "ret": "1048576",
		"handle": "1", "node": "3", "comm": "samtools", "tid": "100", "pid": "100", "uid": "1000", "gid": "100",
		"errno": "0", "errno_name": "", "dur_ns": "400000", "start_ns": "438500", "bytes": "1048576",
		"start_time": "2026-11-30T02:00:00.000438623Z", "host": "node17", "job": "", "exe": "/usr/bin/samtools",
	}
	row := rows[5]
	for f, v := range want {
		if got := row[slices.Index(exportFields(), f)]; got != v {
			t.Errorf("read row %s = %q, want %q (row %v)", f, got, v, row)
		}
	}
	var sawErrno, sawSymlink bool
	col := func(r []string, name string) string { return r[slices.Index(exportFields(), name)] }
	for _, r := range rows[1:] {
		if r[0] == "lookup" && col(r, "errno") == "2" {
			sawErrno = col(r, "errno_name") == "ENOENT" && col(r, "path") == "data/out"
		}
		if r[0] == "symlink" {
			sawSymlink = col(r, "path") == "data/out/link" && col(r, "path2") == "../in.bam"
		}
	}
	if !sawErrno || !sawSymlink {
		t.Errorf("errno row ok %v, symlink row ok %v", sawErrno, sawSymlink)
	}
}

// TestExportOffset2: copy_file_range's output offset (format version 2) is exported as
// offset2 in both formats; a version-1 trace, which did not record it, and other requests
// export NULL.
func TestExportOffset2(t *testing.T) {
	v2 := filepath.Join("..", "..", "testdata", "trace", "v2-small.iotap")
	for _, tc := range []struct {
		name  string
		trace string
		want  []string // offset2 of the copy_file_range rows, in file order
	}{
		{name: "version 2", trace: v2, want: []string{"4096", "1052672"}},
		{name: "version 1", trace: goldenTrace, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, csvOut, stderr := runIotap(t, nil, "export", "--format", "csv", tc.trace)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			col := slices.Index(rows[0], "file_offset2")
			if col < 0 {
				t.Fatalf("no file_offset2 column in %v", rows[0])
			}
			var got []string
			for _, r := range rows[1:] {
				if r[0] == "copy_file_range" {
					got = append(got, r[col])
				} else if r[col] != "" {
					t.Errorf("%s row has offset2 %s", r[0], r[col])
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("copy_file_range offset2 %v, want %v", got, tc.want)
			}
			_, jsonl, _ := runIotap(t, nil, "export", tc.trace)
			var jgot []string
			for _, l := range strings.Split(strings.TrimSuffix(jsonl, "\n"), "\n") {
				var m struct {
					Op      string `json:"op"`
					Offset2 *int64 `json:"file_offset2"`
				}
				if err := json.Unmarshal([]byte(l), &m); err != nil || (m.Offset2 != nil) != (m.Op == "copy_file_range" && tc.want != nil) {
					t.Fatalf("%v, offset2 %v: %s", err, m.Offset2, l)
				}
				if m.Op == "copy_file_range" {
					if m.Offset2 == nil {
						jgot = append(jgot, "")
					} else {
						jgot = append(jgot, strconv.FormatInt(*m.Offset2, 10))
					}
				}
			}
			if !slices.Equal(jgot, tc.want) {
				t.Errorf("jsonl copy_file_range offset2 %v, want %v", jgot, tc.want)
			}
		})
	}
}

// exportFields are the columns of the requests view.
func exportFields() []string { return export.ColumnNames(export.Columns(export.ViewRequests)) }

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExportRefusesToOverwriteTrace(t *testing.T) {
	fx := traceFixtures(t)
	before, err := os.ReadFile(fx["good"])
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runIotap(t, nil, "export", fx["good"], "-o", fx["good"])
	if code != exitUsage || !strings.Contains(stderr, "is the trace itself") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	after, err := os.ReadFile(fx["good"])
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("trace changed (%v)", err)
	}
}

// TestExportClosedPipe records a job of many writes and exports its trace into a pipe
// whose reader stops after the first line, as `iotap export T | head -1` does: the export
// ends quietly with exit status 0, not killed by SIGPIPE (141).
func TestExportClosedPipe(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	mustDo(t, os.Mkdir(target, 0o755))
	tr := filepath.Join(dir, "job.iotap")
	rec := exec.Command(iotapBin, "record", "-o", tr, "--", "dd", "if=/dev/zero", "of=f", "bs=512", "count=4000")
	rec.Dir = target
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			mustDo(t, err)
			var stderr bytes.Buffer
			cmd := exec.Command(iotapBin, "export", "--format", format, tr)
			cmd.Stdout, cmd.Stderr = pw, &stderr
			mustDo(t, cmd.Start())
			_ = pw.Close()
			first, err := bufio.NewReader(pr).ReadString('\n')
			mustDo(t, err)
			_ = pr.Close() // the reader is done: the rest of the export (4000+ lines) meets a closed pipe
			err = cmd.Wait()
			if code := exitStatus(cmd.ProcessState); code != 0 || stderr.Len() > 0 {
				t.Errorf("export into a closed pipe: exit %d (%v), stderr %q", code, err, stderr.String())
			}
			if format == "jsonl" && !strings.HasPrefix(first, `{"op":`) || format == "csv" && !strings.HasPrefix(first, "op,start_ns,") {
				t.Errorf("first line %q", first)
			}
		})
	}
	// The same through a shell pipeline; bash reports the exporter's status.
	if _, err := exec.LookPath("bash"); err == nil {
		out, err := exec.Command("bash", "-c", `"$0" export "$1" | head -1 >/dev/null; echo "${PIPESTATUS[0]}"`, iotapBin, tr).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "0" {
			t.Errorf("iotap export | head -1: exporter status %q (%v)", out, err)
		}
	}
}
