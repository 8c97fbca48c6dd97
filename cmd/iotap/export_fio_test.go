package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
	"golang.org/x/sys/unix"
)

// iologTotals are what an iolog asks fio to do.
type iologTotals struct {
	reads, writes, syncs, trims uint64
	readBytes, writeBytes       uint64
	files                       int
}

// checkIolog checks an iolog against the rules fio's read_iolog applies (version 3 header;
// names fio reads back as written; a file added before it is opened, and open for its
// I/O; times that do not go back) and returns what it holds.
func checkIolog(t *testing.T, log string) iologTotals {
	t.Helper()
	var n iologTotals
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() || sc.Text() != "fio version 3 iolog" {
		t.Fatalf("first line %q", sc.Text())
	}
	added, open := map[string]bool{}, map[string]bool{}
	last := int64(-1)
	for line := 2; sc.Scan(); line++ {
		f := strings.Split(sc.Text(), " ")
		if len(f) != 3 && len(f) != 5 {
			t.Fatalf("line %d: %q: want 3 or 5 fields", line, sc.Text())
		}
		ts, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || ts < last {
			t.Fatalf("line %d: time %q after %d", line, f[0], last)
		}
		last = ts
		name := f[1]
		if name == "" || len(name) > 255 {
			t.Fatalf("line %d: name of %d bytes", line, len(name))
		}
		switch act := f[2]; act {
		case "add":
			if added[name] {
				t.Errorf("line %d: %s added twice", line, name)
			}
			added[name] = true
			n.files++
		case "open", "close":
			if !added[name] || open[name] == (act == "open") {
				t.Errorf("line %d: %s %s (added %v, open %v)", line, act, name, added[name], open[name])
			}
			open[name] = act == "open"
		case "read", "write", "sync", "datasync", "trim":
			if len(f) != 5 || !open[name] {
				t.Errorf("line %d: %q on a file not open", line, sc.Text())
			}
			off, err1 := strconv.ParseUint(f[3], 10, 64)
			length, err2 := strconv.ParseUint(f[4], 10, 32)
			if err1 != nil || err2 != nil {
				t.Fatalf("line %d: %q", line, sc.Text())
			}
			_ = off
			switch act {
			case "read":
				n.reads++
				n.readBytes += length
			case "write":
				n.writes++
				n.writeBytes += length
			case "trim":
				n.trims++
			default:
				n.syncs++
			}
		default:
			t.Fatalf("line %d: action %q", line, act)
		}
	}
	return n
}

