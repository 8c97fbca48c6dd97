package fusefs_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
	"golang.org/x/sys/unix"
)

// TestPassthroughOpens: with kernel passthrough a regular file's reads and writes never
// reach the layer, a set-ID file's do (the kernel would write it with the server's
// credentials), and the counts say which was which and why.
func TestPassthroughOpens(t *testing.T) {
	testenv.Root(t, testenv.FUSE, "kernel passthrough needs root")
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{Passthrough: true})
	for name, mode := range map[string]uint32{"plain": 0o644, "setuid": 0o4755} {
		if err := os.WriteFile(filepath.Join(c.Orig, name), bytes.Repeat([]byte("x"), 10000), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Chmod(filepath.Join(c.Orig, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, "cd "+c.Mnt+" && cat plain setuid >/dev/null && echo more >> plain && echo more >> setuid")
	st := c.Server.Passthrough()
	if st.Opens != 2 || st.LayerOpens != 2 || !strings.Contains(st.Refused, "set-user-ID") {
		t.Errorf("passthrough %+v, want 2 opens of plain through the kernel and 2 of setuid through the layer", st)
	}
	data := map[string]int{}
	for _, ev := range rec.Events() {
		if ev.Op == trace.OpRead || ev.Op == trace.OpWrite {
			data[rec.PathName(ev.Path)]++
		}
	}
	if data["plain"] != 0 || data["setuid"] == 0 {
		t.Errorf("reads and writes through the layer: %v, want setuid's only", data)
	}
	if b, err := os.ReadFile(filepath.Join(c.Orig, "plain")); err != nil || len(b) != 10005 {
		t.Errorf("plain: %d bytes, %v", len(b), err)
	}
}

// TestPassthroughStacked: the kernel refuses backing files of a file system stacked as deep
// as it allows (here the layer over itself with passthrough); such files are served by the
// layer, with the same data, and the refusal is counted with its reason. Over overlayfs,
// stacked once, files are passed through.
func TestPassthroughStacked(t *testing.T) {
	testenv.Root(t, testenv.FUSE, "kernel passthrough and overlayfs need root")
	t.Run("over-passthrough-fuse", func(t *testing.T) {
		inner := fusetest.Mount(t, nil, fusefs.Options{Passthrough: true})
		if err := os.WriteFile(filepath.Join(inner.Orig, "f"), []byte("stacked"), 0o644); err != nil {
			t.Fatal(err)
		}
		outer := &fusetest.Case{Orig: inner.Mnt, Mnt: filepath.Join(filepath.Dir(inner.Mnt), "outer")}
		if err := os.Mkdir(outer.Mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		fusetest.MountCase(t, outer, fusetest.NewMemRecorder(0), fusefs.Options{Passthrough: true})
		if got := sh(t, "cat "+outer.Mnt+"/f"); string(got) != "stacked" {
			t.Errorf("read %q through the stack", got)
		}
		st := outer.Server.Passthrough()
		if st.Opens != 0 || st.LayerOpens != 1 || !strings.Contains(st.Refused, "stacked too deep") {
			t.Errorf("outer layer: %+v, want one open through the layer, refused as stacked too deep", st)
		}
	})
	t.Run("over-overlayfs", func(t *testing.T) {
		dir := t.TempDir()
		for _, d := range []string{"lower", "upper", "work", "merged", "mnt"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "lower", "f"), []byte("lower"), 0o644); err != nil {
			t.Fatal(err)
		}
		opts := "lowerdir=" + dir + "/lower,upperdir=" + dir + "/upper,workdir=" + dir + "/work"
		if err := syscall.Mount("overlay", filepath.Join(dir, "merged"), "overlay", 0, opts); err != nil {
			testenv.Skip(t, testenv.FUSE, "overlayfs: %v", err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(dir, "merged"), syscall.MNT_DETACH) })
		c := &fusetest.Case{Orig: filepath.Join(dir, "merged"), Mnt: filepath.Join(dir, "mnt")}
		fusetest.MountCase(t, c, fusetest.NewMemRecorder(0), fusefs.Options{Passthrough: true})
		if out, err := exec.Command("sh", "-c", "cat "+c.Mnt+"/f && echo up >> "+c.Mnt+"/f").CombinedOutput(); err != nil || string(out) != "lower" {
			t.Fatalf("through overlayfs: %q, %v", out, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, "upper", "f")); string(b) != "lowerup\n" {
			t.Errorf("overlayfs's upper layer holds %q", b)
		}
		if st := c.Server.Passthrough(); st.Opens != 2 || st.LayerOpens != 0 {
			t.Errorf("over overlayfs: %+v, want both opens passed through", st)
		}
	})
}

// TestPassthroughMmap: a file mapped shared through a passthrough mount and written through
// the map holds, on the backing file system, what the job wrote, as it does natively; a
// private map's writes stay private.
func TestPassthroughMmap(t *testing.T) {
	need(t, "python3")
	testenv.Root(t, testenv.FUSE, "kernel passthrough needs root")
	c := fusetest.Mount(t, fusetest.NewMemRecorder(0), fusefs.Options{Passthrough: true})
	native := t.TempDir()
	script := `import mmap, os, sys
d = sys.argv[1]
for name, flags in (("shared", mmap.MAP_SHARED), ("private", mmap.MAP_PRIVATE)):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(b"." * 8192)
    with open(p, "r+b") as f:
        m = mmap.mmap(f.fileno(), 8192, flags=flags)
        m[100:105] = b"hello"
        m[5000:5005] = b"world"
        m.flush() if flags == mmap.MAP_SHARED else None
        m.close()
`
	for _, d := range []string{c.Mnt, native} {
		sh(t, "python3 -c '"+script+"' "+d)
	}
	for _, name := range []string{"shared", "private"} {
		got, err := os.ReadFile(filepath.Join(c.Orig, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(native, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the backing file differs from the native one", name)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(c.Orig, "shared")); !bytes.Contains(b, []byte("hello")) || !bytes.Contains(b, []byte("world")) {
		t.Errorf("the shared map's writes did not reach the backing file")
	}
	if st := c.Server.Passthrough(); st.LayerOpens != 0 {
		t.Errorf("opens through the layer: %+v", st)
	}
}

// TestPassthroughBackingIsNoOpen: the backing file the layer registers with the kernel is
// an O_PATH descriptor, no open of the backend file. The kernel opens the backend itself for
// each of the application's opens and closes it with them; an open of the layer's own that
// the kernel keeps until after the last release would make a backend that tells open files
// apart (s3fs) see the file open after the application closed it.
func TestPassthroughBackingIsNoOpen(t *testing.T) {
	testenv.Root(t, testenv.FUSE, "kernel passthrough needs root")
	c := fusetest.Mount(t, fusetest.NewMemRecorder(0), fusefs.Options{Passthrough: true})
	orig := filepath.Join(c.Orig, "f")
	if err := os.WriteFile(orig, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The child holds the file open through the mount until its stdin closes.
	cmd := exec.Command("sh", "-c", "cd "+c.Mnt+" && exec 3<f && cat <&3 && read x")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "data" {
		t.Fatalf("the child read %q, %v", buf, err)
	}
	if st := c.Server.Passthrough(); st.Opens != 1 {
		t.Fatalf("passthrough %+v, want the open passed through", st)
	}
	// This process serves the mount: its descriptors of the backend file are the layer's.
	var plain, path int
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != orig {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		var flags uint64
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, _ = strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&unix.O_PATH != 0 {
			path++
		} else {
			plain++
		}
	}
	if plain != 1 || path != 1 {
		t.Errorf("the layer holds %d open descriptors and %d O_PATH ones of the backend file, want 1 and 1", plain, path)
	}
}
