package private

import (
	"os"
	"path/filepath"
	"testing"
)

// TestModes: new and existing regular files end up 0600; other files keep their mode.
func TestModes(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.WriteFile(old, []byte("readable by all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{old, filepath.Join(dir, "new")} {
		if err := WriteFile(p, []byte("x")); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != Mode {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), Mode)
		}
		if b, _ := os.ReadFile(p); string(b) != "x" {
			t.Errorf("%s holds %q", p, b)
		}
	}
	before, err := os.Stat(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(os.DevNull, os.O_WRONLY)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if after, _ := os.Stat(os.DevNull); after.Mode() != before.Mode() {
		t.Errorf("%s: mode changed from %v to %v", os.DevNull, before.Mode(), after.Mode())
	}
}
