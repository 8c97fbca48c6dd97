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

func TestReplayShard(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"n1-0.iotap", "n2-1.iotap", "n3-2.iotap"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SLURMD_NODENAME", "n1")
	tests := []struct {
		name, procid, ntasks, output string
		want                         []string // "trace -> output"
	}{
		{"one trace each", "1", "3", "", []string{"n2-1.iotap -> "}},
		{"two for task 0, into a directory", "0", "2", "res", []string{"n1-0.iotap -> res/n1-0", "n3-2.iotap -> res/n3-2"}},
		{"idle task", "3", "4", "res", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SLURM_PROCID", tc.procid)
			t.Setenv("SLURM_NTASKS", tc.ntasks)
			out := filepath.Join(t.TempDir(), tc.output)
			if tc.output == "" {
				out = ""
			}
			var stdout bytes.Buffer
			var got []string
			err := replayShard(&env{stdout: &stdout}, []string{dir}, out, func(tr, o string) error {
				if out != "" {
					o = strings.Replace(o, filepath.Dir(out)+"/", "", 1)
				}
				got = append(got, filepath.Base(tr)+" -> "+o)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("replayed %q, want %q", got, tc.want)
			}
			if tc.want == nil && !strings.Contains(stdout.String(), "no trace to replay") {
				t.Errorf("idle task said %q", stdout.String())
			}
		})
	}
}
