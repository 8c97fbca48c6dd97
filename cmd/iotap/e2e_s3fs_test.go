package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// workloadScript is the genomics-like job shared with scripts/demo.sh.
func workloadScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "scripts", "workload-genomics.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRecordS3FSGenomics runs a real pipeline (samtools, tar, sqlite3) through `iotap
// record` over an s3fs mount of a local S3 server, and checks that every output equals the
// same run's on a local directory without iotap, and that the trace holds the expected ops.
// It is one long scenario on purpose: the steps share the server, the mount and the
// reference run, each costing seconds to set up.
func TestRecordS3FSGenomics(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "s3fs", "samtools", "sqlite3", "tar", "awk")
	script := workloadScript(t)
	dir := t.TempDir()

	srv, err := s3test.Start(s3test.Options{Buckets: []string{"genomics"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	mnt := filepath.Join(dir, "s3")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := s3test.MountS3FS(srv.URL, "genomics", mnt, filepath.Join(dir, "s3fs-work"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount() })

	// Reference run: local directory, no iotap.
	local := filepath.Join(dir, "local")
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	ref := exec.Command("sh", script)
	ref.Dir = local
	ref.Env = append(os.Environ(), "WORKLOAD_READS=5000")
	if out, err := ref.CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}

	// Traced run over s3fs, in place.
	out := filepath.Join(dir, "s3.iotap")
	p := startIotap(t, mnt, "record", "--target", mnt, "-o", out, "--label", "workload=genomics", "--", "env", "WORKLOAD_READS=5000", "sh", script)
	_ = p.stdin.Close()
	code, stdout := p.wait(t)
	if code != 0 {
		t.Fatalf("traced run: exit %d\nstdout: %s\nstderr: %s", code, stdout, p.stderr)
	}
	if !strings.Contains(stdout, "workload done: 5000 reads") {
		t.Errorf("job stdout %q", stdout)
	}

	want := treeFiles(t, local)
	got := treeFiles(t, mnt)
	if strings.Join(keys(want), ",") != strings.Join(keys(got), ",") {
		t.Fatalf("file lists differ:\nlocal: %v\ns3fs:  %v", keys(want), keys(got))
	}
	for _, name := range keys(want) {
		if !bytes.Equal(want[name], got[name]) {
			t.Errorf("%s differs: local %d bytes, s3fs %d bytes", name, len(want[name]), len(got[name]))
		}
	}
	for _, name := range []string{"reads.sorted.bam", "reads.sorted.bam.bai", "flagstat.txt", "archive.tar", "sqlite.out", "extract/tree/b/reads.sam"} {
		if len(want[name]) == 0 {
			t.Errorf("%s is missing or empty", name)
		}
	}

	tc := readTrace(t, out)
	if !tc.footer || len(tc.damage) > 0 {
		t.Errorf("footer %v damage %v", tc.footer, tc.damage)
	}
	if tc.hdr.Target.FSType != "fuse.s3fs" || tc.hdr.Target.Path != mnt {
		t.Errorf("target %+v", tc.hdr.Target)
	}
	for _, w := range []struct {
		op         trace.Op
		path, comm string
	}{
		{trace.OpCreate, "reads.sam", ""},
		{trace.OpRead, "reads.sam", "samtools"},
		{trace.OpCreate, "reads.bam", "samtools"},
		{trace.OpWrite, "reads.sorted.bam", "samtools"},
		{trace.OpCreate, "reads.sorted.bam.bai", "samtools"},
		{trace.OpMkdir, "tree", "mkdir"},
		{trace.OpCreate, "archive.tar", "tar"},
		{trace.OpRead, "tree/b/reads.sam", "tar"},
		{trace.OpWrite, "extract/tree/b/reads.sam", "tar"},
		{trace.OpCreate, "reads.db", "sqlite3"},
		{trace.OpWrite, "reads.db", "sqlite3"},
		{trace.OpFsync, "", "sqlite3"},
		{trace.OpUnlink, "", ""},
	} {
		if !tc.has(w.op, w.path, w.comm) {
			t.Errorf("trace lacks %v %q by %q", w.op, w.path, w.comm)
		}
	}
	if t.Failed() {
		t.Logf("iotap stderr:\n%s", p.stderr)
		return
	}

	// The same recording replayed onto a local directory and onto S3 itself (the s3fs
	// request profile, against the same server), then compared with the recording.
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	target := filepath.Join(dir, "replay-local")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, "replay")
	code, rout, rerr := runReplayCLI(t, "replay", out, "--target", target, "--target", "s3://genomics/replay",
		"--s3-profile", "s3fs", "--s3-endpoint", srv.URL, "--progress", "never", "-o", prefix)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, rout, rerr)
	}
	if n := strings.Count(rout, "divergences 0"); n != 2 {
		t.Errorf("replay summaries: %d of 2 targets without divergences:\n%s", n, rout)
	}
	// The replayed job's outputs are real files with the recorded sizes.
	for _, name := range []string{"reads.sorted.bam", "archive.tar", "extract/tree/b/reads.sam"} {
		st, err := os.Stat(filepath.Join(target, name))
		if err != nil || st.Size() != int64(len(want[name])) {
			t.Errorf("replayed %s: %v, size %d, want %d", name, err, sizeOf(st), len(want[name]))
		}
	}
	code, cout, cerr := runReplayCLI(t, "compare", out, prefix+".t1.r1.iotap", prefix+".t2.r1.iotap")
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, cout, cerr)
	}
	t.Logf("compare:\n%s", cout)
	if !strings.Contains(cout, "3 sides, baseline s3") {
		t.Errorf("compare header: %s", firstLine(cout))
	}
	// Shape: a table for the job's reads, writes and opens (creates among them: the tables
	// are per system call), and each side's file system.
	for _, op := range []string{"\nread\n", "\nwrite\n", "\nopen\n"} {
		if !strings.Contains(cout, op) {
			t.Errorf("compare has no table for %q", strings.TrimSpace(op))
		}
	}
	for _, kind := range []string{"fuse.s3fs", "s3"} {
		if !strings.Contains(cout, " "+kind+" ") {
			t.Errorf("compare does not show file system %q", kind)
		}
	}
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// treeFiles reads every regular file under root, by relative path.
func treeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		data, err := os.ReadFile(p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