// TestExportFio: a trace's reads, writes and syncs become iolog lines on the file each
// handle opened, under the first name of a file the trace renamed (fio cannot rename),
// with names fio cannot read replaced; metadata, failures and reads of no bytes are left
// out and counted.
func TestExportFio(t *testing.T) {
	const tid = 1
	b := tracetest.NewFUSE(t)
	ev := func(op trace.Op, name string, mod func(e *trace.Event)) { b.Ev(tid, op, name, 3000, 1000, mod) }
	fh := b.Create(tid, "dir/a")
	b.RW(tid, trace.OpWrite, "dir/a", fh, 0, 100, 100)
	b.Close(tid, "dir/a", fh)
	ev(trace.OpRename, "dir/a", func(e *trace.Event) { e.Path2 = b.Path("dir/b") })
	fh = b.Open(tid, "dir/b", unix.O_RDONLY)
	b.RW(tid, trace.OpRead, "dir/b", fh, 0, 4096, 100)
	b.RW(tid, trace.OpRead, "dir/b", fh, 100, 4096, 0) // the end of the file
	b.Close(tid, "dir/b", fh)
	ev(trace.OpRename, "dir", func(e *trace.Event) { e.Path2 = b.Path("dir2") })
	fh = b.Open(tid, "dir2/b", unix.O_RDWR)
	ev(trace.OpFsync, "dir2/b", func(e *trace.Event) { e.Handle, e.Flags = fh, trace.FsyncDatasync })
	b.Close(tid, "dir2/b", fh)
	// A handle opened before the trace began, on a name with a space.
	b.RW(tid, trace.OpRead, "pre/old data", 77, 0, 10, 10)
	long := strings.Repeat("d", 100) + "/" + strings.Repeat("e", 100) + "/" + strings.Repeat("f", 100)
	fl := b.Create(tid, long)
	b.RW(tid, trace.OpWrite, long, fl, 0, 1, 1)
	b.Close(tid, long, fl)
	x, y := b.Create(tid, "x"), b.Create(tid, "y")
	ev(trace.OpCopyFileRange, "x", func(e *trace.Event) {
		e.Path2, e.Handle, e.Handle2, e.Offset, e.Offset2, e.Size, e.Ret = b.Path("y"), x, y, 0, 8, 50, 50
	})
	ev(trace.OpFallocate, "y", func(e *trace.Event) { e.Handle, e.Flags, e.Offset, e.Size = y, 0x03, 4096, 8192 })
	ev(trace.OpFallocate, "y", func(e *trace.Event) { e.Handle, e.Size = y, 1<<20 }) // reserves space
	ev(trace.OpFsync, "y", func(e *trace.Event) { e.Handle = y })
	b.Ev(tid, trace.OpRead, "x", 3000, 1000, func(e *trace.Event) { e.Handle, e.Size, e.Errno = x, 10, uint16(syscall.EIO) })
	x2 := b.Open(tid, "x", unix.O_RDONLY) // x open twice: closed after both
	b.Close(tid, "x", x)
	b.RW(tid, trace.OpRead, "x", x2, 0, 5, 5)
	b.Close(tid, "x", x2)
	b.Close(tid, "y", y)
	ev(trace.OpLink, "z", func(e *trace.Event) { e.Path2 = b.Path("y") })
	z := b.Open(tid, "z", unix.O_RDONLY)
	b.RW(tid, trace.OpRead, "z", z, 0, 5, 5)
	b.Close(tid, "z", z)
	q := b.Create(tid, "q'd/f")
	b.RW(tid, trace.OpWrite, "q'd/f", q, 0, 1, 1)
	b.Close(tid, "q'd/f", q)

	dir := t.TempDir()
	tr := filepath.Join(dir, "t.iotap")
	if err := os.WriteFile(tr, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	setup := filepath.Join(dir, "setup.sh")
	code, out, stderr := runIotap(t, nil, "export", "--format", "fio", "--fio-setup", setup, tr)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	n := checkIolog(t, out)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		_, rest, _ := strings.Cut(l, " ")
		got = append(got, rest)
	}
	want := []string{
		"dir/a add", "dir/a open", "dir/a write 0 100", "dir/a close",
		"dir/a open", "dir/a read 0 100", "dir/a close", // dir/b: the file first named dir/a
		"dir/a open", "dir/a datasync 0 0", "dir/a close", // dir2/b: its directory renamed too
		"iotap-fio-1 add", "iotap-fio-1 open", "iotap-fio-1 read 0 10",
		"iotap-fio-2 add", "iotap-fio-2 open", "iotap-fio-2 write 0 1", "iotap-fio-2 close",
		"x add", "x open", "y add", "y open", "x read 0 50", "y write 8 50", "y trim 4096 8192", "y sync 0 0",
		"x read 0 5", "x close", "y close",
		"y open", "y read 0 5", "y close", // z: a link to y
		"q'd/f add", "q'd/f open", "q'd/f write 0 1", "q'd/f close",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("iolog:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n.reads != 5 || n.writes != 4 || n.readBytes != 170 || n.writeBytes != 152 || n.syncs != 2 || n.trims != 1 {
		t.Errorf("iolog totals %+v", n)
	}
	for _, s := range []string{"5 reads (170 bytes), 4 writes (152 bytes), 1 syncs, 1 datasyncs, 1 trims (8192 bytes) on 6 files",
		"1 copy_file_range", "1 failed, 1 moving no bytes, 1 fallocates reserving space",
		`2 names fio cannot read`, `"pre/old data" → iotap-fio-1`} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
	// The setup script makes the directories and links the changed name of a file the job
	// found (pre/old data) to it.
	testenv.Programs(t, testenv.FUSE, "sh")
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "pre"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "pre", "old data"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", setup)
	sh.Dir = target
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("setup script: %v\n%s", err, out)
	}
	for _, p := range []string{"dir", "q'd", "iotap-fio-1"} {
		if _, err := os.Stat(filepath.Join(target, p)); err != nil {
			t.Errorf("after the setup script: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(target, "iotap-fio-2")); err == nil {
		t.Error("the setup script made a file the job made itself")
	}

	// As system calls: the same I/O (the flushes and releases fold into closes).
	code, calls, stderr := runIotap(t, nil, "export", "--format", "fio", "--view", "syscalls", tr)
	if code != exitOK {
		t.Fatalf("--view syscalls: exit %d\n%s", code, stderr)
	}
	if c := checkIolog(t, calls); c != n {
		t.Errorf("--view syscalls: %+v, requests %+v\n%s", c, n, calls)
	}

	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{name: "fio-setup-alone", args: []string{"--fio-setup", setup, tr}, stderr: "--fio-setup goes with --format fio"},
		{name: "bad-view", args: []string{"--format", "fio", "--view", "calls", tr}, stderr: `--view "calls"`},
		{name: "key-file-alone", args: []string{"--key-file", setup, tr}, stderr: "go with --anonymize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, nil, append([]string{"export"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stderr (want %q):\n%s", code, tc.stderr, stderr)
			}
		})
	}
}
