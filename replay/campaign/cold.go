package campaign

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace/stats"
)

// Cold starts: preparing the starting state in the store behind a target (Spec.Stores), a
// command before each run (Spec.BetweenRuns), and the cold/warm split of repeated runs.

// prepareRun makes the starting state before run r: in each copy of its target, or in the
// target's store when it has one (made anew before the first run, refreshed before later
// ones), else through the target unless Prepare "skip"; then runs BetweenRuns and checks
// that the target shows what the store holds.
func (c *Campaign) prepareRun(ctx context.Context, rs *runs, r run) error {
	t, store := &rs.targets[r.i], rs.stores[r.i]
	if len(t.copies) > 0 {
		return c.prepareCopies(ctx, *t, rs.st)
	}
	fill := c.engine.FillRandom
	switch {
	case store != nil && r.rep == 0:
		if err := replay.PrepareTarget(ctx, store, rs.st, fill); err != nil {
			return fmt.Errorf("replay: prepare in %s: %w", store.Target().Path, err)
		}
	case store != nil:
		st, err := replay.RefreshTarget(ctx, store, rs.st, fill)
		if err != nil {
			return fmt.Errorf("replay: restore the starting state in %s: %w", store.Target().Path, err)
		}
		_, _ = fmt.Fprintf(c.env.Stdout, "restored the starting state in %s: %d entries kept, %d made again, %d removed\n",
			termsafe.Name(store.Target().Path), st.Kept, st.Made, st.Removed)
	case c.spec.Prepare != "skip":
		if err := replay.PrepareTarget(ctx, t.b, rs.st, fill); err != nil {
			return err
		}
	}
	if c.spec.Prepare == "only" {
		return nil
	}
	if c.spec.BetweenRuns != "" {
		if err := c.betweenRuns(ctx, t, r); err != nil {
			return err
		}
	}
	if store != nil {
		return checkShows(ctx, t, store, rs.st)
	}
	return nil
}

