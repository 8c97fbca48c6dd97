package fusefs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// copyScript copies count bytes from src at offIn to dst at offOut with one
// copy_file_range(2) call and prints the byte count it returned.
const copyScript = `import os, sys
src, dst, count, off_in, off_out = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
s = os.open(src, os.O_RDONLY)
d = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
print(os.copy_file_range(s, d, count, off_in, off_out))
`

// TestTraceCopyFileRangeOffsets: a copy_file_range with explicit input and output offsets
// (python3 in a child process) is recorded with both: the input offset in Offset, the
// output offset in Offset2, with and without the kernel's page cache.
func TestTraceCopyFileRangeOffsets(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "python3")
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	const size, count, offIn, offOut = 100000, 10000, 5000, 70000
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		rec := fusetest.NewMemRecorder(0)
		c := fusetest.Mount(t, rec, mode)
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i * 7)
		}
		if err := os.WriteFile(filepath.Join(c.Orig, "src"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := execCommand(python, "-c", copyScript, filepath.Join(c.Mnt, "src"), filepath.Join(c.Mnt, "dst"),
			strconv.Itoa(count), strconv.Itoa(offIn), strconv.Itoa(offOut)).CombinedOutput()
		if err != nil {
			t.Fatalf("python3: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); got != strconv.Itoa(count) {
			t.Fatalf("copy_file_range returned %s, want %d", got, count)
		}
		dst, err := os.ReadFile(filepath.Join(c.Orig, "dst"))
		if err != nil {
			t.Fatal(err)
		}
		if len(dst) != offOut+count || !bytes.Equal(dst[offOut:], src[offIn:offIn+count]) {
			t.Fatalf("dst has %d bytes; want src[%d:%d] at %d", len(dst), offIn, offIn+count, offOut)
		}

		var copies []trace.Event
		for _, e := range rec.Events() {
			switch e.Op {
			case trace.OpCopyFileRange:
				copies = append(copies, e)
			case trace.OpWrite:
				if rec.PathName(e.Path) == "dst" {
					t.Errorf("the kernel copied with a write (%+v): no COPY_FILE_RANGE reached the layer", e)
				}
			}
		}
		if len(copies) != 1 {
			t.Fatalf("%d copy_file_range events, want 1: %+v", len(copies), copies)
		}
		e := copies[0]
		if e.Offset != offIn || e.Offset2 != offOut || e.Size != count || e.Ret != count || e.Errno != 0 {
			t.Errorf("copy_file_range event offset %d, offset2 %d, size %d, ret %d, errno %d; want %d, %d, %d, %d, 0",
				e.Offset, e.Offset2, e.Size, e.Ret, e.Errno, offIn, offOut, count, count)
		}
		if rec.PathName(e.Path) != "src" || rec.PathName(e.Path2) != "dst" || e.Handle == 0 || e.Handle2 == 0 || e.Handle == e.Handle2 {
			t.Errorf("copy_file_range event paths %q -> %q, handles %d -> %d", rec.PathName(e.Path), rec.PathName(e.Path2), e.Handle, e.Handle2)
		}
	})
}
