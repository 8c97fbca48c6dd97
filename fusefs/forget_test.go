package fusefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// churnWorkload names new files without end (IOTAP_CHURN_FILES of them, each created,
// written, stat'd and unlinked) while it holds a file open in keep/, then renames that file
// and writes through the descriptor it held. Then it names old paths again, whose nodes the
// kernel dropped (drop_caches) before the churn: a file it made (stay), a file that was
// there before (pre), a name it unlinked long ago (tmp/f1), and a name that no longer
// exists (tmp/f0).
func churnWorkload(dir string) error {
	n, _ := strconv.Atoi(os.Getenv("IOTAP_CHURN_FILES"))
	if err := os.Mkdir(filepath.Join(dir, "keep"), 0o755); err != nil {
		return err
	}
	long, err := os.OpenFile(filepath.Join(dir, "keep", "long"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if _, err := long.Write([]byte("first")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "stay"), []byte("made by the job"), 0o644); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "pre")); err != nil {
		return err
	}
	// Forget the nodes of stay and pre: the path index may forget their paths.
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	// IOTAP_CHURN_THREADS threads name new files at once, so that compactions run while
	// other requests intern paths.
	threads, _ := strconv.Atoi(os.Getenv("IOTAP_CHURN_THREADS"))
	errs := make(chan error, max(threads, 1))
	for t := range max(threads, 1) {
		go func() {
			for i := t; i < n; i += max(threads, 1) {
				p := filepath.Join(dir, "tmp", fmt.Sprint("f", i))
				if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
					errs <- err
					return
				}
				if _, err := os.Stat(p); err != nil {
					errs <- err
					return
				}
				if err := os.Remove(p); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range max(threads, 1) {
		if err := <-errs; err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(dir, "keep", "long"), filepath.Join(dir, "keep", "renamed")); err != nil {
		return err
	}
	if _, err := long.WriteAt([]byte("second"), 100); err != nil {
		return err
	}
	if err := long.Close(); err != nil {
		return err
	}
	for _, name := range []string{"stay", "pre", "keep/renamed"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp", "f0")); !os.IsNotExist(err) {
		return fmt.Errorf("stat tmp/f0: %v", err)
	}
	return os.WriteFile(filepath.Join(dir, "tmp", "f1"), []byte("again"), 0o644)
}

// TestBoundedPathIndex runs churnWorkload through a trace writer whose path index is
// compacted every few hundred new names. The index must stay at its limit, forget ids, and
// the trace must read back as if it had not: one id per path, the renamed file's later
// write under its new name, file records only for what was there before the job.
// With an exclude pattern, the path filter's memory is bounded alike and its decisions
// hold across compactions.
func TestBoundedPathIndex(t *testing.T) {
	testenv.Root(t, testenv.FUSE, "the workload drops the kernel's caches")
	t.Run("all", func(t *testing.T) {
		boundedPathIndex(t, fusefs.Options{}, []string{"stay", "pre", "tmp/f0", "tmp/f1", "keep/renamed"})
	})
	t.Run("exclude", func(t *testing.T) {
		boundedPathIndex(t, fusefs.Options{Exclude: []string{"tmp"}}, []string{"stay", "pre", "keep/renamed"})
	})
	t.Run("threads", func(t *testing.T) {
		boundedPathIndex(t, fusefs.Options{}, []string{"stay", "pre", "tmp/f0", "tmp/f1", "keep/renamed"},
			"IOTAP_CHURN_THREADS=4")
	})
}

func boundedPathIndex(t *testing.T, o fusefs.Options, want []string, env ...string) {
	file := filepath.Join(t.TempDir(), "churn.trace")
	w, err := trace.Create(file, trace.Header{Kind: "record", FUSE: o.TraceOptions()},
		trace.WriterOptions{PathIndexSlots: 1024})
	if err != nil {
		t.Fatal(err)
	}
	c := fusetest.Mount(t, w, o)
	if err := os.WriteFile(filepath.Join(c.Orig, "pre"), []byte("before the job"), 0o644); err != nil {
		t.Fatal(err)
	}
	const files = 3000 // about 4 names each (f, a negative lookup's, …): some 15 compactions
	runWorkload(t, "churn", c.Mnt, append(env, "IOTAP_CHURN_FILES="+strconv.Itoa(files))...)
	if err := c.Server.Unmount(); err != nil {
		t.Fatal(err)
	}
	c.Server.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	t.Logf("path index: %d compactions, %d ids forgotten, %d slots", st.PathCompactions, st.PathsForgotten, st.PathIndexSlots)
	if st.PathCompactions < 2 || st.PathsForgotten < files/2 || st.PathIndexSlots != 1024 {
		t.Errorf("path index: %d compactions, %d ids forgotten, %d slots: want several, over %d, 1024",
			st.PathCompactions, st.PathsForgotten, st.PathIndexSlots, files/2)
	}

	r, evs := readTraceFile(t, file)
	ids := map[string]map[uint32]bool{} // path → ids events name it by
	var sawRename, sawWrite bool
	for _, e := range evs {
		if e.Path == 0 {
			continue
		}
		name := r.PathName(e.Path)
		if strings.HasPrefix(name, "?") {
			t.Fatalf("event %v names unknown path id %d", e.Op, e.Path)
		}
		if len(o.Exclude) > 0 && strings.HasPrefix(name, "tmp") {
			t.Fatalf("event %v on excluded %s recorded", e.Op, name)
		}
		if ids[name] == nil {
			ids[name] = map[uint32]bool{}
		}
		ids[name][e.Path] = true
		switch {
		case e.Op == trace.OpRename:
			sawRename = name == "keep/long" && r.PathName(e.Path2) == "keep/renamed"
		case e.Op == trace.OpWrite && e.Offset == 100:
			sawWrite = true
			if name != "keep/renamed" {
				t.Errorf("the write after the rename is on %q, want keep/renamed", name)
			}
		}
	}
	if !sawRename || !sawWrite {
		t.Errorf("rename keep/long → keep/renamed seen %v, write at 100 seen %v", sawRename, sawWrite)
	}
	for name, set := range ids {
		if len(set) != 1 {
			t.Errorf("path %s is named by %d ids in the events: %v", name, len(set), set)
		}
	}
	for _, name := range want {
		if len(ids[name]) == 0 {
			t.Errorf("no event names %s", name)
		}
	}
	var filed []string
	for _, f := range r.Files() {
		filed = append(filed, r.PathName(f.Path))
	}
	if len(filed) != 1 || filed[0] != "pre" {
		t.Errorf("file records for %v, want only pre (the job made the others)", filed)
	}
}
