package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace/stats"
)

// What the runs say together, printed after the last one.

// conclude prints the targets' merged predictions, their comparison and the cold/warm
// tables, then warns of divergences.
func (c *Campaign) conclude(ctx context.Context, rs *runs) error {
	s := &c.spec
	if s.Repeat > 1 {
		c.writeMergedPredictions(rs.traces)
	}
	if len(rs.targets) > 1 && !s.NoCompare {
		if err := c.compareTargets(ctx, rs.traces); err != nil {
			return err
		}
	}
	if err := c.writeColdWarm(ctx, rs.traces); err != nil {
		return err
	}
	if rs.diverged > 0 && c.engine.OnDiverge == replay.DivergeWarn {
		// Warn, not fail: the replay ran to the end and measured the target (--on-diverge=abort fails).
		_, _ = fmt.Fprintf(c.env.Stderr, "iotap replay: %d ops diverged from the trace in %d runs (see the summaries)\n", rs.diverged, rs.n)
	}
	return nil
}

// writeMergedPredictions prints, for each target replayed more than once, the prediction
// of its runs together (replay.MergePredictions), read back from the runs' summaries.
func (c *Campaign) writeMergedPredictions(traces [][]string) {
	for i, runs := range traces {
		var ps []*replay.Prediction
		for _, tr := range runs {
			var sum struct {
				Prediction *replay.Prediction `json:"prediction"`
			}
			b, err := os.ReadFile(strings.TrimSuffix(tr, ".iotap") + ".json")
			if err != nil || json.Unmarshal(b, &sum) != nil {
				continue
			}
			ps = append(ps, sum.Prediction)
		}
		if m := replay.MergePredictions(ps); m != nil && m.Runs > 1 {
			_, _ = fmt.Fprintf(c.env.Stdout, "%s predicts %s\n", termsafe.Text(c.targetName(i)), m.Line())
		}
	}
}

// compareTargets prints the comparison of the targets' replay traces, each target's
// repeats merged, the first target as the baseline: the verdict first, then per system
// call, as compare prints it.
func (c *Campaign) compareTargets(ctx context.Context, traces [][]string) error {
	var sides []*stats.Stats
	for _, files := range traces {
		if len(files) == 0 {
			return nil
		}
		per, err := c.env.Load(ctx, files)
		if err != nil {
			return err
		}
		s := stats.New()
		for _, p := range per {
			s.Merge(p)
		}
		sides = append(sides, s)
	}
	cmp := report.Compare(c.spec.Targets, sides, 0.05)
	report.CompareCalls(cmp, sides) // a replay's events are calls: per system call, as compare does
	cmp.Forced = len(cmp.Mismatches) > 0
	var buf bytes.Buffer
	if err := report.WriteCompareText(&buf, cmp); err != nil {
		return fmt.Errorf("replay: render comparison: %w", err)
	}
	_, _ = fmt.Fprintln(c.env.Stdout)
	_, err := c.env.Stdout.Write(buf.Bytes())
	return err
}
