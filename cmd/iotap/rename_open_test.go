package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
)

// TestGitLocksOnRclone: git takes its locks by creating NAME.lock, writing and closing it,
// and renaming it over NAME, at once. The kernel answers the close before it sends the
// layer the RELEASE, so the layer's rename could reach the backend while the layer still
// held the lock file open; rclone's VFS then writes a file renamed while open back under
// its old name, and git's next lock of the same name fails with EEXIST ("could not lock
// config file … File exists"): 17–30 % of recorded clones failed so, none natively. The
// rename now waits for the RELEASE that follows a FLUSH (fusefs/internal/loopback/
// releasing.go). rclone serves the layer's RELEASE and RENAME concurrently itself, so about
// one recorded clone in thirty still fails (docs/semantics.md): each mode may lose 5 of its
// 36 clones (more happens about once in 300 runs with the fix), where without it it loses
// 6 to 11 on average.
func TestGitLocksOnRclone(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "rclone", "git")
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitRun("init", "-q", src)
	for i := range 3 {
		mustDo(t, os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), []byte(strings.Repeat("x", 100*i+1)), 0o644))
		gitRun("-C", src, "add", "-A")
		gitRun("-C", src, "commit", "-q", "-m", fmt.Sprint(i))
	}

	srv, err := s3test.Start(s3test.Options{Buckets: []string{"rclone"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	mnt := filepath.Join(dir, "mnt")
	mustDo(t, os.Mkdir(mnt, 0o755))
	m, err := s3test.MountRclone(srv.URL, "rclone", mnt, filepath.Join(dir, "rclone-work"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unmount() })

	const clones, mayFail = 36, 5
	for _, data := range []string{"kernel", "layer"} {
		t.Run(data, func(t *testing.T) {
			work := filepath.Join(mnt, data)
			mustDo(t, os.Mkdir(work, 0o755))
			job := fmt.Sprintf(`for i in $(seq %d); do git clone -q --no-local %s repo$i; done; true`, clones, src)
			cmd := exec.Command(iotapBin, "record", "--data", data, "--target", work, "-o", filepath.Join(dir, data+".iotap"), "--", "sh", "-c", job)
			cmd.Dir = work
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("recorded clones onto rclone: %v\n%s", err, out)
			}
			var failed []string
			for i := 1; i <= clones; i++ {
				if b, err := exec.Command("git", "-C", filepath.Join(work, fmt.Sprintf("repo%d", i)), "rev-parse", "HEAD").CombinedOutput(); err != nil {
					failed = append(failed, fmt.Sprintf("repo%d: %v %s", i, err, strings.TrimSpace(string(b))))
				}
			}
			if len(failed) > mayFail {
				t.Errorf("%d of %d recorded clones failed (at most %d may): %v\n%s", len(failed), clones, mayFail, failed, out)
			} else if len(failed) > 0 {
				t.Logf("%d of %d clones failed (allowed): %v", len(failed), clones, failed)
			}
		})
	}
}