// betweenRuns runs BetweenRuns before run r of target t. A directory target is closed
// while it runs (the replay holds descriptors in it, which would keep a remount from
// unmounting it) and opened again after.
func (c *Campaign) betweenRuns(ctx context.Context, t *target, r run) error {
	s := &c.spec
	if t.dir != "" {
		if err := t.b.Close(); err != nil {
			c.env.Log.Warn("replay: close target before --between-runs", "target", t.dir, "err", err)
		}
	}
	store := ""
	if len(s.Stores) > r.i {
		store = s.Stores[r.i]
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", s.BetweenRuns)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, c.env.Stderr, c.env.Stderr
	// Its own process group, ended whole when the replay is interrupted: the shell's
	// children (a remount, a sleep) do not outlive iotap.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = betweenRunsGrace
	cmd.Env = append(os.Environ(),
		"IOTAP_RUN="+strconv.Itoa(r.rep+1), "IOTAP_REPEAT="+strconv.Itoa(s.Repeat),
		"IOTAP_TARGET="+s.Targets[r.i], "IOTAP_TARGET_INDEX="+strconv.Itoa(r.i+1), "IOTAP_STORE="+store)
	runErr := cmd.Run()
	if t.dir != "" {
		b, err := c.env.Places.Open(ctx, t.dir)
		if err != nil {
			return fmt.Errorf("replay: open target %s again after --between-runs: %w", t.dir, err)
		}
		t.b = b
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("replay: interrupted while --between-runs ran before run %d of target %d (%s): %w", r.rep+1, r.i+1, s.Targets[r.i], ctx.Err())
	}
	if runErr != nil {
		return fmt.Errorf("replay: --between-runs before run %d of target %d (%s): %w", r.rep+1, r.i+1, s.Targets[r.i], runErr)
	}
	return nil
}

// betweenRunsGrace is how long an interrupted BetweenRuns command has to end after
// SIGTERM before it is killed.
const betweenRunsGrace = 5 * time.Second

// checkShows checks that the target shows the first entry of the starting state made in
// the store: a store that is not the one behind the target would leave the replay
// without its input, every op diverging.
func checkShows(ctx context.Context, t *target, store replay.Backend, st *replay.State) error {
	if len(st.Entries) == 0 {
		return nil
	}
	name := st.Entries[0].Name
	if _, err := t.b.Lstat(ctx, name); err != nil {
		return fmt.Errorf("replay: %q made in the store %s does not show in the target %s (%w): --prepare-via must name the store behind the target; "+
			"a client that caches listings may need a remount first (--between-runs)", name, store.Target().Path, t.b.Target().Path, err)
	}
	return nil
}

// startLabel says how run rep of target i started: "cold" for the first run with a store
// (nothing read through the target yet), "warm" for later ones, "" without a store.
func (c *Campaign) startLabel(i, rep int) string {
	if len(c.spec.Stores) <= i {
		return ""
	}
	if rep == 0 {
		return "cold"
	}
	return "warm"
}

// writeColdWarm prints, per target replayed more than once, each operation's latency in
// run 1 (cold, with a store) beside the later runs merged (warm).
func (c *Campaign) writeColdWarm(ctx context.Context, traces [][]string) error {
	if c.spec.Repeat < 2 {
		return nil
	}
	var b bytes.Buffer
	for i, files := range traces {
		if len(files) < 2 {
			continue
		}
		first, later, err := c.loadRuns(ctx, files)
		if err != nil {
			return err
		}
		n1, n2 := "run 1", fmt.Sprintf("runs 2-%d", len(files))
		if len(files) == 2 {
			n2 = "run 2"
		}
		if c.startLabel(i, 0) != "" {
			n1, n2 = n1+" (cold)", n2+" (warm)"
		}
		writeRunSplit(&b, fmt.Sprintf("target %d (%s)", i+1, c.spec.Targets[i]), [2]string{n1, n2}, report.Compare([]string{n1, n2}, []*stats.Stats{first, later}, 1))
	}
	_, err := c.env.Stdout.Write(b.Bytes())
	return err
}

// loadRuns aggregates the first run's trace and the later runs' traces merged.
func (c *Campaign) loadRuns(ctx context.Context, files []string) (first, later *stats.Stats, err error) {
	per, err := c.env.Load(ctx, files)
	if err != nil {
		return nil, nil, err
	}
	later = stats.New()
	for _, p := range per[1:] {
		later.Merge(p)
	}
	return per[0], later, nil
}

// writeRunSplit prints one table: per operation, count, mean and p99 of the two sides
// named n and the ratios of the second to the first.
func writeRunSplit(w io.Writer, title string, n [2]string, c *report.Comparison) {
	n1, n2 := n[0], n[1]
	_, _ = fmt.Fprintf(w, "\n%s: %s against %s, per operation (ratio = %s / %s)\n", termsafe.Text(title), n1, n2, n2, n1)
	rows := [][]string{{"op", "count", n1 + " mean", n2 + " mean", "ratio", n1 + " p99", n2 + " p99", "ratio"}}
	for _, op := range c.Ops {
		a, b := op.Sides[0], op.Sides[1]
		r := report.Ratios{}
		if b.Ratio != nil {
			r = *b.Ratio
		}
		rows = append(rows, []string{op.Op, format.Count(a.Count), format.Dur(int64(a.MeanNs)), format.Dur(int64(b.MeanNs)), ratioText(r.Mean),
			format.Dur(a.P99), format.Dur(b.P99), ratioText(r.P99)})
		if a.FirstAccess != nil || a.Reaccess != nil || b.FirstAccess != nil || b.Reaccess != nil {
			// Reads of bytes the run had not read before, and re-reads: a warm run's reads
			// are fast because the storage kept the data, or because the job re-read it.
			for _, x := range []struct {
				name   string
				ra, rb *report.AccessRow
			}{{"  first access", a.FirstAccess, b.FirstAccess}, {"  re-access", a.Reaccess, b.Reaccess}} {
				rows = append(rows, accessCells(x.name, x.ra, x.rb))
			}
		}
	}
	writeRows(w, rows)
}

// accessCells is a row of the first-access split of reads in two runs.
func accessCells(name string, a, b *report.AccessRow) []string {
	mean := func(x *report.AccessRow) string {
		if x == nil {
			return "-"
		}
		return format.Dur(int64(x.MeanNs))
	}
	p99 := func(x *report.AccessRow) string {
		if x == nil {
			return "-"
		}
		return format.Dur(x.P99)
	}
	var count string
	var rm, r99 float64
	if a != nil {
		count = format.Count(a.Count)
		if b != nil && a.MeanNs > 0 && a.P99 > 0 {
			rm, r99 = b.MeanNs/a.MeanNs, float64(b.P99)/float64(a.P99)
		}
	} else {
		count = "0"
	}
	return []string{name, count, mean(a), mean(b), ratioText(rm), p99(a), p99(b), ratioText(r99)}
}

func ratioText(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", r)
}

// writeRows prints rows as a table, the first column left-aligned and the others right.
func writeRows(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for j, c := range r {
			width[j] = max(width[j], len(c))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for j, c := range r {
			if j == 0 {
				fmt.Fprintf(&line, "%-*s", width[j], c)
			} else {
				fmt.Fprintf(&line, "  %*s", width[j], c)
			}
		}
		_, _ = fmt.Fprintln(w, line.String())
	}
}
