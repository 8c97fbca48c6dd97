package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/report"
)

// TestReportFileBecomesDirectory records a job that writes a file, removes it and makes a
// directory of the same name (bonnie++ does this with its Bonnie.<pid>): the file's writes
// stay the file's in "files by time", with the file's size, and the directory gets only
// its own operations.
func TestReportFileBecomesDirectory(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "job.iotap")
	const job = "dd if=/dev/zero of=B bs=64k count=48 2>/dev/null; rm B; mkdir B; echo x > B/y; ls B >/dev/null"
	p := startIotap(t, target, "record", "-o", out, "--", "sh", "-c", job)
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("record exit %d; stderr:\n%s", code, p.stderr)
	}
	code, stdout, stderr := runReportCLI(t, "report", "--format", "json", out)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	var r report.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	row := func(rows []report.FileRow, path string) *report.FileRow {
		for i := range rows {
			if rows[i].Path == path {
				return &rows[i]
			}
		}
		return nil
	}
	const size = 48 * 64 << 10
	f := row(r.Total.FilesByTime, "B")
	if f == nil || f.WriteBytes != size || f.Size != size || f.Opens != 1 {
		t.Fatalf("file B in files by time: %+v\nall: %+v", f, r.Total.FilesByTime)
	}
	if y := row(r.Total.FilesByTime, "B/y"); y == nil || y.WriteBytes != 2 || y.Size != 2 {
		t.Errorf("file B/y: %+v", y)
	}
	d := row(r.Total.DirsByTime, "B")
	if d == nil || d.WriteBytes != 2 || d.Size != 0 {
		t.Errorf("directory B (its own ops and B/y's): %+v", d)
	}
	if root := row(r.Total.DirsByTime, "."); root == nil || root.WriteBytes != size {
		t.Errorf("root directory holds file B's writes: %+v", root)
	}

	// The text report shows the file's size, not a request-size bucket.
	code, stdout, stderr = runReportCLI(t, "report", out)
	if code != 0 {
		t.Fatalf("report exit %d: %s", code, stderr)
	}
	_, files, _ := strings.Cut(stdout, "files by time\n")
	var line string
	for l := range strings.SplitSeq(files, "\n") {
		if strings.HasPrefix(l, "B ") {
			line = l
			break
		}
	}
	if strings.Count(line, "3.00MiB") != 2 || strings.Contains(line, "<=") { // written and size
		t.Errorf("files by time row of B: %q\n%s", line, stdout)
	}
}
