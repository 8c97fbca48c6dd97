//go:build linux

package trace

import (
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFailureClosesCleanly fills the trace's "disk" mid-run (RLIMIT_FSIZE: a write
// past the limit writes what fits, then fails with EFBIG, as a full file system writes what
// fits and fails with ENOSPC). The writer must cut the file back to the last whole chunk,
// drop the rest counting it as lost, and still close the trace with a footer that says so:
// the reader then finds no damage, every event the writer counted as written, and the loss.
//
// Not parallel: the limit is the process's.
func TestWriteFailureClosesCleanly(t *testing.T) {
	const limit = 96 << 10
	for _, tc := range []struct {
		name   string
		events int // appended with the limit in place; 0: 20,000 before it, in one chunk
		chunk  int
	}{
		{"mid-run", 40_000, 2048},
		{"at close", 0, 1 << 20}, // only the final flush fails
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "t.iotap")
			w, err := Create(path, testHeader(), WriterOptions{ChunkEvents: tc.chunk, FlushInterval: 1 << 40})
			if err != nil {
				t.Fatal(err)
			}
			appended := 0
			emit := func(e *Event) {
				if tc.events == 0 || appended < tc.events {
					w.Append(e)
					appended++
				}
			}
			mix := newMix(3, w.Path, emit)
			if tc.events == 0 {
				mix.run(20_000)
			}
			withFileSizeLimit(t, limit, func() {
				if tc.events > 0 {
					mix.run(tc.events)
				}
				err = w.Close()
			})
			if !errors.Is(err, syscall.EFBIG) {
				t.Fatalf("Close: %v, want the write's EFBIG", err)
			}
			st := w.Stats()
			if st.Lost == 0 || st.Lost != st.Dropped || st.Written+st.Lost != uint64(appended) {
				t.Fatalf("stats %+v for %d appended: want written + lost = appended, lost = dropped", st, appended)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > limit {
				t.Fatalf("file is %d bytes, over the limit", fi.Size())
			}

			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.Close() }()
			evs := readAll(t, r)
			n := uint64(len(evs))
			ops := map[Op]uint64{}
			for i := range evs {
				ops[evs[i].Op]++
			}
			if d := r.Damage(); len(d) != 0 {
				t.Fatalf("damage: %v", d)
			}
			f, ok := r.Footer()
			if !ok {
				t.Fatal("no footer")
			}
			if n != st.Written || f.Events != n || f.Lost != st.Lost || f.Dropped != st.Dropped {
				t.Errorf("read %d events; footer events %d lost %d dropped %d; writer %+v", n, f.Events, f.Lost, f.Dropped, st)
			}
			if !strings.Contains(f.WriteError, "file too large") {
				t.Errorf("footer WriteError %q", f.WriteError)
			}
			for op, c := range f.OpCounts {
				if ops[Op(op)] != c {
					t.Errorf("footer counts %d %v events, the trace holds %d", c, Op(op), ops[Op(op)])
				}
			}
		})
	}
}

// withFileSizeLimit runs f with the process's file size limit at limit bytes (SIGXFSZ
// ignored, so that a write past it fails with EFBIG instead of killing the process).
func withFileSizeLimit(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	if old.Max < limit {
		t.Skipf("file size limit %d is below %d", old.Max, limit)
	}
	signal.Ignore(syscall.SIGXFSZ)
	defer signal.Reset(syscall.SIGXFSZ)
	lim := syscall.Rlimit{Cur: limit, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	f()
}
