package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Barrier blocks until every task of t's step has arrived, using files in dir, a directory
// all nodes share (the replay target's parent, a shared home). Each task creates
// dir/iotap-barrier.<job>.<step>/<procid> and polls (every poll, 10 ms if zero) until
// t.NTasks files exist, or ctx ends. It returns the time the last arrival was seen, on this
// node's clock: tasks leave within about one poll interval of each other, plus the shared
// file system's attribute cache delay (NFS: up to its actimeo; use noac or a short poll
// there). The barrier directory is left in place (another task may still be polling it).
//
// srun starts all tasks of a step at nearly the same moment already; Barrier is for work
// that each task does before the part that must start together (replay's preparation of the
// starting state, for instance).
func Barrier(ctx context.Context, dir string, t Task, poll time.Duration) (time.Time, error) {
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	bd := filepath.Join(dir, fmt.Sprintf("iotap-barrier.%s.%s", nonEmpty(t.JobID), nonEmpty(t.StepID)))
	if err := os.MkdirAll(bd, 0o777); err != nil {
		return time.Time{}, fmt.Errorf("barrier: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bd, fmt.Sprint(t.ProcID)), nil, 0o666); err != nil {
		return time.Time{}, fmt.Errorf("barrier: %w", err)
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		ents, err := os.ReadDir(bd)
		if err != nil {
			return time.Time{}, fmt.Errorf("barrier: %w", err)
		}
		if len(ents) >= t.NTasks {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("barrier: %d of %d tasks arrived: %w", len(ents), t.NTasks, ctx.Err())
		case <-tick.C:
		}
	}
}

func nonEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
