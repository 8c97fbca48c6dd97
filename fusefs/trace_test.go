package fusefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// knownWorkload issues syscalls whose FUSE requests the trace test expects.
func knownWorkload(dir string) error {
	runtime.LockOSThread()
	p := filepath.Join(dir, "data")
	fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_RDWR|syscall.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	for i, off := range []int64{0, 8192, 16384} {
		if n, err := syscall.Pwrite(fd, bytes.Repeat([]byte{byte('a' + i)}, 4096), off); err != nil || n != 4096 {
			return fmt.Errorf("pwrite: %d %v", n, err)
		}
	}
	buf := make([]byte, 4096)
	if n, err := syscall.Pread(fd, buf, 8192); err != nil || n != 4096 || buf[0] != 'b' {
		return fmt.Errorf("pread: %d %v", n, err)
	}
	_ = syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "missing"), &st); err != syscall.ENOENT {
		return fmt.Errorf("stat missing: %v", err)
	}
	// EACCES from the layer as root: access(X_OK) on a file without execute bits.
	if err := syscall.Access(p, unix.X_OK); err != syscall.EACCES {
		return fmt.Errorf("access X_OK: %v", err)
	}
	// EEXIST from the backend: XATTR_CREATE of an attribute that exists. (mkdir of an existing
	// name fails in the kernel's own lookup and never reaches the layer.)
	if err := unix.Setxattr(p, "user.iotap", []byte("1"), unix.XATTR_CREATE); err != nil {
		return fmt.Errorf("setxattr: %v", err)
	}
	if err := unix.Setxattr(p, "user.iotap", []byte("2"), unix.XATTR_CREATE); err != unix.EEXIST {
		return fmt.Errorf("setxattr again: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		return err
	}
	if err := os.Rename(p, filepath.Join(dir, "sub", "moved")); err != nil {
		return err
	}
	if err := os.Symlink("sub/moved", filepath.Join(dir, "link")); err != nil {
		return err
	}
	return os.Remove(filepath.Join(dir, "sub", "moved"))
}

// traceView is what the known-workload check reads, from the in-memory recorder or a file.
type traceView struct {
	events   []trace.Event
	pathName func(uint32) string
	procs    []trace.Process
	files    []trace.File
}

func TestTraceKnownWorkload(t *testing.T) {
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{})
	pid := runWorkload(t, "known", c.Mnt)
	checkKnown(t, traceView{rec.Events(), rec.PathName, rec.Processes(), rec.Files()}, pid)
	if rec.Errors() != 0 {
		t.Errorf("%d recording errors", rec.Errors())
	}
}

// TestTraceRoundTrip records the known workload through trace.Create and checks what
// trace.Open reads back.
func TestTraceRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), "known.trace")
	o := fusefs.Options{}
	w, err := trace.Create(file, trace.Header{Kind: "record", FUSE: o.TraceOptions()}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := fusetest.Mount(t, w, o)
	pid := runWorkload(t, "known", c.Mnt)
	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	c.Server.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, evs := readTraceFile(t, file)
	if r.Header().FUSE.Cache != "none" || !r.Header().FUSE.DirectIO {
		t.Errorf("header FUSE options %+v", r.Header().FUSE)
	}
	if f, ok := r.Footer(); !ok || f.Events != uint64(len(evs)) || f.Errors != 0 {
		t.Errorf("footer %+v (ok %v), %d events read", f, ok, len(evs))
	}
	checkKnown(t, traceView{evs, r.PathName, r.Processes(), r.Files()}, pid)
}

