package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/trace"
)

// TestRecordToS3 records a job with -o s3://bucket/key (placeholders expanded) and reads the
// trace back from the object store, as a multi-node job writing one trace per host would.
// The endpoint and region are flags, as every command that reads or writes traces takes
// them; the environment names no endpoint.
func TestRecordToS3(t *testing.T) {
	requireRecord(t)
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"traces"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	t.Setenv("IOTAP_S3_ENDPOINT", "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "")
	store := []string{"--s3-endpoint", srv.URL, "--s3-region", "us-east-1"}

	target := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"record", "-o", "s3://traces/job-7/%h.iotap"}, store...)
	p := startIotap(t, target, append(args, "--", "sh", "-c", "seq 1 1000 > a; cat a > /dev/null")...)
	_ = p.stdin.Close()
	if code, _ := p.wait(t); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, p.stderr)
	}
	ctx := context.Background()
	e := &env{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, log: slog.New(slog.DiscardHandler),
		traces: traceStore{Endpoint: srv.URL, Region: "us-east-1"}}
	files, err := traceInputs(ctx, e, []string{"s3://traces/job-7/"})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if len(files) != 1 || files[0] != "s3://traces/job-7/"+host+".iotap" {
		t.Fatalf("traces under the prefix: %v", files)
	}
	r, closeTrace, err := openTraceAny(ctx, e, files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closeTrace() }()
	var creates, reads int
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ev.Op == trace.OpCreate && r.PathName(ev.Path) == "a":
			creates++
		case ev.Op == trace.OpRead && r.PathName(ev.Path) == "a":
			reads++
		}
	}
	if _, ok := r.Footer(); !ok || creates != 1 || reads == 0 {
		t.Errorf("footer %v, creates of a %d, reads of a %d, damage %v", ok, creates, reads, r.Damage())
	}

	// report, info, export, compare and replay take the trace (or its prefix) from S3 too,
	// with the same flags.
	for _, cmd := range [][]string{{"report"}, {"info"}, {"export", "--format", "csv"}} {
		code, out, errs := runReplayCLI(t, append(append(cmd, "s3://traces/job-7/"+host+".iotap"), store...)...)
		if code != 0 || !strings.Contains(out, "create") {
			t.Errorf("%s s3://traces/job-7/%s.iotap: exit %d\n%s\n%s", cmd[0], host, code, out, errs)
		}
	}
	code, out, errs := runReplayCLI(t, append([]string{"report", "s3://traces/job-7/"}, store...)...)
	if code != 0 || !strings.Contains(out, "create") {
		t.Errorf("report s3://traces/job-7/: exit %d\n%s\n%s", code, out, errs)
	}
	// Without the endpoint, the default chain finds no such server: the error names the flag.
	if code, _, errs := runReplayCLI(t, "info", "--s3-endpoint", "http://127.0.0.1:1", "s3://traces/job-7/"); code == 0 || !strings.Contains(errs, "--s3-endpoint") {
		t.Errorf("info with an endpoint that does not answer: exit %d, stderr %s", code, errs)
	}
	// The flags with no s3:// trace are a usage error, not ignored.
	if code, _, errs := runReplayCLI(t, "report", "--s3-endpoint", srv.URL, "local.iotap"); code != 2 || !strings.Contains(errs, "--s3-endpoint applies to s3:// traces") {
		t.Errorf("report --s3-endpoint of a local trace: exit %d, stderr %s", code, errs)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "res")
	code, out, errs = runReplayCLI(t, append([]string{"replay", files[0], "--target", dst, "--progress", "never", "-o", prefix}, store...)...)
	if code != 0 || !strings.Contains(out, "divergences 0") {
		t.Fatalf("replay %s: exit %d\n%s\n%s", files[0], code, out, errs)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "a")); err != nil || len(data) != len(seq1000()) {
		t.Errorf("replayed file a: %d bytes, %v; want %d", len(data), err, len(seq1000()))
	}
	code, out, errs = runReplayCLI(t, append([]string{"compare", "--force", "s3://traces/job-7/", prefix + ".t1.r1.iotap"}, store...)...)
	if code != 0 || !strings.Contains(out, "2 sides") {
		t.Errorf("compare s3://traces/job-7/ with its replay: exit %d\n%s\n%s", code, out, errs)
	}
}

// seq1000 is what `seq 1 1000` prints.
func seq1000() string {
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}
