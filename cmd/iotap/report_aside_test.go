package main

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/iotap/iotap/trace/tracetest"
)

// TestReportSameWithCPUs: report prints the same with one CPU, where a trace is read,
// aggregated and folded into calls in one goroutine, and with two, where the next chunk
// is decoded (trace.ReadAhead) and the calls folded (stats.Options.CallsAside) beside the
// aggregation: in every format, on a workload of many chunks whose path records come
// between its events, and on the recorded traces of testdata.
func TestReportSameWithCPUs(t *testing.T) {
	b := tracetest.NewFUSE(t)
	tracetest.Workload(b, 3000)
	big := filepath.Join(t.TempDir(), "workload.iotap")
	if err := os.WriteFile(big, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../../testdata/report/*.iotap")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces in testdata/report: %v", err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, file := range append([]string{big}, files...) {
		for _, format := range []string{"text", "json", "html", "csv"} {
			t.Run(filepath.Base(file)+"/"+format, func(t *testing.T) {
				var out [2]string
				for i, cpus := range []int{1, 2} {
					runtime.GOMAXPROCS(cpus)
					code, stdout, stderr := runIotap(t, nil, "report", "--format", format, file)
					if code != 0 {
						t.Fatalf("%d CPUs: exit %d: %s", cpus, code, stderr)
					}
					out[i] = stdout
				}
				if out[0] != out[1] {
					t.Errorf("report differs with 2 CPUs:\n%s\n--- with 1 CPU:\n%s", out[1], out[0])
				}
			})
		}
	}
}
