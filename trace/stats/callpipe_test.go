package stats

import (
	"io"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/iotap/iotap/trace"
)

// TestCallPipeSameStats: the per-system-call view run in its own goroutine (callPipe)
// gives the same Stats as run inline, on recorded traces (names from the reader, as it
// advances) and on generated events over many batches.
func TestCallPipeSameStats(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // the pipe runs with 2 CPUs or more
	}
	files, err := filepath.Glob("../../testdata/report/*.iotap")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in testdata/report: %v", err)
	}
	files = append(files, "../../testdata/trace/v5-small.iotap")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			got := readStats(t, file, false)
			want := readStats(t, file, true)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("stats differ with the call view in its own goroutine:\n got  %+v\n want %+v", got.Calls, want.Calls)
			}
		})
	}
	t.Run("generated", func(t *testing.T) {
		evs := genEvents(10*callBatchLen+123, 17)
		var s [2]*Stats
		for i, inline := range []bool{false, true} {
			a := NewAccumulator("g", &trace.Header{}, Options{Names: pathNames{}, CallsAside: !inline})
			if (a.pipe != nil) == inline {
				t.Fatalf("inline %v: pipe %v", inline, a.pipe != nil)
			}
			for j := range evs {
				a.Add(&evs[j])
			}
			s[i] = a.Finish(nil, nil, nil)
		}
		if s[0].Calls[0].Count+s[0].Calls[4].Count == 0 || !reflect.DeepEqual(s[0], s[1]) {
			t.Errorf("stats differ with the call view in its own goroutine:\n got  %+v\n want %+v", s[0].Calls, s[1].Calls)
		}
	})
}

// readStats aggregates the trace file, with the call view inline or in its own goroutine.
func readStats(t *testing.T, file string, inline bool) *Stats {
	t.Helper()
	r, err := trace.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close() //nolint:errcheck // read only
	a := NewAccumulator(file, r.Header(), Options{Names: r, CallsAside: !inline})
	if r.Header().Kind != "replay" && (a.pipe != nil) == inline {
		t.Fatalf("inline %v: pipe %v", inline, a.pipe != nil)
	}
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(ev)
	}
	footer, _ := r.Footer()
	return a.Finish(r, footer, r.Damage())
}
