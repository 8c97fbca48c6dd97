package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/s3test"
	"github.com/iotap/iotap/internal/testenv"
)

// TestMain runs fakes3 itself when the test binary is started as it (see startFakes3).
func TestMain(m *testing.M) {
	if os.Getenv("FAKES3_TEST_MAIN") == "1" {
		os.Args = append([]string{"fakes3"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startFakes3 runs fakes3 with args in a child process and returns its URL, read from the
// line it prints once it serves.
func startFakes3(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FAKES3_TEST_MAIN=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fakes3 printed no URL: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return strings.TrimSpace(line)
}

// TestDirBucketListing: fakes3 -dir answers a bucket listing whose URL ends in "/" (as
// s3fs sends it) with the listing, not NoSuchBucket.
func TestDirBucketListing(t *testing.T) {
	url := startFakes3(t, "-dir", t.TempDir(), "-bucket", "data")
	for _, u := range []string{url + "/data/?list-type=2", url + "/data?list-type=2", url + "/data/?delimiter=/&max-keys=1000&prefix=missing/"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "<ListBucketResult") {
			t.Errorf("GET %s: %d %s", u, resp.StatusCode, body)
		}
	}
}

// TestS3FSOverDir mounts s3fs over a directory-backed fakes3 and runs, in a shell, what
// replay's prepare step and a job do there: nested directories, files written and read,
// listings, a rename, a missing name, a tree removed. The objects land in fakes3's
// directory.
func TestS3FSOverDir(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "s3fs", "fusermount3")
	testenv.Root(t, testenv.FUSE, "mounts s3fs")
	store, work := t.TempDir(), t.TempDir()
	url := startFakes3(t, "-dir", store, "-bucket", "data")
	mnt := filepath.Join(work, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := s3test.MountS3FS(url, "data", mnt, filepath.Join(work, "s3fs"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unmount() }()
	// s3fs retries a server error for ever: a bound turns that into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := `set -e
mkdir -p a/b/c d
echo one > a/b/c/f1
echo two > a/b/f2
printf 'x%.0s' $(seq 1 100000) > d/big
mv a/b/f2 a/b/f3
ls a/b
cat a/b/c/f1 a/b/f3
wc -c < d/big
if stat nothing 2>/dev/null; then echo "stat of a missing name succeeded"; exit 1; fi
rm -r a/b/c
ls a/b
ls
`
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = mnt
	cmd.WaitDelay = 5 * time.Second // a child stuck in the mount keeps the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("job on s3fs over fakes3 -dir: %v\n%s", err, out)
	}
	want := "c\nf3\none\ntwo\n100000\nf3\na\nd\n"
	if string(out) != want {
		t.Errorf("job output %q, want %q", out, want)
	}
	var files []string
	_ = filepath.WalkDir(filepath.Join(store, "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".o") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 4 { // d/big, a/b/f3 and the directory markers of a, a/b, d
		t.Errorf("objects in fakes3's directory: %q", files)
	}
}
