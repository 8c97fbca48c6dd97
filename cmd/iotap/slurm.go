package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/slurm"
	"github.com/iotap/iotap/report"
)

// Slurm support shared by report and replay (docs/slurm.md).

// writeStragglers prints one line per straggler among a report's per-node (or per-label)
// views, under the rule of slurm.Stragglers. It prints nothing with fewer than two views.
func writeStragglers(w io.Writer, groups []*report.View) error {
	for _, s := range slurm.Stragglers(nodeStats(groups), slurm.StragglerOptions{}) {
		if _, err := fmt.Fprintln(w, s); err != nil {
			return err
		}
	}
	return nil
}

// nodeStats turns a report's views into the plain aggregates slurm.Stragglers reads.
func nodeStats(groups []*report.View) []slurm.NodeStat {
	out := make([]slurm.NodeStat, 0, len(groups))
	for _, g := range groups {
		n := slurm.NodeStat{Name: g.Name, IOTime: time.Duration(g.TotalNs), Wall: time.Duration(g.DurationNs)}
		for _, op := range g.Ops {
			n.Ops = append(n.Ops, slurm.OpLatency{Op: op.Op, Count: op.Count, P99: time.Duration(op.P99)})
		}
		out = append(out, n)
	}
	return out
}

// shardTraces expands replay's arguments (files, directories, globs) and returns the traces
// this Slurm task replays under `--shard auto` (the rule of slurm.Shard), with the task.
// Outside a job step it returns a usage error.
func shardTraces(args []string) ([]string, slurm.Task, error) {
	task, err := slurm.TaskFromEnv(os.Getenv)
	if err != nil {
		return nil, task, usageErrorf("--shard auto: %v", err)
	}
	files, err := expandTraces(args)
	if err != nil {
		return nil, task, err
	}
	return slurm.Shard(files, task.ProcID, task.NTasks), task, nil
}

// replayShard is `iotap replay --shard auto`: it replays the traces this Slurm task gets
// under the shard rule (shardTraces), so that all tasks start their timed replays together:
//
//  1. each of its traces T gets its own target, TARGET/<T without .iotap> (created), and its
//     starting state is prepared there (--prepare only; skipped under --prepare skip);
//  2. every task of the step (idle ones too) waits at a barrier in a shared directory: the
//     -o directory, or else the traces' directory;
//  3. each trace is replayed onto its target (--prepare skip), one after another.
//
// With -o set it names a directory, created if needed, and T's results go to
// DIR/<T without .iotap>; without it, replay's default applies (next to each trace).
// replayOne runs one replay with the options given.
func replayShard(ctx context.Context, e *env, o *replayOptions, args []string, replayOne func(o *replayOptions, trace string) error) error {
	if len(o.Targets) != 1 {
		return usageErrorf("--shard auto takes one --target: each trace replays onto TARGET/<trace name>")
	}
	mine, task, err := shardTraces(args)
	if err != nil {
		return err
	}
	barrierDir := o.Output
	if o.Output != "" {
		if err := os.MkdirAll(o.Output, 0o755); err != nil {
			return fmt.Errorf("replay: output directory: %w", err)
		}
	} else if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
		barrierDir = args[0]
	} else {
		barrierDir = filepath.Dir(args[0])
	}
	type job struct{ trace, target, output string }
	var jobs []job
	for _, tr := range mine {
		name := strings.TrimSuffix(filepath.Base(tr), ".iotap")
		j := job{trace: tr, target: filepath.Join(o.Targets[0], name)}
		if o.Output != "" {
			j.output = filepath.Join(o.Output, name)
		}
		if o.Places.Remote(o.Targets[0]) {
			j.target = strings.TrimRight(o.Targets[0], "/") + "/" + name // a key prefix: nothing to create
		} else if err := os.MkdirAll(j.target, 0o755); err != nil {
			return fmt.Errorf("replay: target: %w", err)
		}
		jobs = append(jobs, j)
	}
	one := func(j job, prepare string) *replayOptions {
		c := *o
		c.Shard, c.Targets, c.Output, c.Prepare = "", []string{j.target}, j.output, prepare
		return &c
	}
	if len(jobs) == 0 {
		if _, err := fmt.Fprintf(e.stdout, "task %d of %d on %s: no trace to replay\n", task.ProcID, task.NTasks, task.NodeName); err != nil {
			return err
		}
	}
	if o.Prepare != "skip" {
		for _, j := range jobs {
			if err := replayOne(one(j, "only"), j.trace); err != nil {
				return err
			}
		}
	}
	if o.Prepare == "only" {
		return nil
	}
	if task.NTasks > 1 {
		bctx, cancel := context.WithTimeout(ctx, shardBarrierTimeout)
		defer cancel()
		if _, err := slurm.Barrier(bctx, barrierDir, task, 0); err != nil {
			return fmt.Errorf("replay --shard auto: wait for the other tasks: %w", err)
		}
	}
	for _, j := range jobs {
		if _, err := fmt.Fprintf(e.stdout, "task %d of %d on %s: replaying %s onto %s\n", task.ProcID, task.NTasks, task.NodeName, j.trace, j.target); err != nil {
			return err
		}
		if err := replayOne(one(j, "skip"), j.trace); err != nil {
			return err
		}
	}
	return nil
}

// shardBarrierTimeout bounds the wait for the other tasks of a step to prepare.
const shardBarrierTimeout = 30 * time.Minute
