package main

import (
	"context"
	"errors"
	"slices"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/replay/campaign"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// replayCommands returns the replay subcommand.
func replayCommands() []*command {
	return []*command{
		{
			name:    "replay",
			summary: "re-drive a recorded trace on other storage and measure it",
			usage:   "[flags] TRACE --target DIR [--target DIR...]",
			setup:   withOptions(runReplay),
		},
	}
}

// replayOptions are replay's flags: the campaign's (campaign.Spec), and those the command
// keeps, since it chooses the backends and the sampling (the places that are not
// directories, Slurm shards, the storage client).
type replayOptions struct {
	campaign.Spec
	Shard  string
	Places replayPlaces
	Sample sampleOptions
	// trace is the trace as it was named (Spec.Trace is a local copy of a remote one).
	trace string
}

func (o *replayOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Targets, "target", nil, "replay onto `target`: a directory, or s3://bucket/prefix (repeat for several targets; they are interleaved)")
	fs.StringVarP(&o.Output, "output", "o", "", "write replay traces and fidelity summaries as `prefix`.tN.rM.{iotap,json} (default: TRACE without .iotap, plus .replay)")
	fs.IntVar(&o.Repeat, "repeat", 1, "replay `n` times onto each target, targets interleaved")
	fs.BoolVar(&o.DropCaches, "drop-caches", false, "sync and drop the page cache before each run (needs root)")
	fs.StringVar(&o.Timing, "timing", "think", "timing `mode`: think (previous op done + recorded think time), original (recorded start times), afap")
	fs.Float64Var(&o.Speed, "speed", 1, "scale think times and start offsets by 1/`x` (2 = twice as fast)")
	fs.DurationVar(&o.NativeRuntime, "native-runtime", 0, "the job's runtime without the layer (`duration`): each prediction is also anchored on it "+
		"(default: the one the trace keeps, from record --native-first or --native-runtime)")
	fs.BoolVar(&o.KeepRunDelay, "keep-run-delay", false, "think mode: also wait the time a recorded thread waited for a CPU between its calls "+
		"(measured with --legs kernel; left out by default: the recorder's own work and other processes caused it)")
	fs.StringVar(&o.ThinkCPU, "think-cpu", "sleep", "think mode: what a thread does during its think time: sleep, or spin (keep a CPU busy as the job's computing did, so the target is measured under the same CPU contention; costs a CPU per thinking thread)")
	fs.StringVar(&o.RoundTrip, "round-trip", "auto", "think mode: the recording layer's round trip per request, not waited for again (`auto`: the one the recorder measured while the job ran, else before it, else estimated from the trace's path walks; a duration such as 30us; 0: none)")
	fs.StringVar(&o.OnDiverge, "on-diverge", "warn", "`policy` for a result (errno, byte count) that differs from the trace: ignore (count them), warn (count them and log the first ten) or abort (stop at the first). A replay that ran to the end exits 0 under ignore and warn, its divergences counted in the summary and the .json; abort exits 1. ENOTSUP/ENOSYS on one side only (target or recorded storage) is counted as a backend difference, not a divergence")
	fs.StringVar(&o.Prepare, "prepare", "auto", "starting state `mode`: auto (create it before each run), skip (the target already holds it), only (create it and stop)")
	fs.StringVar(&o.Fill, "fill", "zero", "`kind` of data in prepared files and replayed writes: zero or random")
	fs.BoolVar(&o.Scratch, "scratch", false, "the targets are scratch areas: their contents may be deleted")
	fs.BoolVar(&o.Force, "force", false, "replay the readable events of a corrupt trace (a trace only cut short, without its footer, is replayed without it)")
	fs.BoolVar(&o.DryRun, "dry-run", false, "derive the starting state and report ops whose preconditions cannot be met; touch no target")
	fs.BoolVar(&o.NoFold, "no-fold", false, "replay every lookup as its own lstat instead of folding kernel path walks")
	fs.BoolVar(&o.NoCompare, "no-compare", false, "with several targets, leave out the comparison of their replays printed at the end (to print one with iotap compare, the recording as the baseline)")
	fs.IntVar(&o.Copies, "copies", 1, "replay `n` copies of the job at once, as one run: copy K onto its own TARGET/copyK (a subdirectory, or a key prefix of an s3:// target) with its own starting state; prints aggregate MB/s, IOPS and files/s and each copy's latencies, and writes PREFIX.tT.rR.cK.{iotap,json} and PREFIX.tT.rR.copies.json")
	fs.StringVar(&o.Shard, "shard", "", "`auto`: as one task of a Slurm step (srun), replay this task's share of the traces in TRACE|DIR|GLOB..., each onto --target/<trace name> and into -o DIR/<trace name>, all tasks starting together after preparing (docs/slurm.md)")
	fs.StringVar(&o.Progress, "progress", "auto", "show a progress bar on standard error `when`: auto (stderr is a terminal), always, never")
	o.Places.addFlags(fs) // each scheme's flags (replay_places.go)
	o.Sample.addFlags(fs)
	fs.StringArrayVar(&o.Stores, "prepare-via", nil, "create the starting state in `store`, a directory or s3://bucket/prefix behind the target "+
		"(the backing directory, the bucket an s3fs or Mountpoint mount shows), not through the target: the first access through the mount is cold. "+
		"Repeat once per --target, in the same order. The store is emptied first; later runs (--repeat) restore it keeping the files a run left unchanged, so they start warm")
	fs.StringVar(&o.BetweenRuns, "between-runs", "", "run `command` (with sh -c) before each run, after the starting state is made: remount, release an HSM, drop a remote cache. "+
		"It sees IOTAP_RUN (1 for the first run), IOTAP_REPEAT, IOTAP_TARGET, IOTAP_TARGET_INDEX and IOTAP_STORE; a failure stops the replay")
}

