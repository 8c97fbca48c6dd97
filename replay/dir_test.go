package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// TestDirConfinement tries to leave the root by every route a trace could take and
// checks that each is refused and that nothing outside the root changed. The routes are
// one list on purpose: they share the planted symlinks and the final check of outside.
func TestDirConfinement(t *testing.T) {
	ctx := context.Background()
	root, d := target(t, "")
	outside := filepath.Dir(root)
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Symlinks planted inside the root that point out of it.
	must(t, os.Symlink("..", filepath.Join(root, "up")))
	must(t, os.Symlink(outside, filepath.Join(root, "abs")))
	must(t, os.Symlink("../secret", filepath.Join(root, "leak")))
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	must(t, os.Symlink("../sub", filepath.Join(root, "sub", "back"))) // stays inside: allowed

	// The same attempts through a view that starts walks below the root (see Walker).
	view := d.From("sub").(*Dir)
	for _, n := range []string{"sub/back/../../secret", "sub/back/up"} {
		if _, err := view.Open(ctx, n, unix.O_RDONLY, 0); err == nil {
			t.Fatalf("view: open %q succeeded", n)
		}
	}
	if err := view.Mkdir(ctx, "up/x", 0o755); err == nil {
		t.Fatal("view: mkdir through a symlink out of the root succeeded")
	}
	must(t, os.Symlink("../..", filepath.Join(root, "sub", "esc")))
	for _, n := range []string{"sub/esc/x", "sub/esc/secret"} {
		if err := view.Mkdir(ctx, n, 0o755); !errors.Is(err, ErrEscape) {
			t.Fatalf("view: mkdir %q: %v, want ErrEscape", n, err)
		}
		if _, err := view.Lstat(ctx, n); !errors.Is(err, ErrEscape) {
			t.Fatalf("view: lstat %q: %v, want ErrEscape", n, err)
		}
	}
	tests := []struct {
		name string
		do   func() error
	}{
		{"open dotdot", func() error { _, err := d.Open(ctx, "../secret", unix.O_RDONLY, 0); return err }},
		{"open absolute", func() error { _, err := d.Open(ctx, "/etc/passwd", unix.O_RDONLY, 0); return err }},
		{"open through symlink dir", func() error { _, err := d.Open(ctx, "up/secret", unix.O_RDONLY, 0); return err }},
		{"open through absolute symlink", func() error { _, err := d.Open(ctx, "abs/secret", unix.O_RDONLY, 0); return err }},
		{"open final symlink out", func() error { _, err := d.Open(ctx, "leak", unix.O_RDONLY, 0); return err }},
		{"write final symlink out", func() error { _, err := d.Open(ctx, "leak", unix.O_WRONLY|unix.O_TRUNC, 0); return err }},
		{"create through symlink dir", func() error {
			_, err := d.Open(ctx, "up/new", unix.O_WRONLY|unix.O_CREAT, 0o644)
			return err
		}},
		{"mkdir through symlink", func() error { return d.Mkdir(ctx, "abs/newdir", 0o755) }},
		{"unlink through symlink", func() error { return d.Remove(ctx, "up/secret") }},
		{"rename out", func() error { return d.Rename(ctx, "sub", "up/stolen", 0) }},
		{"rename in", func() error { return d.Rename(ctx, "up/secret", "sub/x", 0) }},
		{"link out", func() error { return d.Link(ctx, "up/secret", "sub/hard") }},
		{"truncate through symlink", func() error { return d.Truncate(ctx, "leak", 0) }},
		{"truncate through dir symlink", func() error { return d.Truncate(ctx, "up/secret", 0) }},
		{"chmod through symlink", func() error { return d.Chmod(ctx, "up/secret", 0o600) }},
		{"lstat dotdot", func() error { _, err := d.Lstat(ctx, ".."); return err }},
		{"lstat through symlink", func() error { _, err := d.Lstat(ctx, "abs/secret"); return err }},
		{"readlink through symlink", func() error { _, err := d.Readlink(ctx, "up/leak", make([]byte, 64)); return err }},
		{"setxattr through symlink", func() error { return d.Setxattr(ctx, "up/secret", "user.x", []byte("v"), 0) }},
		{"utimes through symlink", func() error { return d.Utimes(ctx, "up/secret") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil {
				t.Fatal("escape attempt succeeded")
			}
			if !errors.Is(err, ErrEscape) {
				t.Logf("refused with %v (not ErrEscape)", err)
			}
		})
	}
	// Chmod of a symlink itself is refused like lchmod, never applied to its target.
	if err := d.Chmod(ctx, "leak", 0o600); err == nil {
		t.Fatal("chmod of a symlink succeeded")
	}
	b, err := os.ReadFile(secret)
	if err != nil || string(b) != "keep" {
		t.Fatalf("outside file changed: %q %v", b, err)
	}
	if fi, _ := os.Stat(secret); fi.Mode().Perm() != 0o644 {
		t.Fatalf("outside file mode changed: %v", fi.Mode())
	}
	for _, n := range []string{"new", "newdir", "stolen"} {
		if _, err := os.Lstat(filepath.Join(outside, n)); err == nil {
			t.Fatalf("%s created outside the root", n)
		}
	}
	// Symlinks that stay inside the root still work.
	f, err := d.Open(ctx, "sub/back/../back", unix.O_RDONLY, 0)
	if err == nil {
		_ = f.Close(ctx)
		t.Fatal("dotdot component accepted")
	}
	must(t, os.WriteFile(filepath.Join(root, "sub", "in"), []byte("x"), 0o644))
	f, err = d.Open(ctx, "sub/back/in", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("in-root symlink refused: %v", err)
	}
	_ = f.Close(ctx)
}

// TestReplayRefusesEscapingPaths replays a trace whose path table names things outside
// the root: the ops are refused and counted, nothing outside is touched.
func TestReplayRefusesEscapingPaths(t *testing.T) {
	b := tracetest.New(t)
	root, d := target(t, "")
	outside := filepath.Dir(root)
	// A raw path record ".." under the root, and a name with a slash in it.
	up := b.W.Path(trace.RootPath, "..")
	abs := b.W.Path(trace.RootPath, "/tmp")
	b.Ev(1, trace.OpMkdir, "-", 1000, 1000, func(e *trace.Event) { e.Path = b.W.Path(up, "evil"); e.Mode = 0o755 })
	b.Ev(1, trace.OpMkdir, "-", 1000, 1000, func(e *trace.Event) { e.Path = b.W.Path(abs, "evil2"); e.Mode = 0o755 })
	b.Ev(1, trace.OpMkdir, "ok", 1000, 1000, func(e *trace.Event) { e.Mode = 0o755 })
	data := b.Bytes()
	sum := replayOnto(t, data, d, nil, Options{Timing: TimingAFAP})
	if sum.Escapes != 2 {
		t.Fatalf("escapes = %d, want 2", sum.Escapes)
	}
	if _, err := os.Stat(filepath.Join(outside, "evil")); err == nil {
		t.Fatal("created outside the root")
	}
	if _, err := os.Stat(filepath.Join(root, "ok")); err != nil {
		t.Fatal(err)
	}
	if sum.Divergences != 0 {
		t.Fatalf("divergences: %v", sum.Examples)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
