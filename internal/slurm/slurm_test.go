package slurm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestShard(t *testing.T) {
	traces := []string{"t/n10-9.iotap", "t/n2-1.iotap", "t/n1-0.iotap", "t/n3-2.iotap"}
	tests := []struct {
		name           string
		traces         []string
		procID, nTasks int
		want           []string
	}{
		{"as many tasks as traces, first", traces, 0, 4, []string{"t/n1-0.iotap"}},
		{"as many tasks as traces, natural order", traces, 3, 4, []string{"t/n10-9.iotap"}},
		{"fewer tasks: round robin", traces, 0, 3, []string{"t/n1-0.iotap", "t/n10-9.iotap"}},
		{"fewer tasks: second task", traces, 1, 3, []string{"t/n2-1.iotap"}},
		{"one task takes all", traces, 0, 1, []string{"t/n1-0.iotap", "t/n2-1.iotap", "t/n3-2.iotap", "t/n10-9.iotap"}},
		{"more tasks than traces: idle task", traces, 5, 6, nil},
		{"procid out of range", traces, 4, 4, nil},
		{"negative procid", traces, -1, 4, nil},
		{"no tasks", traces, 0, 0, nil},
		{"no traces", nil, 0, 2, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]string(nil), tc.traces...)
			got := Shard(in, tc.procID, tc.nTasks)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Shard(%d of %d) = %q, want %q", tc.procID, tc.nTasks, got, tc.want)
			}
			if !reflect.DeepEqual(in, tc.traces) {
				t.Errorf("Shard modified its input: %q", in)
			}
		})
	}
}

