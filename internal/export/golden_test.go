package export

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// goldenTraces are the traces whose exports testdata/rows.sha256 holds: recorded jobs, a
// replay, traces of every format version, one with names of odd bytes and labels, and one
// long enough for many Parquet pages.
func goldenTraces(t *testing.T) map[string]string {
	t.Helper()
	traces := map[string]string{"odd": writeOddTrace(t)}
	for _, p := range []string{"report/node1", "report/s3fs", "report/replay", "trace/v1-small", "trace/v3-small", "trace/v5-small"} {
		traces[p] = filepath.Join("..", "..", "testdata", filepath.FromSlash(p)+".iotap")
	}
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "record", Hostname: "n1", Target: trace.Target{Path: "/t"},
		Labels:    []trace.Label{{Key: "SLURM_JOB_ID", Value: "9"}, {Key: "SLURM_STEP_ID", Value: "0"}},
		WallStart: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Origin: 1})
	tracetest.Workload(b, 3000)
	long := filepath.Join(t.TempDir(), "long.iotap")
	if err := os.WriteFile(long, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	traces["long"] = long
	return traces
}

// TestRowsGolden: every view of the golden traces exports in JSON lines, CSV and Parquet to
// the bytes whose SHA-256 testdata/rows.sha256 holds (go test -update rewrites it), so a
// change of how rows are written changes no byte of an export.
func TestRowsGolden(t *testing.T) {
	// The traces written here come out with their events in another order under
	// GOMAXPROCS=1 (the writer's goroutines): the digests are of two.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	file := filepath.Join("testdata", "rows.sha256")
	var lines []string
	for name, path := range goldenTraces(t) {
		names, _ := Views()
		for _, view := range names {
			for _, format := range []string{"jsonl", "csv", "parquet"} {
				r, err := trace.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.New()
				if _, err := Write(context.Background(), r, sum, Options{Format: format, View: view}); err != nil {
					t.Fatalf("%s %s %s: %v", name, view, format, err)
				}
				_ = r.Close() // read-only
				lines = append(lines, fmt.Sprintf("%s %s %s %s", name, view, format, hex.EncodeToString(sum.Sum(nil))))
			}
		}
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // read-only
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if i := strings.LastIndexByte(sc.Text(), ' '); i > 0 {
			want[sc.Text()[:i]] = sc.Text()[i+1:]
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		i := strings.LastIndexByte(l, ' ')
		if w, ok := want[l[:i]]; !ok || w != l[i+1:] {
			t.Errorf("%s: SHA-256 %s, want %q", l[:i], l[i+1:], w)
		}
	}
	if len(want) != len(lines) {
		t.Errorf("%s holds %d exports, the test makes %d", file, len(want), len(lines))
	}
}

// failAfter is a writer that takes n bytes, then fails.
type failAfter struct{ n int }

var errFull = errors.New("device full")

func (f *failAfter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		n := f.n
		f.n = 0
		return n, errFull
	}
	f.n -= len(b)
	return len(b), nil
}

// TestRowsWriteFails: an output that fails, at the start, in the middle or at the end of an
// export, fails the export with its error, in every row format, whether the Parquet writer
// fails while the rows are made or at its Close.
func TestRowsWriteFails(t *testing.T) {
	path := goldenTraces(t)["long"]
	for _, format := range []string{"jsonl", "csv", "parquet"} {
		r, err := trace.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var size countWriter
		if _, err := Write(context.Background(), r, &size, Options{Format: format}); err != nil {
			t.Fatal(err)
		}
		_ = r.Close() // read-only
		for _, n := range []int{0, int(size) / 2, int(size) - 1} {
			r, err := trace.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Write(context.Background(), r, &failAfter{n}, Options{Format: format}); !errors.Is(err, errFull) {
				t.Errorf("%s, output failing after %d of %d bytes: %v, want %v", format, n, size, err, errFull)
			}
			_ = r.Close() // read-only
		}
	}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) {
	*c += countWriter(len(b))
	return len(b), nil
}

// TestParquetFailsWhileWriting: when the output fails as a row group is written (by the
// goroutine that writes batches while the next rows are made), the next writes of rows
// fail with its error, and so does Close.
func TestParquetFailsWhileWriting(t *testing.T) {
	rw, err := newParquet(&failAfter{0}, Table{View: "test", Columns: []Column{{Name: "n", Type: Int}, {Name: "p", Type: Name, Nullable: true}}})
	if err != nil {
		t.Fatal(err)
	}
	row := []Value{{Int: 7}, {Str: "a/b"}}
	var werr error
	n := 0
	for ; n < 2*ParquetRowGroupRows && werr == nil; n++ {
		row[0].Int = row[0].Int*6364136223846793005 + 1442695040888963407 // pages that do not compress to nothing
		werr = rw.Write(row)
	}
	if !errors.Is(werr, errFull) {
		t.Errorf("%d rows written: %v, want %v", n, werr, errFull)
	}
	if err := rw.Close(); !errors.Is(err, errFull) {
		t.Errorf("Close: %v, want %v", err, errFull)
	}
}
