// Cold starts: preparing the starting state in the store behind a target (--prepare-via),
// a command before each run (--between-runs), and the cold/warm split of repeated runs.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/report"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	replays3 "github.com/iotap/iotap/replay/s3"
	"github.com/iotap/iotap/trace/stats"
)

// coldOptions are the flags of cold starts.
type coldOptions struct {
	PrepareVia  []string
	BetweenRuns string
}

func (o *coldOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.PrepareVia, "prepare-via", nil, "create the starting state in `store`, a directory or s3://bucket/prefix behind the target "+
		"(the backing directory, the bucket an s3fs or Mountpoint mount shows), not through the target: the first access through the mount is cold. "+
		"Repeat once per --target, in the same order. The store is emptied first; later runs (--repeat) restore it keeping the files a run left unchanged, so they start warm")
	fs.StringVar(&o.BetweenRuns, "between-runs", "", "run `command` (with sh -c) before each run, after the starting state is made: remount, release an HSM, drop a remote cache. "+
		"It sees IOTAP_RUN (1 for the first run), IOTAP_REPEAT, IOTAP_TARGET, IOTAP_TARGET_INDEX and IOTAP_STORE; a failure stops the replay")
}

// checkStores checks the --prepare-via stores (checkPlaces): one per target, not with
// --prepare skip; a directory store must exist, be no symbolic link, and hold neither the
// trace nor the results, as replay empties it.
func (o *replayOptions) checkStores(tracePath, prefix string) error {
	if len(o.PrepareVia) == 0 {
		return nil
	}
	if len(o.PrepareVia) != len(o.Targets) {
		return usageErrorf("--prepare-via given %d times for %d targets: give one store per --target, in the same order", len(o.PrepareVia), len(o.Targets))
	}
	if o.Prepare == "skip" {
		return usageErrorf("--prepare-via makes the starting state: it does not go with --prepare skip")
	}
	for _, spec := range o.PrepareVia {
		if s3store.IsURL(spec) {
			if err := checkS3Place("--prepare-via", spec, o.S3); err != nil {
				return err
			}
			continue
		}
		fi, err := os.Lstat(strings.TrimRight(spec, "/"))
		switch {
		case err != nil:
			return usageErrorf("--prepare-via %s: %v", spec, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return usageErrorf("--prepare-via %s is a symbolic link: replay empties the store; name the directory itself", spec)
		case !fi.IsDir():
			return usageErrorf("--prepare-via %s: not a directory", spec)
		}
		if err := holdsNoInput(spec, "--prepare-via", tracePath, prefix); err != nil {
			return err
		}
	}
	return nil
}

// openStores opens the --prepare-via stores, one per target (nil entries without one),
// after checkStores. A store is emptied before the first run: it must be empty unless
// --scratch.
func openStores(ctx context.Context, o *replayOptions, s3o replays3.Options) ([]replay.Backend, error) {
	stores := make([]replay.Backend, len(o.Targets))
	if len(o.PrepareVia) == 0 {
		return stores, nil
	}
	for i, spec := range o.PrepareVia {
		b, _, err := openTarget(ctx, spec, s3o)
		if err != nil {
			return stores, err
		}
		stores[i] = b
		empty, err := b.IsEmpty(ctx)
		if err != nil {
			return stores, fmt.Errorf("replay: store %s: %w", spec, err)
		}
		if !empty && !o.Scratch {
			return stores, usageErrorf("--prepare-via %s is not empty: replay deletes what is there before the first run; pass --scratch if it is a scratch area", spec)
		}
	}
	return stores, nil
}

func closeStores(e *env, stores []replay.Backend) {
	for _, b := range stores {
		if b == nil {
			continue
		}
		if err := b.Close(); err != nil {
			e.log.Warn("replay: close store", "store", b.Target().Path, "err", err)
		}
	}
}

// prepareRun makes the starting state before run rep of target i: in its store when it
// has one (made anew before the first run, refreshed before later ones), else through
// the target unless --prepare skip; then runs --between-runs and checks that the target
// shows what the store holds.
func prepareRun(ctx context.Context, e *env, o *replayOptions, targets []replayTarget, i, rep int, store replay.Backend, st *replay.State, ro replay.Options) error {
	t := &targets[i]
	switch {
	case store != nil && rep == 0:
		if err := replay.PrepareTarget(ctx, store, st, ro.FillRandom); err != nil {
			return fmt.Errorf("replay: prepare in %s: %w", store.Target().Path, err)
		}
	case store != nil:
		rs, err := replay.RefreshTarget(ctx, store, st, ro.FillRandom)
		if err != nil {
			return fmt.Errorf("replay: restore the starting state in %s: %w", store.Target().Path, err)
		}
		_, _ = fmt.Fprintf(e.stdout, "restored the starting state in %s: %d entries kept, %d made again, %d removed\n",
			termsafe.Name(store.Target().Path), rs.Kept, rs.Made, rs.Removed)
	case o.Prepare != "skip":
		if err := replay.PrepareTarget(ctx, t.b, st, ro.FillRandom); err != nil {
			return err
		}
	}
	if o.Prepare == "only" {
		return nil
	}
	if o.BetweenRuns != "" {
		if err := betweenRuns(ctx, e, o, targets, i, rep); err != nil {
			return err
		}
	}
	if store != nil {
		return checkShows(ctx, t, store, st)
	}
	return nil
}

// betweenRuns runs --between-runs before run rep of target i. A directory target is
// closed while it runs (the replay holds descriptors in it, which would keep a remount
// from unmounting it) and opened again after.
func betweenRuns(ctx context.Context, e *env, o *replayOptions, targets []replayTarget, i, rep int) error {
	t := &targets[i]
	if t.dir != "" {
		if err := t.b.Close(); err != nil {
			e.log.Warn("replay: close target before --between-runs", "target", t.dir, "err", err)
		}
	}
	store := ""
	if len(o.PrepareVia) > i {
		store = o.PrepareVia[i]
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", o.BetweenRuns)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, e.stderr, e.stderr
	// Its own process group, ended whole when the replay is interrupted: the shell's
	// children (a remount, a sleep) do not outlive iotap.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = betweenRunsGrace
	cmd.Env = append(os.Environ(),
		"IOTAP_RUN="+strconv.Itoa(rep+1), "IOTAP_REPEAT="+strconv.Itoa(o.Repeat),
		"IOTAP_TARGET="+o.Targets[i], "IOTAP_TARGET_INDEX="+strconv.Itoa(i+1), "IOTAP_STORE="+store)
	runErr := cmd.Run()
	if t.dir != "" {
		b, _, err := openTarget(ctx, t.dir, replays3.Options{})
		if err != nil {
			return fmt.Errorf("replay: open target %s again after --between-runs: %w", t.dir, err)
		}
		t.b = b
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("replay: interrupted while --between-runs ran before run %d of target %d (%s): %w", rep+1, i+1, o.Targets[i], ctx.Err())
	}
	if runErr != nil {
		return fmt.Errorf("replay: --between-runs before run %d of target %d (%s): %w", rep+1, i+1, o.Targets[i], runErr)
	}
	return nil
}

// betweenRunsGrace is how long an interrupted --between-runs command has to end after
// SIGTERM before it is killed.
const betweenRunsGrace = 5 * time.Second

// checkShows checks that the target shows the first entry of the starting state made in
// the store: a store that is not the one behind the target would leave the replay
// without its input, every op diverging.
func checkShows(ctx context.Context, t *replayTarget, store replay.Backend, st *replay.State) error {
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

// startLabel says how a run started: "cold" for the first run with a store (nothing read
// through the target yet), "warm" for later ones, "" without a store.
func startLabel(o *replayOptions, i, rep int) string {
	if len(o.PrepareVia) <= i {
		return ""
	}
	if rep == 0 {
		return "cold"
	}
	return "warm"
}

// writeColdWarm prints, per target replayed more than once, each operation's latency in
// run 1 (cold, with a store) beside the later runs merged (warm).
func writeColdWarm(ctx context.Context, e *env, o *replayOptions, results [][]string) error {
	if o.Repeat < 2 {
		return nil
	}
	var b bytes.Buffer
	for i, files := range results {
		if len(files) < 2 {
			continue
		}
		first, later, err := loadRuns(ctx, e, files)
		if err != nil {
			return err
		}
		n1, n2 := "run 1", fmt.Sprintf("runs 2-%d", len(files))
		if len(files) == 2 {
			n2 = "run 2"
		}
		if startLabel(o, i, 0) != "" {
			n1, n2 = n1+" (cold)", n2+" (warm)"
		}
		writeRunSplit(&b, fmt.Sprintf("target %d (%s)", i+1, o.Targets[i]), n1, n2, report.Compare([]string{n1, n2}, []*stats.Stats{first, later}, 1))
	}
	_, err := e.stdout.Write(b.Bytes())
	return err
}

// loadRuns aggregates the first run's trace and the later runs' traces merged.
func loadRuns(ctx context.Context, e *env, files []string) (first, later *stats.Stats, err error) {
	per, _, err := loadTraces(ctx, e, files, stats.Options{})
	if err != nil {
		return nil, nil, err
	}
	later = stats.New()
	for _, p := range per[1:] {
		later.Merge(p)
	}
	return per[0], later, nil
}

// writeRunSplit prints one table: per operation, count, mean and p99 of the two sides and
// the ratios of the second to the first.
func writeRunSplit(w io.Writer, title, n1, n2 string, c *report.Comparison) {
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
