package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// TestS3TraceIO writes two traces to s3:// as record would, lists them under their prefix
// as report would, and reads them back.
func TestS3TraceIO(t *testing.T) {
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"traces"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("IOTAP_S3_ENDPOINT", srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	ctx := context.Background()
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}

	for _, host := range []string{"h1", "h2"} {
		w, closeTrace, err := createTraceAny(ctx, "s3://traces/job-1/"+host+".iotap",
			trace.Header{Kind: "record", Hostname: host}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 1000; i++ {
			w.Append(&trace.Event{Start: int64(i), Dur: 10, Op: trace.OpRead, Size: 4096, Ret: 4096})
		}
		if err := closeTrace(); err != nil {
			t.Fatal(err)
		}
	}
	files, err := traceInputs(ctx, []string{"s3://traces/job-1/", "local.iotap"})
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
	if _, err := traceInputs(ctx, []string{"s3://traces/none/"}); err == nil {
		t.Error("an empty prefix gave no error")
	}
	if _, _, err := openTraceAny(ctx, e, "s3://traces/job-1/missing.iotap"); err == nil {
		t.Error("opened a missing trace")
	}
}

func TestS3Flags(t *testing.T) {
	e := &env{stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler)}
	for _, tt := range []struct {
		name  string
		args  []string
		usage bool
	}{
		{"defaults", nil, false},
		{"s3fs with prices", []string{"--s3-profile", "s3fs", "--s3-prices", "GET=0.0004/1000,PUT=0.005/1000"}, false},
		{"unknown profile", []string{"--s3-profile", "goofys"}, true},
		{"bad prices", []string{"--s3-prices", "GET=cheap"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var o s3Options
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			_, _, err := o.targetOptions(e)
			if got := errors.Is(err, errUsage); got != tt.usage {
				t.Errorf("usage error %v, want %v (err %v)", got, tt.usage, err)
			}
		})
	}
	// A directory backend has no request sidecar or table.
	d, err := replay.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var out bytes.Buffer
	e.stdout = &out
	if err := reportS3Requests(e, d, t.TempDir()+"/x", nil); err != nil || out.Len() != 0 {
		t.Errorf("directory: %v %q", err, out.String())
	}
}
