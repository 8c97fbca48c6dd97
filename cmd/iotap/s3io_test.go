package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/trace"
)

// startS3 starts an S3 server with buckets for the test, and points the environment (as
// the AWS SDK reads it) at it.
func startS3(t *testing.T, buckets ...string) {
	t.Helper()
	srv, err := s3test.Start(s3test.Options{Buckets: buckets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	t.Setenv("IOTAP_S3_ENDPOINT", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
}

// TestS3TraceIO writes two traces to s3:// as record would, lists them under their prefix
// as report would, and reads them back.
func TestS3TraceIO(t *testing.T) {
	startS3(t, "traces")
	ctx := context.Background()
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}

	for _, host := range []string{"h1", "h2"} {
		up, err := s3store.Create(ctx, "s3://traces/job-1/"+host+".iotap", traceStore{}.options())
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(up, trace.Header{Kind: "record", Hostname: host}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 1000; i++ {
			w.Append(&trace.Event{Start: int64(i), Dur: 10, Op: trace.OpRead, Size: 4096, Ret: 4096})
		}
		if err := errors.Join(w.Close(), up.Close()); err != nil {
			t.Fatal(err)
		}
	}
	files, err := traceInputs(ctx, e, []string{"s3://traces/job-1/", "local.iotap"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(files, " "); got != "s3://traces/job-1/h1.iotap s3://traces/job-1/h2.iotap local.iotap" {
		t.Fatalf("inputs: %s", got)
	}
	for _, f := range files[:2] {
		r, closeTrace, err := openTraceAny(ctx, e, f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		if _, ok := r.Footer(); !ok || n != 1000 || len(r.Damage()) != 0 {
			t.Errorf("%s: %d events, footer %v, damage %v", f, n, ok, r.Damage())
		}
		if err := closeTrace(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := traceInputs(ctx, e, []string{"s3://traces/none/"}); err == nil {
		t.Error("an empty prefix gave no error")
	}
	if _, _, err := openTraceAny(ctx, e, "s3://traces/job-1/missing.iotap"); err == nil {
		t.Error("opened a missing trace")
	}
}
