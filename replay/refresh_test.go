package replay

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/iotap/iotap/trace"
)

// TestRefreshTarget runs over a directory what a later run of a cold/warm pair does to
// the store: the starting state is restored, what the run made or changed is removed or
// made again, and what it left as it was keeps its inode (a client's cache of it stays
// valid).
func TestRefreshTarget(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Close() }()
	st := &State{Entries: []Entry{
		{Name: "in", Type: trace.TypeDir},
		{Name: "in/a.bam", Type: trace.TypeFile, Size: 3 << 20},
		{Name: "in/b.bai", Type: trace.TypeFile, Size: 100},
		{Name: "in/c.txt", Type: trace.TypeFile, Size: 10},
		{Name: "ref", Type: trace.TypeSymlink, Target: "in/a.bam"},
	}}
	if err := PrepareTarget(ctx, d, st, false); err != nil {
		t.Fatal(err)
	}
	ino := func(name string) uint64 {
		var s syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(root, name), &s); err != nil {
			t.Fatal(err)
		}
		return s.Ino
	}
	keep := ino("in/a.bam")
	// What a run leaves: outputs, a tree, a starting file rewritten shorter, one removed.
	for _, dir := range []string{"out", "out/tmp"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, size := range map[string]int{"out/sorted.bam": 5, "out/tmp/x": 1, "in/b.bai": 50} {
		if err := os.WriteFile(filepath.Join(root, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(root, "in/c.txt")); err != nil {
		t.Fatal(err)
	}
	rs, err := RefreshTarget(ctx, d, st, false)
	if err != nil {
		t.Fatal(err)
	}
	if rs != (RefreshStats{Kept: 3, Made: 2, Removed: 2}) {
		t.Errorf("refresh %+v, want 3 kept (in, in/a.bam, ref), 2 made (in/b.bai, in/c.txt), 2 removed (out, in/b.bai)", rs)
	}
	if ino("in/a.bam") != keep {
		t.Error("an unchanged starting file was made again")
	}
	var got []string
	err = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if fi.Mode().IsRegular() {
			rel += "=" + itoa(fi.Size())
		}
		got = append(got, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"in", "in/a.bam=3145728", "in/b.bai=100", "in/c.txt=10", "ref"}
	if !slices.Equal(got, want) {
		t.Errorf("after refresh %v, want %v", got, want)
	}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
