package fusefs_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// TestInPlace mounts a directory over itself: existing files read through the layer, and
// files written through it land in the real directory.
func TestInPlace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "input"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := fusetest.NewMemRecorder(0)
	c := &fusetest.Case{Orig: dir, Mnt: dir}
	fusetest.MountCase(t, c, rec, fusefs.Options{})

	if err := workloadCmdRun("sh", "-ec", "cd "+dir+" && cat input > output && mkdir sub && echo x > sub/y"); err != nil {
		t.Fatal(err)
	}
	var reads, writes int
	for _, e := range rec.Events() {
		if (e.Op == trace.OpRead || e.Op == trace.OpCopyFileRange) && rec.PathName(e.Path) == "input" {
			reads++
		}
		if (e.Op == trace.OpWrite && rec.PathName(e.Path) == "output") ||
			(e.Op == trace.OpCopyFileRange && rec.PathName(e.Path2) == "output") {
			writes++
		}
	}
	if reads == 0 || writes == 0 {
		t.Errorf("reads of input %d, writes of output %d: the job did not go through the layer", reads, writes)
	}
	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	c.Server.Wait()
	for name, want := range map[string]string{"output": "hello\n", "sub/y": "x\n"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(b) != want {
			t.Errorf("%s after unmount: %q %v, want %q", name, b, err, want)
		}
	}
}