func TestShardCoversEveryTraceOnce(t *testing.T) {
	for m := 0; m < 9; m++ {
		for n := 1; n < 9; n++ {
			var traces []string
			for k := 0; k < m; k++ {
				traces = append(traces, fmt.Sprintf("n%d-%d.iotap", k+1, k))
			}
			seen := map[string]int{}
			for p := 0; p < n; p++ {
				for _, tr := range Shard(traces, p, n) {
					seen[tr]++
				}
			}
			if len(seen) != m {
				t.Fatalf("%d traces, %d tasks: %d assigned", m, n, len(seen))
			}
			for tr, c := range seen {
				if c != 1 {
					t.Fatalf("%d traces, %d tasks: %s assigned %d times", m, n, tr, c)
				}
			}
		}
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"numbers compare as numbers", "n2", "n10", true},
		{"reverse", "n10", "n2", false},
		{"second number", "n1-9", "n1-10", true},
		{"plain bytes", "a", "b", true},
		{"prefix is less", "n1", "n1-0", true},
		{"equal", "n1", "n1", false},
		{"leading zeros equal value", "n01", "n1", true},
		{"leading zeros reverse", "n1", "n01", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NaturalLess(tc.a, tc.b); got != tc.want {
				t.Errorf("NaturalLess(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestTaskFromEnv(t *testing.T) {
	full := map[string]string{"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0", "SLURM_PROCID": "1", "SLURM_NTASKS": "2",
		"SLURM_NODEID": "1", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "n2"}
	task, err := TaskFromEnv(env(full))
	want := Task{JobID: "12", StepID: "0", ProcID: 1, NTasks: 2, NodeID: 1, NodeName: "n2"}
	if err != nil || task != want {
		t.Fatalf("TaskFromEnv = %+v, %v; want %+v", task, err, want)
	}
	if _, err := TaskFromEnv(env(nil)); !errors.Is(err, ErrNotInStep) {
		t.Errorf("outside a step: err = %v, want ErrNotInStep", err)
	}
	if task, err := TaskFromEnv(env(map[string]string{"SLURM_PROCID": "0", "SLURM_NPROCS": "3"})); err != nil || task.NTasks != 3 {
		t.Errorf("SLURM_NPROCS fallback: %+v, %v", task, err)
	}
	for _, bad := range []map[string]string{
		{"SLURM_PROCID": "x", "SLURM_NTASKS": "2"},
		{"SLURM_PROCID": "2", "SLURM_NTASKS": "2"},
		{"SLURM_PROCID": "0"},
		{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NODEID": "-1"},
	} {
		if _, err := TaskFromEnv(env(bad)); err == nil || errors.Is(err, ErrNotInStep) {
			t.Errorf("TaskFromEnv(%v) = %v, want a range/number error", bad, err)
		}
	}
}

func node(name string, io, wall time.Duration, ops ...OpLatency) NodeStat {
	return NodeStat{Name: name, IOTime: io, Wall: wall, Ops: ops}
}

func TestStragglers(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		nodes []NodeStat
		want  []string // "node metric"
	}{
		{"one node: nothing to compare", []NodeStat{node("n1", 10*time.Second, time.Second)}, nil},
		{"even nodes", []NodeStat{node("n1", 2*time.Second, 3*time.Second), node("n2", 2100*ms, 3100*ms)}, nil},
		{"two nodes, slow one named", []NodeStat{node("n1", 2*time.Second, 3*time.Second), node("n2", 5*time.Second, 3*time.Second)},
			[]string{"n2 I/O time"}},
		{"wall time", []NodeStat{node("n1", time.Second, 2*time.Second), node("n2", time.Second, 2*time.Second), node("n3", time.Second, 9*time.Second)},
			[]string{"n3 wall time"}},
		{"tiny job under the floor", []NodeStat{node("n1", 2*ms, 3*ms), node("n2", 50*ms, 60*ms)}, nil},
		{"one slow among four: median of the others", []NodeStat{
			node("n1", time.Second, 0), node("n2", 1100*ms, 0), node("n3", 900*ms, 0), node("n4", 4*time.Second, 0)},
			[]string{"n4 I/O time"}},
		{"p99 of one op", []NodeStat{
			node("n1", time.Second, time.Second, OpLatency{"read", 1000, 2 * ms}, OpLatency{"write", 500, ms}),
			node("n2", time.Second, time.Second, OpLatency{"read", 1000, 9 * ms}, OpLatency{"write", 500, ms})},
			[]string{"n2 read p99"}},
		{"p99 with too few calls", []NodeStat{
			node("n1", time.Second, time.Second, OpLatency{"read", 1000, 2 * ms}),
			node("n2", time.Second, time.Second, OpLatency{"read", 10, 90 * ms})}, nil},
		{"p99 of an op no other node has", []NodeStat{
			node("n1", time.Second, time.Second, OpLatency{"read", 1000, 2 * ms}),
			node("n2", time.Second, time.Second, OpLatency{"mkdir", 1000, 90 * ms})}, nil},
		{"p99 under the absolute floor", []NodeStat{
			node("n1", time.Second, time.Second, OpLatency{"read", 1000, 20 * time.Microsecond}),
			node("n2", time.Second, time.Second, OpLatency{"read", 1000, 200 * time.Microsecond})}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range Stragglers(tc.nodes, StragglerOptions{}) {
				got = append(got, s.Node+" "+s.Metric)
				if !strings.HasPrefix(s.String(), "straggler: "+s.Node+": ") || s.Ratio() <= 1 {
					t.Errorf("bad straggler %+v: %s", s, s)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Stragglers = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestStragglerString(t *testing.T) {
	s := Straggler{Node: "host=n2", Metric: "I/O time", Value: 5 * time.Second, Typical: 2 * time.Second}
	if got, want := s.String(), "straggler: host=n2: I/O time 5s is 2.5x the other nodes' median 2s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestBarrier(t *testing.T) {
	dir := t.TempDir()
	const n = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	// The barrier is for processes on different nodes; goroutines stand in for them here
	// (no FUSE involved).
	for p := 0; p < n-1; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Barrier(context.Background(), dir, Task{JobID: "7", StepID: "1", ProcID: p, NTasks: n}, time.Millisecond); err != nil {
				t.Error(err)
			}
			mu.Lock()
			done++
			mu.Unlock()
		}()
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	early := done
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d tasks left the barrier before the last one arrived", early)
	}
	if _, err := Barrier(context.Background(), dir, Task{JobID: "7", StepID: "1", ProcID: n - 1, NTasks: n}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if done != n-1 {
		t.Fatalf("%d of %d tasks left the barrier", done, n-1)
	}
}

func TestBarrierTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := Barrier(ctx, t.TempDir(), Task{JobID: "7", ProcID: 0, NTasks: 2}, time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 of 2 tasks arrived") {
		t.Fatalf("err = %v, want a deadline error naming 1 of 2 tasks", err)
	}
}
