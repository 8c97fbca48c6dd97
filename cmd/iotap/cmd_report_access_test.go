package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestRecordFirstAccess records dd reading a 256 KiB file, reading it again, and reading
// its second 64 KiB once more: the report splits the reads into 4 first accesses (256 KiB)
// and 5 re-accesses (320 KiB), per FUSE request and per read call, and the file's time to
// first byte is its first read's own latency.
func TestRecordFirstAccess(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	mustDo(t, os.Mkdir(target, 0o755))
	mustDo(t, os.WriteFile(filepath.Join(target, "in"), make([]byte, 256<<10), 0o644))
	out := filepath.Join(dir, "job.iotap")
	p := startIotap(t, target, "record", "-o", out, "--", "sh", "-c",
		"dd if=in of=/dev/null bs=64k status=none && dd if=in of=/dev/null bs=64k status=none && dd if=in of=/dev/null bs=64k skip=1 count=1 status=none")
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, p.stderr)
	}
	code, js, errs := runReplayCLI(t, "report", "--format", "json", out)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, errs)
	}
	type split struct {
		Count uint64 `json:"count"`
		Bytes uint64 `json:"bytes"`
		P50   int64  `json:"p50_ns"`
	}
	type row struct {
		Op          string  `json:"op"`
		Call        string  `json:"call"`
		OpsPerS     float64 `json:"ops_per_s"`
		MBps        float64 `json:"mb_per_s"`
		FirstAccess *split  `json:"first_access"`
		Reaccess    *split  `json:"reaccess"`
	}
	var doc struct {
		Total struct {
			Ops      []row `json:"ops"`
			Syscalls []row `json:"syscalls"`
			TTFB     *struct {
				Count uint64 `json:"count"`
			} `json:"ttfb"`
			Files []struct {
				Path        string `json:"path"`
				FirstReads  uint64 `json:"first_access_reads"`
				Rereads     uint64 `json:"reaccess_reads"`
				FirstByteNs *int64 `json:"first_byte_ns"`
			} `json:"files_by_time"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	check := func(what string, rows []row, name func(row) string) {
		for _, r := range rows {
			if name(r) != "read" {
				continue
			}
			if r.FirstAccess == nil || r.Reaccess == nil || r.FirstAccess.Count != 4 || r.FirstAccess.Bytes != 256<<10 ||
				r.Reaccess.Count != 5 || r.Reaccess.Bytes != 320<<10 || r.FirstAccess.P50 <= 0 || r.OpsPerS <= 0 || r.MBps <= 0 {
				t.Errorf("%s read: first %+v, re %+v, %v/s, %v MB/s", what, r.FirstAccess, r.Reaccess, r.OpsPerS, r.MBps)
			}
			return
		}
		t.Errorf("no %s read row", what)
	}
	check("request", doc.Total.Ops, func(r row) string { return r.Op })
	check("call", doc.Total.Syscalls, func(r row) string { return r.Call })
	if doc.Total.TTFB == nil || doc.Total.TTFB.Count != 1 {
		t.Errorf("ttfb %+v: want one file", doc.Total.TTFB)
	}
	for _, f := range doc.Total.Files {
		if f.Path == "in" && (f.FirstReads != 4 || f.Rereads != 5 || f.FirstByteNs == nil || *f.FirstByteNs <= 0) {
			t.Errorf("file in: %+v", f)
		}
	}
}