func checkKnown(t *testing.T, v traceView, pid int) {
	t.Helper()
	var mine []trace.Event
	for _, e := range v.events {
		if e.Pid == uint32(pid) {
			mine = append(mine, e)
		}
	}
	if len(mine) == 0 {
		t.Fatalf("no events from the child (pid %d) among %d", pid, len(v.events))
	}
	// The child's threads are in the process table with the child's comm.
	procs := map[uint32]trace.Process{}
	for _, p := range v.procs {
		procs[p.Tid] = p
	}
	for _, e := range mine {
		p, ok := procs[e.Tid]
		if !ok || p.Pid != uint32(pid) || p.Comm != "fusefs.test" || p.Exe == "" {
			t.Errorf("tid %d: process record %+v (ok %v), want pid %d comm fusefs.test", e.Tid, p, ok, pid)
		}
	}

	find := func(op trace.Op, path string, match func(e *trace.Event) bool) []trace.Event {
		var r []trace.Event
		for i := range mine {
			e := &mine[i]
			if e.Op == op && v.pathName(e.Path) == path && (match == nil || match(e)) {
				r = append(r, *e)
			}
		}
		return r
	}
	one := func(what string, r []trace.Event) *trace.Event {
		t.Helper()
		if len(r) != 1 {
			t.Errorf("%s: %d events, want 1", what, len(r))
			return &trace.Event{}
		}
		return &r[0]
	}

	cr := one("create data", find(trace.OpCreate, "data", nil))
	if cr.Errno != 0 || cr.Handle == 0 || cr.Flags&syscall.O_EXCL == 0 || cr.Mode&0o777 != 0o644 {
		t.Errorf("create: %+v", cr)
	}
	for _, off := range []int64{0, 8192, 16384} {
		w := one(fmt.Sprintf("write @%d", off), find(trace.OpWrite, "data", func(e *trace.Event) bool { return e.Offset == off }))
		if w.Size != 4096 || w.Ret != 4096 || w.Errno != 0 || w.Handle != cr.Handle || w.Dur <= 0 {
			t.Errorf("write @%d: %+v", off, w)
		}
	}
	r := one("read @8192", find(trace.OpRead, "data", nil))
	if r.Offset != 8192 || r.Size != 4096 || r.Ret != 4096 || r.Errno != 0 || r.Handle != cr.Handle {
		t.Errorf("read: %+v", r)
	}
	miss := find(trace.OpLookup, "missing", nil)
	if len(miss) == 0 || miss[0].Errno != uint16(syscall.ENOENT) {
		t.Errorf("lookup missing: %+v", miss)
	}
	acc := one("access", find(trace.OpAccess, "data", nil))
	if acc.Errno != uint16(syscall.EACCES) || acc.Flags != unix.X_OK {
		t.Errorf("access: %+v", acc)
	}
	sx := find(trace.OpSetxattr, "data", nil)
	if len(sx) != 2 || sx[0].Errno != 0 || sx[1].Errno != uint16(syscall.EEXIST) {
		t.Errorf("setxattr: %+v", sx)
	}
	one("mkdir sub", find(trace.OpMkdir, "sub", func(e *trace.Event) bool { return e.Errno == 0 }))
	rn := one("rename", find(trace.OpRename, "data", nil))
	if v.pathName(rn.Path2) != "sub/moved" || rn.Errno != 0 {
		t.Errorf("rename: %+v to %q", rn, v.pathName(rn.Path2))
	}
	sl := one("symlink", find(trace.OpSymlink, "link", nil))
	if v.pathName(sl.Path2) != "sub/moved" {
		t.Errorf("symlink target %q", v.pathName(sl.Path2))
	}
	one("unlink", find(trace.OpUnlink, "sub/moved", nil))
	// Release (pid 0 from the kernel) is attributed to the opener.
	rel := find(trace.OpRelease, "", nil)
	rel = append(rel, find(trace.OpRelease, "data", nil)...)
	rel = append(rel, find(trace.OpRelease, "sub/moved", nil)...)
	found := false
	for _, e := range rel {
		if e.Handle == cr.Handle {
			found = true
		}
	}
	if !found {
		t.Errorf("no release of handle %d attributed to the child", cr.Handle)
	}
	// No File record for the created file (it did not exist before the job).
	for _, f := range v.files {
		if n := v.pathName(f.Path); n == "data" || n == "sub" {
			t.Errorf("file record for created %q: %+v", n, f)
		}
	}
}

