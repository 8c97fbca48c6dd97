// Package backendtest is the conformance suite every replay.Backend runs: the mounted
// directory, decorated backends, and S3 (replay/s3) behind an in-process fake. Capabilities
// mark documented differences, so a backend skips what it cannot express instead of
// failing it.
package backendtest

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/iotap/iotap/replay"
)

// Caps lists what a backend can express.
type Caps struct {
	Symlinks bool // Symlink, Readlink
	Rename   bool
	Locks    bool
	Xattrs   bool
	Modes    bool // Chmod changes what Lstat reports
}

// All is every capability (a local directory).
var All = Caps{Symlinks: true, Rename: true, Locks: true, Xattrs: false, Modes: true}

// Run runs the suite. newBackend returns a fresh, empty backend; the suite closes it.
func Run(t *testing.T, caps Caps, newBackend func(t *testing.T) replay.Backend) {
	for _, c := range []struct {
		name string
		test func(t *testing.T, ctx context.Context, caps Caps, b replay.Backend)
	}{
		{"empty and reset", emptyAndReset},
		{"file data", fileData},
		{"namespace errors", namespaceErrors},
		{"rename and links", renameAndLinks},
		{"escapes refused", escapesRefused},
		{"locks", locks},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			t.Cleanup(func() { _ = b.Close() })
			c.test(t, context.Background(), caps, b)
		})
	}
}

// emptyAndReset: a fresh backend is empty; Reset empties it again.
func emptyAndReset(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	empty, err := b.IsEmpty(ctx)
	if err != nil || !empty {
		t.Fatalf("fresh backend: empty=%v err=%v", empty, err)
	}
	mustOK(t, b.Mkdir(ctx, "d", 0o755))
	if empty, _ := b.IsEmpty(ctx); empty {
		t.Fatal("IsEmpty after mkdir")
	}
	mustOK(t, b.Reset(ctx))
	if empty, _ := b.IsEmpty(ctx); !empty {
		t.Fatal("not empty after Reset")
	}
}

// fileData: writes read back, fsync and truncate, exclusive create of an existing file.
func fileData(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	f, err := b.Open(ctx, "f", syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o644)
	mustOK(t, err)
	n, err := f.WriteAt(ctx, []byte("hello world"), 0)
	if n != 11 || err != nil {
		t.Fatalf("write: %d %v", n, err)
	}
	buf := make([]byte, 64)
	n, err = f.ReadAt(ctx, buf, 6)
	if n != 5 || string(buf[:n]) != "world" {
		t.Fatalf("read: %d %q %v", n, buf[:n], err)
	}
	mustOK(t, f.Sync(ctx, false))
	mustOK(t, f.Truncate(ctx, 5))
	a, err := f.Stat(ctx)
	if err != nil || a.Size != 5 {
		t.Fatalf("stat after truncate: %+v %v", a, err)
	}
	mustOK(t, f.Close(ctx))
	if _, err := b.Open(ctx, "f", syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL, 0o644); replay.Errno(err) != syscall.EEXIST {
		t.Fatalf("exclusive create of an existing file: %v", err)
	}
	mustOK(t, b.Truncate(ctx, "f", 0))
	if a, _ := b.Lstat(ctx, "f"); a.Size != 0 {
		t.Fatalf("size after Truncate: %d", a.Size)
	}
}

// namespaceErrors: the errnos of missing names, existing names and non-empty directories.
func namespaceErrors(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	tests := []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"lstat missing", func() error { _, err := b.Lstat(ctx, "nope"); return err }(), syscall.ENOENT},
		{"open missing", func() error { _, err := b.Open(ctx, "nope", syscall.O_RDONLY, 0); return err }(), syscall.ENOENT},
		{"remove missing", b.Remove(ctx, "nope"), syscall.ENOENT},
		{"rmdir missing", b.Rmdir(ctx, "nope"), syscall.ENOENT},
		{"mkdir", b.Mkdir(ctx, "d", 0o755), 0},
		{"mkdir again", b.Mkdir(ctx, "d", 0o755), syscall.EEXIST},
		{"mkdir child", b.Mkdir(ctx, "d/e", 0o755), 0},
		{"rmdir non-empty", b.Rmdir(ctx, "d"), syscall.ENOTEMPTY},
		{"mkdir under missing", b.Mkdir(ctx, "x/y", 0o755), syscall.ENOENT},
	}
	for _, tt := range tests {
		if got := replay.Errno(tt.err); got != tt.want {
			t.Errorf("%s: errno %v, want %v", tt.name, got, tt.want)
		}
	}
}

// renameAndLinks: a renamed file leaves its old name; a symlink reads back.
func renameAndLinks(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	if !caps.Rename {
		t.Skip("backend cannot rename")
	}
	f, err := b.Open(ctx, "a", syscall.O_WRONLY|syscall.O_CREAT, 0o644)
	mustOK(t, err)
	mustOK(t, f.Close(ctx))
	mustOK(t, b.Rename(ctx, "a", "b", 0))
	if _, err := b.Lstat(ctx, "a"); replay.Errno(err) != syscall.ENOENT {
		t.Fatalf("old name after rename: %v", err)
	}
	if caps.Symlinks {
		mustOK(t, b.Symlink(ctx, "b", "l"))
		buf := make([]byte, 16)
		n, err := b.Readlink(ctx, "l", buf)
		if err != nil || string(buf[:n]) != "b" {
			t.Fatalf("readlink: %q %v", buf[:n], err)
		}
	}
}

// escapesRefused: names that leave the root are refused with ErrEscape.
func escapesRefused(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	for _, name := range []string{"../x", "/etc/passwd", "a/../../x"} {
		if _, err := b.Open(ctx, name, syscall.O_RDONLY, 0); !errors.Is(err, replay.ErrEscape) {
			t.Errorf("open %q: %v, want ErrEscape", name, err)
		}
	}
}

// locks: locks of different handles conflict.
func locks(t *testing.T, ctx context.Context, caps Caps, b replay.Backend) {
	if !caps.Locks {
		t.Skip("backend has no locks")
	}
	f1, err := b.Open(ctx, "lk", syscall.O_RDWR|syscall.O_CREAT, 0o644)
	mustOK(t, err)
	defer func() { _ = f1.Close(ctx) }()
	f2, err := b.Open(ctx, "lk", syscall.O_RDWR, 0)
	mustOK(t, err)
	defer func() { _ = f2.Close(ctx) }()
	mustOK(t, f1.Lock(ctx, replay.LockSet, syscall.F_WRLCK, 0, 10))
	if err := f2.Lock(ctx, replay.LockSet, syscall.F_WRLCK, 5, 1); replay.Errno(err) != syscall.EAGAIN {
		t.Fatalf("conflicting lock on another handle: %v, want EAGAIN", err)
	}
	mustOK(t, f1.Lock(ctx, replay.LockSet, syscall.F_UNLCK, 0, 10))
	mustOK(t, f2.Lock(ctx, replay.LockSet, syscall.F_WRLCK, 5, 1))
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