func runReplay(ctx context.Context, e *env, o *replayOptions, args []string) error {
	if o.Shard != "" {
		if o.Shard != "auto" {
			return usageErrorf("--shard %q: want auto", o.Shard)
		}
		return replayShard(ctx, e, o, args, func(one *replayOptions, tr string) error {
			return runReplay(ctx, e, one, []string{tr})
		})
	}
	tracePath, cleanup, err := o.localTrace(ctx, args)
	if err != nil {
		return err
	}
	defer cleanup()
	c, err := o.campaign(e, tracePath)
	if err != nil {
		return err
	}
	res, err := c.Run(ctx)
	if err != nil {
		return err
	}
	// A replay of a damaged trace, or of one whose recorder dropped events, ran to its
	// end: it exits with the damage and the drops.
	return errors.Join(res.Damage, droppedError(nonEmpty(droppedNote(tracePath, res.Footer))))
}

// localTrace checks replay's argument, one trace, and returns it as a local file: replay
// reads its trace more than once (the starting state, then each run), so a trace kept in a
// place that is no directory (s3://) is downloaded first, and cleanup removes the copy.
func (o *replayOptions) localTrace(ctx context.Context, args []string) (path string, cleanup func(), err error) {
	if len(args) != 1 {
		return "", nil, usageErrorf("replay needs exactly one trace")
	}
	path = args[0]
	if path == "-" {
		return "", nil, usageErrorf("replay reads the trace twice (starting state, then replay): give a file, not standard input")
	}
	o.trace = path
	pl := o.Places.of(path)
	if pl == nil {
		return path, func() {}, nil
	}
	if o.Output == "" {
		return "", nil, usageErrorf("replaying %s: name the results with -o PREFIX", path)
	}
	return downloadTrace(ctx, pl, path)
}

// campaign checks the flags the campaign leaves to the command (the places', sampling's)
// and returns the campaign of the trace at tracePath, checked by campaign.New.
func (o *replayOptions) campaign(e *env, tracePath string) (*campaign.Campaign, error) {
	places := append(slices.Clone(o.Targets), o.Stores...)
	if err := o.Places.setup(e.log, o.trace, places, !o.DryRun); err != nil {
		return nil, err
	}
	if err := o.Sample.sampling().Check(); err != nil {
		return nil, err
	}
	spec := o.Spec
	spec.Trace = tracePath
	return campaign.New(spec, campaign.Env{
		Places: &o.Places,
		Sample: func(w *trace.Writer, dir string) *procsample.Sampler {
			return o.Sample.sampling().Start(e.stderr, e.log, w, w.Origin(), dir)
		},
		Load: func(ctx context.Context, files []string) ([]*stats.Stats, error) {
			per, _, err := loadTraces(ctx, e, files, stats.Options{})
			return per, err
		},
		Stdout:  e.stdout,
		Stderr:  e.stderr,
		Log:     e.log,
		Version: version,
	})
}
