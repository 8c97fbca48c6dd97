package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/report"
	"github.com/iotap/iotap/internal/slurm"
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

// replayShard is `iotap replay --shard auto`: it calls replayOne for each trace this Slurm
// task replays (shardTraces), one after another. With output set (replay's -o), it names a
// directory, created if needed, and trace T's results go to output/<T without .iotap>; with
// output empty, replay's default applies (next to each trace). A task without a trace says
// so and succeeds.
func replayShard(e *env, args []string, output string, replayOne func(trace, output string) error) error {
	mine, task, err := shardTraces(args)
	if err != nil {
		return err
	}
	if len(mine) == 0 {
		_, err := fmt.Fprintf(e.stdout, "task %d of %d on %s: no trace to replay\n", task.ProcID, task.NTasks, task.NodeName)
		return err
	}
	if output != "" {
		if err := os.MkdirAll(output, 0o755); err != nil {
			return fmt.Errorf("replay: output directory: %w", err)
		}
	}
	for _, tr := range mine {
		out := ""
		if output != "" {
			out = filepath.Join(output, strings.TrimSuffix(filepath.Base(tr), ".iotap"))
		}
		if _, err := fmt.Fprintf(e.stdout, "task %d of %d on %s: replaying %s\n", task.ProcID, task.NTasks, task.NodeName, tr); err != nil {
			return err
		}
		if err := replayOne(tr, out); err != nil {
			return err
		}
	}
	return nil
}
