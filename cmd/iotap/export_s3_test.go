package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
	"golang.org/x/sys/unix"
)

// TestExportToS3: an export goes to an s3:// object as it is written (a multipart upload
// when larger than a part), the same bytes as to a file; many traces go to a dataset below
// an s3:// prefix, read from one; a prefix that holds objects is refused.
func TestExportToS3(t *testing.T) {
	startS3(t, "out", "traces")
	ctx := context.Background()
	read := func(url string) []byte {
		t.Helper()
		rc, err := s3store.Open(ctx, url)
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		defer func() { _ = rc.Close() }() // read-only
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// A trace whose JSON lines export is larger than a part: a multipart upload.
	dir := t.TempDir()
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "record", Hostname: "big", Target: trace.Target{Path: "/d"}})
	fh := b.Open(7, "data/big.bin", unix.O_RDONLY)
	for i := range 40000 {
		b.RW(7, trace.OpRead, "data/big.bin", fh, int64(i)<<12, 4096, 4096)
	}
	tr := filepath.Join(dir, "big.iotap")
	mustDo(t, os.WriteFile(tr, b.Bytes(), 0o644))
	local := filepath.Join(dir, "big.jsonl")
	for _, o := range []string{local, "s3://out/exports/big.jsonl"} {
		if code, _, stderr := runIotap(t, nil, "export", "-o", o, tr); code != exitOK {
			t.Fatalf("export -o %s: exit %d\n%s", o, code, stderr)
		}
	}
	want, err := os.ReadFile(local)
	mustDo(t, err)
	if got := read("s3://out/exports/big.jsonl"); len(want) <= s3store.ObjectPartSize || !bytes.Equal(got, want) {
		t.Errorf("the object holds %d bytes, the file %d (a part is %d)", len(got), len(want), s3store.ObjectPartSize)
	}

	// Many traces from an s3:// prefix into a dataset below another.
	for _, host := range []string{"h1", "h2"} {
		up, err := s3store.Create(ctx, "s3://traces/job-1/"+host+".iotap", traceStore{}.options())
		mustDo(t, err)
		w, err := trace.NewWriter(up, trace.Header{Kind: "record", Hostname: host, Labels: []trace.Label{{Key: "SLURM_JOB_ID", Value: "1"}}}, trace.WriterOptions{})
		mustDo(t, err)
		for i := range 1000 {
			w.Append(&trace.Event{Start: int64(i), Dur: 10, Op: trace.OpRead, Size: 4096, Ret: 4096, Path: trace.RootPath})
		}
		mustDo(t, errors.Join(w.Close(), up.Close()))
	}
	code, _, stderr := runIotap(t, nil, "export", "--format", "csv", "-o", "s3://out/ds/", "s3://traces/job-1/")
	if code != exitOK {
		t.Fatalf("dataset: exit %d\n%s", code, stderr)
	}
	urls, err := s3store.ListWith(ctx, "s3://out/ds/", s3store.Options{})
	mustDo(t, err)
	if len(urls) != 0 {
		t.Errorf("the dataset's files are not traces: %v", urls)
	}
	for _, host := range []string{"h1", "h2"} {
		found := false
		for _, k := range []string{"s3://out/ds/host=" + host + "/job=1/"} {
			if empty, err := s3store.Empty(ctx, k, s3store.Options{}); err == nil && !empty {
				found = true
			}
		}
		if !found {
			t.Errorf("no file below host=%s/job=1/", host)
		}
	}
	code, _, stderr = runIotap(t, nil, "export", "--format", "csv", "-o", "s3://out/ds/", "s3://traces/job-1/")
	if code != exitUsage || !strings.Contains(stderr, "holds objects already") {
		t.Errorf("a second dataset at the same prefix: exit %d\n%s", code, stderr)
	}
	code, sum, stderr := runIotap(t, nil, "summary", "--by", "job", "--format", "csv", "s3://traces/job-1/")
	if code != exitOK || !strings.Contains(sum, "job 1,2,") {
		t.Errorf("summary of an s3:// prefix: exit %d\n%s\n%s", code, sum, stderr)
	}
}