// TestTraceFileRecords checks the first-seen File records of a pre-existing tree.
func TestTraceFileRecords(t *testing.T) {
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{})
	if err := os.WriteFile(filepath.Join(c.Orig, "pre"), make([]byte, 1234), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(c.Orig, "d"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := workloadCmdRun("cat", filepath.Join(c.Mnt, "pre")); err != nil {
		t.Fatal(err)
	}
	if err := workloadCmdRun("ls", "-la", filepath.Join(c.Mnt, "d")); err != nil {
		t.Fatal(err)
	}
	got := map[string]trace.File{}
	for _, f := range rec.Files() {
		got[rec.PathName(f.Path)] = f
	}
	if f := got["pre"]; f.Type != trace.TypeFile || f.Size != 1234 || f.Mode != 0o640 || f.Nlink != 1 {
		t.Errorf("pre: %+v", f)
	}
	if f := got["d"]; f.Type != trace.TypeDir || f.Mode != 0o750 {
		t.Errorf("d: %+v", f)
	}
}

func workloadCmdRun(name string, args ...string) error {
	out, err := execCommand(name, args...).CombinedOutput()
	if err != nil {
		return errors.New(name + ": " + err.Error() + ": " + string(out))
	}
	return nil
}

// TestTracePathsKernelCache: with 1 s entry caching the kernel may open a file it only saw in
// a READDIRPLUS reply, without a LOOKUP; the layer still knows its path.
func TestTracePathsKernelCache(t *testing.T) {
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{Cache: fusefs.CacheKernel})
	if err := os.MkdirAll(filepath.Join(c.Orig, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"d/a", "d/b", "d/e/c"} {
		if err := os.WriteFile(filepath.Join(c.Orig, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := workloadCmdRun("sh", "-c", "ls -lR "+c.Mnt+" >/dev/null && cat "+c.Mnt+"/d/a "+c.Mnt+"/d/e/c >/dev/null && mv "+c.Mnt+"/d "+c.Mnt+"/z && cat "+c.Mnt+"/z/b >/dev/null"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range rec.Events() {
		if e.Op == trace.OpOpen || e.Op == trace.OpRead {
			if e.Path == 0 {
				t.Errorf("%v without a path: %+v", e.Op, e)
			}
			seen[rec.PathName(e.Path)] = true
		}
	}
	for _, want := range []string{"d/a", "d/e/c", "z/b"} {
		if !seen[want] {
			t.Errorf("no open/read of %q; saw %v", want, seen)
		}
	}
}

// TestKernelCacheWriteback: with cache=kernel, writes complete in the page cache and reach
// the layer as write-backs (WRITE_CACHE), which are attributed to the process that opened
// the file, whichever kernel thread flushed them; the FUSE device's strict dirty limit is
// lifted so a writer is not throttled to the daemon's speed after a few MiB.
func TestKernelCacheWriteback(t *testing.T) {
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{Cache: fusefs.CacheKernel})
	var st syscall.Stat_t
	if err := syscall.Stat(c.Mnt, &st); err != nil {
		t.Fatal(err)
	}
	bdi := fmt.Sprintf("/sys/class/bdi/%d:%d/strict_limit", unix.Major(st.Dev), unix.Minor(st.Dev))
	if b, err := os.ReadFile(bdi); err == nil && os.Geteuid() == 0 && strings.TrimSpace(string(b)) != "0" {
		t.Errorf("%s = %q, want 0", bdi, b)
	}
	cmd := execCommand("dd", "if=/dev/zero", "of="+c.Mnt+"/f", "bs=64k", "count=64", "conv=fsync", "status=none")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dd: %v %s", err, out)
	}
	pid := uint32(cmd.Process.Pid)
	var cached, bytes int64
	for _, e := range rec.Events() {
		if e.Op != trace.OpWrite {
			continue
		}
		if e.Flags&fuse.WRITE_CACHE != 0 {
			cached++
		}
		bytes += e.Ret
		if e.Pid != pid {
			t.Errorf("write %+v attributed to pid %d, want dd's %d", e, e.Pid, pid)
		}
	}
	if cached == 0 || bytes != 64*64<<10 {
		t.Errorf("%d write-back writes, %d bytes written; want write-backs of %d bytes", cached, bytes, 64*64<<10)
	}
	if fi, err := os.Stat(filepath.Join(c.Orig, "f")); err != nil || fi.Size() != 64*64<<10 {
		t.Errorf("backend file: %v %v", fi, err)
	}
}

// TestKernelCacheOrphanTimes: with write-back caching the kernel flushes a file's times
// (SETATTR without a handle) when it evicts the inode, which for a file the job unlinked
// is after the unlink. No application call fails, so the trace must not show an error.
func TestKernelCacheOrphanTimes(t *testing.T) {
	rec := fusetest.NewMemRecorder(0)
	c := fusetest.Mount(t, rec, fusefs.Options{Cache: fusefs.CacheKernel})
	script := "for i in 1 2 3 4 5; do echo data$i > f$i; done; rm f1 f2 f3 f4 f5"
	if out, err := execCommand("sh", "-c", "cd "+c.Mnt+" && "+script).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s", err, out)
	}
	syscall.Sync()
	setattrs := 0
	for _, e := range rec.Events() {
		if e.Op != trace.OpSetattr {
			continue
		}
		setattrs++
		if e.Errno != 0 {
			t.Errorf("setattr %+v failed with errno %d; no application call did", e, e.Errno)
		}
	}
	t.Logf("%d setattr requests", setattrs)
}
