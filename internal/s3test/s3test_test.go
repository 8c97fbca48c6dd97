package s3test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

func TestServerListsBuckets(t *testing.T) {
	for _, tt := range []struct {
		name string
		dir  bool
	}{{name: "memory"}, {name: "disk", dir: true}} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Buckets: []string{"data"}}
			if tt.dir {
				o.Dir = t.TempDir()
			}
			s, err := Start(o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			resp, err := http.Get(s.URL + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte("<Name>data</Name>")) {
				t.Fatalf("status %d body %s", resp.StatusCode, body)
			}
		})
	}
}

// TestS3FS mounts a bucket with s3fs and round-trips a file through it.
func TestS3FS(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "s3fs")
	testenv.Root(t, testenv.FUSE, "mounts s3fs")
	s, err := Start(Options{Buckets: []string{"data"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := MountS3FS(s.URL, "data", mnt, filepath.Join(dir, "work"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = m.Unmount() }()
	want := bytes.Repeat([]byte("iotap"), 100000)
	cmd := exec.Command("dd", "of="+filepath.Join(mnt, "f"), "bs=64k", "status=none")
	cmd.Stdin = bytes.NewReader(want)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}
	got, err := exec.Command("cat", filepath.Join(mnt, "f")).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(want))
	}
}
