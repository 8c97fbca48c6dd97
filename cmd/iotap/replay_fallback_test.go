package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
)

// TestReplayFallbacksOntoS3FS: a job recorded on a local directory moves a file with mv
// (coreutils sends renameat2(RENAME_NOREPLACE)), preallocates and punches a file with
// fallocate, and writes into it. s3fs refuses the first with EINVAL and fallocate with
// EOPNOTSUPP; the replay onto s3fs does what mv and the application do there (a plain
// rename, zeros written as posix_fallocate does, no hole), counts three fallbacks and no
// divergence, and leaves the files the job left.
func TestReplayFallbacksOntoS3FS(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "s3fs", "mv", "fallocate", "dd")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	tr := filepath.Join(dir, "rec.iotap")
	job := `echo hello > a && mv a b && echo x > f && fallocate -l 8192 f && fallocate -p -o 0 -l 4096 f && ` +
		`dd if=/dev/zero of=f bs=10 count=5 seek=20 conv=notrunc status=none`
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job)
	cmd.Dir = work
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}

	srv, err := s3test.Start(s3test.Options{Buckets: []string{"fallback"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	mnt := filepath.Join(dir, "s3")
	mustDo(t, os.Mkdir(mnt, 0o755))
	m, err := s3test.MountS3FS(srv.URL, "fallback", mnt, filepath.Join(dir, "s3fs-work"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount() })
	tgt := filepath.Join(mnt, "replay")
	mustDo(t, os.Mkdir(tgt, 0o755))

	prefix := filepath.Join(dir, "res")
	code, out, errs := runReplayCLI(t, "replay", tr, "--target", tgt, "-o", prefix, "--sample-interval", "0")
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	t.Log(out)
	js, err := os.ReadFile(prefix + ".t1.r1.json")
	mustDo(t, err)
	var s replay.Summary
	mustDo(t, json.Unmarshal(js, &s))
	fallbacks := map[trace.Op]uint64{}
	for _, o := range s.Ops {
		if o.Fallbacks > 0 {
			fallbacks[o.Op] = o.Fallbacks
		}
	}
	if s.Divergences != 0 || fallbacks[trace.OpRename] != 1 || fallbacks[trace.OpFallocate] != 2 || s.Fallbacks != 3 {
		t.Errorf("divergences %d, fallbacks %v (%d in all); want 0, rename 1 and fallocate 2: %v %v",
			s.Divergences, fallbacks, s.Fallbacks, s.Examples, s.BackendExamples)
	}
	if !strings.Contains(out, "done as the application does instead (fallbacks; not divergences): fallocate 2/2; rename 1/1") {
		t.Errorf("summary does not list the fallbacks:\n%s", out)
	}
	for name, size := range map[string]int64{"b": 6, "f": 8192} {
		st, err := os.Stat(filepath.Join(tgt, name))
		if err != nil || st.Size() != size {
			t.Errorf("%s on s3fs: %v %v, want %d bytes", name, st, err, size)
		}
	}
	if _, err := os.Stat(filepath.Join(tgt, "a")); !os.IsNotExist(err) {
		t.Errorf("a still on s3fs after mv: %v", err)
	}
}
