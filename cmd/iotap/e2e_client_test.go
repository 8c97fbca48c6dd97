package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// TestStorageClientS3FS is the storage client's story over a real s3fs mount of a local
// S3 server, one scenario because the steps share the server and the mount:
//
//  1. a recording in place names s3fs as the storage client, with its series in the
//     trace and its peak memory and CPU in the report;
//  2. a replay through the mount with --prepare-via s3://… (the bucket behind it) and
//     --between-runs remounting s3fs before the first run: run 1 is cold, run 2 warm
//     (the store refreshed in place, its input kept), each sampling the s3fs of its run;
//  3. a sweep of the mountpoint profile's prefetch window over two s3:// targets, whose
//     settings and the replayer's memory compare puts side by side.
func TestStorageClientS3FS(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "s3fs", "fusermount3")
	dir := t.TempDir()
	srv, err := s3test.Start(s3test.Options{Buckets: []string{"lab"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	mnt, work := filepath.Join(dir, "s3"), filepath.Join(dir, "s3fs-work")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := s3test.MountS3FS(srv.URL, "lab", mnt, work)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount() })
	client, err := procsample.FindClient(mnt)
	if err != nil || client.Name != "s3fs" {
		t.Fatalf("client of the s3fs mount: %+v, %v", client, err)
	}
	job := filepath.Join(mnt, "job")
	if err := os.Mkdir(job, 0o755); err != nil {
		t.Fatal(err)
	}
	const inputSize = 24 << 20
	if err := os.WriteFile(filepath.Join(job, "input.bin"), make([]byte, inputSize), 0o644); err != nil {
		t.Fatal(err)
	}

	// 1. Record.
	out := filepath.Join(dir, "rec.iotap")
	p := startIotap(t, job, "record", "-o", out, "--sample-interval", "50ms", "--",
		"sh", "-c", "cat input.bin > /dev/null; cp input.bin copy.bin; rm copy.bin")
	_ = p.stdin.Close()
	if code, stdout := p.wait(t); code != 0 {
		t.Fatalf("record: exit %d\n%s\n%s", code, stdout, p.stderr)
	}
	if want := fmt.Sprintf("storage client s3fs (pid %d): peak RSS", client.Pid); !strings.Contains(p.stderr.String(), want) {
		t.Errorf("record summary lacks %q:\n%s", want, p.stderr)
	}
	r, err := trace.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	readTraceAll(t, r)
	var cs *trace.Samples
	for i, s := range r.Samples() {
		if s.Role == trace.RoleClient {
			cs = &r.Samples()[i]
		}
	}
	_ = r.Close()
	if cs == nil || cs.Name != "s3fs" || int(cs.Pid) != client.Pid || len(cs.Points) < 2 {
		t.Fatalf("client series %+v", cs)
	}
	// The copy's 24 MiB reached s3fs as FUSE write requests, read from /dev/fuse.
	if last := cs.Points[len(cs.Points)-1]; last.RChar-cs.Points[0].RChar < inputSize || last.RSS == 0 {
		t.Errorf("s3fs read %d bytes through its calls while recording, RSS %d", last.RChar-cs.Points[0].RChar, last.RSS)
	}
	code, js, errs := runReplayCLI(t, "report", "--format", "json", out)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	var doc struct {
		Traces []struct{ Client, Iotap map[string]any }
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if c := doc.Traces[0].Client; c["name"] != "s3fs" || c["peak_rss_bytes"].(float64) <= 0 || c["cpu_user_s"] == nil || c["cpu_sys_s"] == nil || len(c["series"].([]any)) < 2 {
		t.Errorf("report client %v", c)
	}
	if doc.Traces[0].Iotap["role"] != "recorder" {
		t.Errorf("report iotap %v", doc.Traces[0].Iotap)
	}

	// 2. Cold, then warm, through the mount.
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	rp := filepath.Join(mnt, "rp")
	if err := os.Mkdir(rp, 0o755); err != nil {
		t.Fatal(err)
	}
	remount := fmt.Sprintf(`[ "$IOTAP_RUN" = 1 ] || exit 0; fusermount3 -u %[1]s && env -u AWS_CA_BUNDLE s3fs lab %[1]s -o url=%[2]s,use_path_request_style,passwd_file=%[3]s/passwd-s3fs,tmpdir=%[3]s/tmp && grep -q " %[1]s fuse.s3fs " /proc/mounts`,
		mnt, srv.URL, work)
	prefix := filepath.Join(dir, "cold")
	code, rout, rerr := runReplayCLI(t, "replay", out, "--target", rp, "--prepare-via", "s3://lab/rp", "--s3-endpoint", srv.URL,
		"--between-runs", remount, "--repeat", "2", "--scratch", "--progress", "never", "-o", prefix)
	if code != 0 {
		t.Fatalf("replay cold/warm: exit %d\n%s\n%s", code, rout, rerr)
	}
	for _, want := range []string{"divergences 0", "restored the starting state in s3://lab/rp/: 1 entries kept, 0 made again", "run 1 (cold) against run 2 (warm)"} {
		if !strings.Contains(rout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, rout)
		}
	}
	pids := map[string]uint32{}
	for _, run := range []string{"r1", "r2"} {
		r, err := trace.Open(prefix + ".t1." + run + ".iotap")
		if err != nil {
			t.Fatal(err)
		}
		readTraceAll(t, r)
		start, _ := r.Header().Label("replay.start")
		pids[start] = 0
		for _, s := range r.Samples() {
			if s.Role == trace.RoleClient && s.Name == "s3fs" {
				pids[start] = s.Pid
			}
		}
		_ = r.Close()
	}
	if pids["cold"] == 0 || pids["warm"] != pids["cold"] || int(pids["cold"]) == client.Pid {
		t.Errorf("s3fs sampled by run: %v (before the remount: %d): want cold and warm, both the remounted s3fs", pids, client.Pid)
	}

	// 3. The prefetch window swept over two S3 targets.
	prefix = filepath.Join(dir, "sweep")
	code, sout, serr := runReplayCLI(t, "replay", out, "--timing", "afap", "--s3-endpoint", srv.URL, "--progress", "never",
		"--target", "s3://lab/sweep?prefetch_max=2MiB", "--target", "s3://lab/sweep?prefetch_max=32MiB&concurrency=4", "-o", prefix)
	if code != 0 {
		t.Fatalf("sweep: exit %d\n%s\n%s", code, sout, serr)
	}
	t.Logf("sweep:\n%s", sout)
	for _, want := range []string{"throughput (over each side", "concurrency=4 prefetch_max=32MiB", "iotap peak RSS"} {
		if !strings.Contains(sout, want) {
			t.Errorf("sweep output lacks %q", want)
		}
	}
}

// readTraceAll reads r to its end, so that its side tables and samples are complete.
func readTraceAll(t *testing.T, r *trace.Reader) {
	t.Helper()
	for {
		if _, err := r.Next(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
	}
}
