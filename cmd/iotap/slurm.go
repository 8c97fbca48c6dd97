package main

import (
	"fmt"
	"io"
	"os"
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
