package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/replay/campaign"
	"github.com/iotap/iotap/report"
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
	t.Setenv("SLURM_JOB_ID", "7")
	t.Setenv("SLURM_STEP_ID", "0")
	tests := []struct {
		name, procid, ntasks, output string
		others                       int      // other tasks that reach the barrier
		want                         []string // "prepare trace -> target output" in call order
	}{
		{"one trace each", "1", "3", "", 2, []string{
			"only n2-1.iotap -> cand/n2-1 ", "skip n2-1.iotap -> cand/n2-1 "}},
		{"two for task 0, into a directory", "0", "2", "res", 1, []string{
			"only n1-0.iotap -> cand/n1-0 res/n1-0", "only n3-2.iotap -> cand/n3-2 res/n3-2",
			"skip n1-0.iotap -> cand/n1-0 res/n1-0", "skip n3-2.iotap -> cand/n3-2 res/n3-2"}},
		{"idle task", "3", "4", "res", 3, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SLURM_PROCID", tc.procid)
			t.Setenv("SLURM_NTASKS", tc.ntasks)
			base := t.TempDir()
			o := &replayOptions{Shard: "auto", Spec: campaign.Spec{Prepare: "auto", Targets: []string{filepath.Join(base, "cand")}}}
			if tc.output != "" {
				o.Output = filepath.Join(base, tc.output)
			}
			// The other tasks of the step have already reached the barrier.
			bdir := o.Output
			if bdir == "" {
				bdir = dir
			}
			bd := filepath.Join(bdir, "iotap-barrier.7.0")
			if err := os.MkdirAll(bd, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(bd) })
			for k := 0; k < tc.others; k++ {
				if err := os.WriteFile(filepath.Join(bd, "other"+strconv.Itoa(k)), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stdout bytes.Buffer
			var got []string
			err := replayShard(context.Background(), &env{stdout: &stdout}, o, []string{dir}, func(one *replayOptions, tr string) error {
				if one.Shard != "" || len(one.Targets) != 1 {
					t.Errorf("replayOne got shard %q, targets %q", one.Shard, one.Targets)
				}
				if st, err := os.Stat(one.Targets[0]); err != nil || !st.IsDir() {
					t.Errorf("target %s not created: %v", one.Targets[0], err)
				}
				rel := func(p string) string { return strings.TrimPrefix(p, base+"/") }
				got = append(got, one.Prepare+" "+filepath.Base(tr)+" -> "+rel(one.Targets[0])+" "+rel(one.Output))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("replayed\n%q\nwant\n%q", got, tc.want)
			}
			if tc.want == nil && !strings.Contains(stdout.String(), "no trace to replay") {
				t.Errorf("idle task said %q", stdout.String())
			}
			if _, err := os.Stat(filepath.Join(bd, tc.procid)); err != nil {
				t.Errorf("task did not reach the barrier: %v", err)
			}
		})
	}
	// A task whose peers never arrive gives up with an error, not a hang.
	t.Setenv("SLURM_PROCID", "0")
	t.Setenv("SLURM_NTASKS", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	o := &replayOptions{Shard: "auto", Spec: campaign.Spec{Prepare: "auto", Targets: []string{t.TempDir()}, Output: t.TempDir()}}
	err := replayShard(ctx, &env{stdout: io.Discard}, o, []string{filepath.Join(dir, "n1-0.iotap")}, func(*replayOptions, string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "wait for the other tasks") {
		t.Errorf("barrier without peers: %v", err)
	}
	if err := replayShard(ctx, &env{stdout: io.Discard}, &replayOptions{Spec: campaign.Spec{Targets: []string{"a", "b"}}}, []string{dir}, nil); err == nil {
		t.Error("two targets accepted with --shard auto")
	}
}
