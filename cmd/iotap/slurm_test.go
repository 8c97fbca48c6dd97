package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/report"
)

func TestWriteStragglers(t *testing.T) {
	view := func(name string, totalNs int64) *report.View {
		return &report.View{Name: name, TotalNs: totalNs, DurationNs: 1e9,
			Ops: []*report.OpRow{{Op: "read", Latency: report.Latency{Count: 1000, P99: 1e6}}}}
	}
	var b bytes.Buffer
	if err := writeStragglers(&b, []*report.View{view("host=n1", 1e9), view("host=n2", 4e9)}); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "straggler: host=n2: I/O time 4s is 4.0x the other nodes' median 1s\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	b.Reset()
	if err := writeStragglers(&b, []*report.View{view("host=n1", 1e9)}); err != nil || b.Len() != 0 {
		t.Errorf("one view: %q, %v", b.String(), err)
	}
}

func TestShardTraces(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"n1-0.iotap", "n2-1.iotap", "n10-2.iotap"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS"} {
		t.Setenv(k, "")
	}
	if _, _, err := shardTraces([]string{dir}); err == nil || !strings.Contains(err.Error(), "not running in a Slurm job step") {
		t.Fatalf("outside a step: %v", err)
	}
	t.Setenv("SLURM_PROCID", "1")
	t.Setenv("SLURM_NTASKS", "2")
	got, task, err := shardTraces([]string{dir})
	if err != nil || task.ProcID != 1 || len(got) != 1 || filepath.Base(got[0]) != "n2-1.iotap" {
		t.Fatalf("task 1 of 2: %q, %+v, %v", got, task, err)
	}
}
