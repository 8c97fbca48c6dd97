package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/report"
	"github.com/iotap/iotap/internal/s3req"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay"
	replays3 "github.com/iotap/iotap/replay/s3"
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
			setup: func(fs *pflag.FlagSet) func(context.Context, *env, []string) error {
				opts := &replayOptions{}
				opts.AddFlags(fs)
				return func(ctx context.Context, e *env, args []string) error { return runReplay(ctx, e, opts, args) }
			},
		},
	}
}

type replayOptions struct {
	Targets       []string
	Output        string
	Repeat        int
	DropCaches    bool
	Timing        string
	Speed         float64
	RoundTrip     string
	ThinkCPU      string
	KeepRunDelay  bool
	NativeRuntime time.Duration
	OnDiverge     string
	Prepare       string
	Fill          string
	Scratch       bool
	Force         bool
	DryRun        bool
	NoFold        bool
	NoCompare     bool
	Progress      string
	S3            replays3.Options
	Shard         string
	S3Opts        []string
	sampleOptions
	coldOptions
	Copies int
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
	fs.StringVar(&o.S3.Profile, "s3-profile", "mountpoint", "for s3:// targets: `profile` of S3 requests per file call: mountpoint, s3fs or sdk")
	fs.StringVar(&o.S3.Endpoint, "s3-endpoint", "", "for s3:// targets: S3 endpoint `url` (path-style addressing)")
	fs.StringVar(&o.S3.Region, "s3-region", "", "for s3:// targets: AWS `region`")
	fs.StringVar(&o.S3.AWSProfile, "aws-profile", "", "for s3:// targets: AWS shared-config `profile`")
	fs.BoolVar(&o.S3.Keep, "keep", false, "for s3:// targets: leave the replay's objects in the bucket")
	fs.StringArrayVar(&o.S3Opts, "s3-opt", nil, "for s3:// targets: set a client `key=value` of the profile (repeatable; a target's own "+
		"s3://bucket/prefix?key=value&key=value wins, and may set profile=NAME). "+replays3.SettingsHelp)
	o.sampleOptions.addFlags(fs)
	o.coldOptions.addFlags(fs)
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
	if len(args) != 1 {
		return usageErrorf("replay needs exactly one trace")
	}
	tracePath := args[0]
	if tracePath == "-" {
		return usageErrorf("replay reads the trace twice (starting state, then replay): give a file, not standard input")
	}
	if s3store.IsURL(tracePath) && o.Output == "" {
		return usageErrorf("replaying %s: name the results with -o PREFIX", tracePath)
	}
	if s3store.IsURL(tracePath) {
		local, cleanup, err := downloadTrace(ctx, tracePath)
		if err != nil {
			return err
		}
		defer cleanup()
		tracePath = local
	}
	ro, err := o.runOptions(e)
	if err != nil {
		return err
	}
	prefix := o.Output
	if prefix == "" {
		prefix = strings.TrimSuffix(tracePath, ".iotap") + ".replay"
	}
	if !o.DryRun {
		// Before the trace is read, which takes a while on a large one.
		if err := o.checkPlaces(tracePath, prefix); err != nil {
			return err
		}
	}

	// Pass 1: the starting state, and what is wrong with the trace.
	st, damage, err := deriveState(ctx, tracePath, ro.Plan)
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted while reading the trace")
	}
	if err != nil {
		return err
	}
	if damage.err != nil {
		if !damage.cut && !o.Force {
			return fmt.Errorf("%w: %v\nreplay refuses a corrupt trace: --force replays its readable events", errDamaged, damage.err)
		}
		_, _ = fmt.Fprintf(e.stderr, "iotap replay: %s\n", termsafe.Text(damage.note))
	}
	// A replay of a damaged trace, or of one whose recorder dropped events, runs to its end,
	// then exits with the damage and the drops.
	damaged := func(err error) error {
		if err != nil {
			return err
		}
		if damage.err != nil {
			err = fmt.Errorf("%w: %v (replayed the %d readable events)", errDamaged, damage.err, damage.events)
		}
		return errors.Join(err, droppedError(nonEmpty(damage.dropped)))
	}
	_, _ = fmt.Fprintf(e.stdout, "starting state: %d directories, %d files (%s), %d symlinks; %d replay ops\n",
		st.Dirs, st.Files, format.Bytes(uint64(st.Bytes)), st.Symlinks, st.Ops)
	ro.Workers = st.Workers
	if ro.NativeRuntime == 0 {
		ro.NativeRuntime = traceNativeRuntime(tracePath)
	}
	if ro.Timing == replay.TimingThink {
		if o.RoundTrip == "auto" {
			c := st.AutoRoundTrip()
			ro.RoundTrip, ro.RoundTripSource = c.RoundTrip, c.Source
		} else {
			ro.RoundTripSource = "--round-trip"
		}
		if ro.RoundTrip > 0 {
			_, _ = fmt.Fprintf(e.stdout, "recording layer round trip: %v per request (%s), not waited for again\n",
				ro.RoundTrip, ro.RoundTripSource)
		}
		if note := st.Contended(); note != "" {
			_, _ = fmt.Fprintf(e.stdout, "NOTE: %s\n", note)
		}
	}
	if o.DryRun {
		return damaged(dryRun(ctx, e, tracePath, st, ro.Plan))
	}
	raiseNoFile(e)

	targets, err := openTargets(ctx, e, o)
	defer func() { closeTargets(e, targets) }() // --between-runs may open them again
	if err != nil {
		return err
	}
	s3o := o.S3
	s3o.Log = e.log
	stores, err := openStores(ctx, o, s3o)
	defer closeStores(e, stores)
	if err != nil {
		return err
	}
	results, diverged, runs, err := replayTargets(ctx, e, o, tracePath, prefix, targets, stores, st, ro)
	if err != nil {
		return err
	}
	if o.Prepare == "only" {
		return damaged(nil)
	}
	if o.Repeat > 1 {
		writeMergedPredictions(e, o.Targets, results)
	}
	if len(targets) > 1 && !o.NoCompare {
		if err := compareTargets(ctx, e, o.Targets, results); err != nil {
			return err
		}
	}
	if err := writeColdWarm(ctx, e, o, results); err != nil {
		return err
	}
	if diverged > 0 && ro.OnDiverge == replay.DivergeWarn {
		// Warn, not fail: the replay ran to the end and measured the target (--on-diverge=abort fails).
		_, _ = fmt.Fprintf(e.stderr, "iotap replay: %d ops diverged from the trace in %d runs (see the summaries)\n", diverged, runs)
	}
	return damaged(nil)
}

// writeMergedPredictions prints, for each target replayed more than once, the prediction
// of its runs together (replay.MergePredictions), read back from the runs' summaries.
func writeMergedPredictions(e *env, names []string, results [][]string) {
	for i, runs := range results {
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
			name := fmt.Sprintf("target %d", i+1)
			if i < len(names) {
				name = names[i]
			}
			_, _ = fmt.Fprintf(e.stdout, "%s predicts %s\n", termsafe.Text(name), m.Line())
		}
	}
}

// runOptions checks the flags that shape a run and returns the engine's options (the
// round trip still to be estimated when --round-trip is auto).
func (o *replayOptions) runOptions(e *env) (replay.Options, error) {
	timing, err := replay.ParseTiming(o.Timing)
	if err != nil {
		return replay.Options{}, usageErrorf("--timing: %v", err)
	}
	policy, err := replay.ParseDivergePolicy(o.OnDiverge)
	if err != nil {
		return replay.Options{}, usageErrorf("--on-diverge: %v", err)
	}
	if !(o.Speed >= minSpeed && o.Speed <= maxSpeed) { // NaN fails too
		return replay.Options{}, usageErrorf("--speed %g: want a factor from %g to %g", o.Speed, minSpeed, maxSpeed)
	}
	if o.ThinkCPU != "sleep" && o.ThinkCPU != "spin" {
		return replay.Options{}, usageErrorf("--think-cpu %q: want sleep or spin", o.ThinkCPU)
	}
	var roundTrip time.Duration
	if o.RoundTrip != "auto" {
		if roundTrip, err = time.ParseDuration(o.RoundTrip); err != nil || roundTrip < 0 {
			return replay.Options{}, usageErrorf("--round-trip %q: want auto or a duration such as 30us", o.RoundTrip)
		}
	}
	if o.Repeat < 1 {
		return replay.Options{}, usageErrorf("--repeat %d: want at least 1", o.Repeat)
	}
	if o.Copies < 1 || o.Copies > maxCopies {
		return replay.Options{}, usageErrorf("--copies %d: want 1 to %d", o.Copies, maxCopies)
	}
	if o.Copies > 1 && (len(o.PrepareVia) > 0 || o.BetweenRuns != "") {
		return replay.Options{}, usageErrorf("--copies prepares each copy in its own part of the target: it does not go with --prepare-via or --between-runs")
	}
	switch o.Prepare {
	case "auto", "skip", "only":
	default:
		return replay.Options{}, usageErrorf("--prepare %q: want auto, skip or only", o.Prepare)
	}
	if o.Fill != "zero" && o.Fill != "random" {
		return replay.Options{}, usageErrorf("--fill %q: want zero or random", o.Fill)
	}
	if len(o.Targets) == 0 && !o.DryRun {
		return replay.Options{}, usageErrorf("replay needs at least one --target")
	}
	switch o.Progress {
	case "auto", "always", "never":
	default:
		return replay.Options{}, usageErrorf("--progress %q: want auto, always or never", o.Progress)
	}
	if !slices.Contains(replays3.Profiles, o.S3.Profile) {
		return replay.Options{}, usageErrorf("--s3-profile %q: want %s", o.S3.Profile, strings.Join(replays3.Profiles, ", "))
	}
	if err := o.check(); err != nil {
		return replay.Options{}, err
	}
	if len(o.S3Opts) > 0 {
		o.S3.Params = map[string]string{}
		for _, kv := range o.S3Opts {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return replay.Options{}, usageErrorf("--s3-opt %q: want key=value", kv)
			}
			o.S3.Params[k] = v
		}
	}
	if flag := o.s3Only(); flag != "" && !slices.ContainsFunc(append(slices.Clone(o.Targets), o.PrepareVia...), s3store.IsURL) && !o.DryRun {
		return replay.Options{}, usageErrorf("%s applies to s3:// targets, and none is given (a directory target is replayed through its file system, whatever serves it)", flag)
	}
	return replay.Options{
		Timing: timing, Speed: o.Speed, RoundTrip: roundTrip, ThinkSpin: o.ThinkCPU == "spin", OnDiverge: policy,
		KeepRunDelay: o.KeepRunDelay, NativeRuntime: o.NativeRuntime,
		Plan: replay.PlanOptions{NoFold: o.NoFold}, FillRandom: o.Fill == "random", Log: e.log,
	}, nil
}

// s3Only names an S3 flag given a value other than its default, or returns "".
func (o *replayOptions) s3Only() string {
	switch {
	case len(o.S3Opts) > 0:
		return "--s3-opt"
	case o.S3.Profile != "mountpoint":
		return "--s3-profile"
	case o.S3.Endpoint != "":
		return "--s3-endpoint"
	case o.S3.Region != "":
		return "--s3-region"
	case o.S3.AWSProfile != "":
		return "--aws-profile"
	case o.S3.Keep:
		return "--keep"
	}
	return ""
}

// dryRun plays the trace on a model of the starting state and lists the ops whose
// recorded outcome cannot be reproduced (--dry-run).
func dryRun(ctx context.Context, e *env, tracePath string, st *replay.State, po replay.PlanOptions) error {
	r, err := openTrace(tracePath)
	if err != nil {
		return err
	}
	problems, n, err := replay.Check(cancellable{r, ctx}, st, po)
	_ = r.Close()
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted: dry run not finished")
	}
	if err != nil {
		return err
	}
	if n == 0 {
		_, _ = fmt.Fprintln(e.stdout, "dry run: every op's recorded outcome is reproducible from the starting state")
		return nil
	}
	_, _ = fmt.Fprintf(e.stdout, "dry run: %d ops cannot reproduce their recorded outcome:\n", n)
	shown := 0
	for _, p := range problems {
		_, _ = fmt.Fprintf(e.stdout, "  %s\n", termsafe.Text(p.String()))
		shown += p.Ops()
	}
	if n > shown {
		_, _ = fmt.Fprintf(e.stdout, "  ... and %d more\n", n-shown)
	}
	return nil
}

// replayTarget is an opened --target.
type replayTarget struct {
	b replay.Backend
	// requests counts the backend's own requests (S3); nil for a directory.
	requests replay.RequestCounter
	// dir is a directory target's path, whose storage client is sampled; "" for S3 (the
	// replayer is the client).
	dir string
	// start is how the run starts (startLabel): "cold", "warm" or "".
	start string
	// copies are the targets of the copies replayed at once (--copies), each a part of b.
	copies []replayTarget
}

// preparedWhere names where the starting state of t was made.
func preparedWhere(t replayTarget, store replay.Backend) string {
	if store != nil {
		return store.Target().Path + " (behind " + t.b.Target().Path + ")"
	}
	return t.b.Target().Path
}

// openTargets opens every target, after checkPlaces, before touching any of them: a
// target must be empty unless --scratch or --prepare=skip. The targets opened are
// returned with the error too, for closeTargets.
func openTargets(ctx context.Context, e *env, o *replayOptions) ([]replayTarget, error) {
	var targets []replayTarget
	s3o := o.S3
	s3o.Log = e.log
	for _, t := range o.Targets {
		b, rc, err := openTarget(ctx, t, s3o)
		if err != nil {
			return targets, err
		}
		rt := replayTarget{b: b, requests: rc}
		if !s3store.IsURL(t) {
			rt.dir = t
		}
		targets = append(targets, rt)
		if o.Prepare == "skip" || len(o.PrepareVia) > 0 { // a store is checked instead (openStores)
			continue
		}
		empty, err := b.IsEmpty(ctx)
		if err != nil {
			return targets, fmt.Errorf("replay: target %s: %w", t, err)
		}
		if !empty && !o.Scratch {
			return targets, usageErrorf("--target %s is not empty: replay deletes what is there before each run; pass --scratch if it is a scratch area", t)
		}
	}
	if o.Copies > 1 {
		for i := range targets {
			cs, err := openCopies(ctx, e, o, o.Targets[i])
			targets[i].copies = cs
			if err != nil {
				return targets, err
			}
		}
	}
	return targets, nil
}

// checkPlaces checks the places a replay writes, before the trace is read and before any
// of them is touched: the results directory exists and can be written; a directory target
// exists, is no symbolic link and holds neither the trace nor the results (replay empties
// its targets); there is one --prepare-via store per target, each a directory under the
// same rules, or s3://.
func (o *replayOptions) checkPlaces(tracePath, prefix string) error {
	if err := checkOutputDir(prefix); err != nil {
		return usageErrorf("-o %s: %v", prefix, err)
	}
	absPrefix := filepath.Join(resolvePath(filepath.Dir(prefix)), filepath.Base(prefix))
	if rest, ok := strings.CutPrefix(resolvePath(tracePath), absPrefix); ok && resultName.MatchString(rest) {
		return usageErrorf("-o %s: the results would overwrite the trace %s: choose another prefix", prefix, tracePath)
	}
	for _, t := range o.Targets {
		if s3store.IsURL(t) {
			if err := checkS3Place("--target", t, o.S3); err != nil {
				return err
			}
			continue
		}
		// A symbolic link is refused, not followed: replay deletes what is in its target
		// (with --scratch) and acts inside it, and a link may lead anywhere.
		if lt := strings.TrimRight(t, "/"); lt != "" {
			if fi, err := os.Lstat(lt); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				return usageErrorf("--target %s is a symbolic link to %s: replay empties its target and acts inside it; name the directory itself", t, resolvePath(t))
			}
		}
		fi, err := os.Stat(t)
		if err != nil {
			return usageErrorf("--target %s: %v", t, err)
		}
		if !fi.IsDir() {
			return usageErrorf("--target %s: not a directory", t)
		}
		if o.Prepare != "skip" {
			if err := holdsNoInput(t, "--target", tracePath, prefix); err != nil {
				return err
			}
		}
	}
	if err := checkApart(o.Targets); err != nil {
		return err
	}
	return o.checkStores(tracePath, prefix)
}

// checkApart refuses two directory targets where one holds the other: preparing the outer
// one deletes the inner one, which the replay then cannot open. The same directory or
// s3:// prefix given twice (with different settings, say) is prepared again before each
// run, and an s3:// prefix holds no directory that could go.
func checkApart(targets []string) error {
	for i, a := range targets {
		for _, b := range targets[i+1:] {
			if s3store.IsURL(a) || s3store.IsURL(b) {
				continue
			}
			pa, pb := resolvePath(a), resolvePath(b)
			if pa != pb && (sysinfo.Within(pa, pb) || sysinfo.Within(pb, pa)) {
				return usageErrorf("--target %s and --target %s: one holds the other, and preparing it deletes the other", a, b)
			}
		}
	}
	return nil
}

// resultName matches what replay appends to its -o prefix: .tN.rM, a copy's .cK, and
// the files' suffixes.
var resultName = regexp.MustCompile(`^\.t[0-9]+\.r[0-9]+(\.c[0-9]+)?\.(iotap|json|requests\.json|copies\.json)$`)

// checkS3Place checks an s3:// target or store (named by flag) without reaching S3: its
// URL (a bucket and a key prefix, which replay empties) and the profile and settings it is
// replayed with. Each error is a usage error.
func checkS3Place(flag, spec string, o replays3.Options) error {
	u, _, _ := strings.Cut(spec, "?")
	_, prefix, err := s3store.ParseURL(u)
	if err != nil {
		return usageErrorf("%s: %v", flag, err)
	}
	if strings.Trim(prefix, "/") == "" {
		return usageErrorf("%s %s: give a key prefix (s3://bucket/some/prefix): replay deletes what is below it", flag, spec)
	}
	if err := replays3.CheckSettings(spec, o); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}

// holdsNoInput checks that dir, which replay empties (a --target, or a --prepare-via
// store, named by flag), holds neither the trace nor the results.
func holdsNoInput(dir, flag, tracePath, prefix string) error {
	abs := resolvePath(dir)
	if sysinfo.Within(resolvePath(tracePath), abs) {
		return usageErrorf("%s %s holds the trace %s, and replay empties it", flag, dir, tracePath)
	}
	absPrefix := filepath.Join(resolvePath(filepath.Dir(prefix)), filepath.Base(prefix))
	if sysinfo.Within(absPrefix, abs) {
		return usageErrorf("%s %s would hold the results (%s.*), and replay empties it: choose -o elsewhere", flag, dir, prefix)
	}
	return nil
}

func closeTargets(e *env, targets []replayTarget) {
	for _, t := range targets {
		closeTargets(e, t.copies)
		if err := t.b.Close(); err != nil {
			e.log.Warn("replay: close target", "target", t.b.Target().Path, "err", err)
		}
	}
}

// replayTargets prepares and replays each target --repeat times, targets interleaved,
// printing each run's summary. It returns each target's replay traces and the
// divergences and runs counted.
func replayTargets(ctx context.Context, e *env, o *replayOptions, tracePath, prefix string, targets []replayTarget, stores []replay.Backend, st *replay.State, ro replay.Options) (results [][]string, diverged, runs uint64, err error) {
	results = make([][]string, len(targets))
	for rep := 0; rep < o.Repeat; rep++ {
		for i := range targets {
			if err := ctx.Err(); err != nil {
				return results, diverged, runs, err
			}
			base := fmt.Sprintf("%s.t%d.r%d", prefix, i+1, rep+1)
			// The run's header comes first, so that what is logged while the target is
			// prepared and replayed (divergences, warnings) stands under it.
			switch n := len(targets[i].copies); {
			case o.Prepare == "only":
			case n > 0:
				_, _ = fmt.Fprintf(e.stdout, "run %d/%d, target %s: %d copies at once: %s.c{1..%d}.iotap, figures in %s.copies.json\n",
					rep+1, o.Repeat, termsafe.Text(targets[i].b.Target().Path), n, termsafe.Text(base), n, termsafe.Text(base))
			default:
				_, _ = fmt.Fprintf(e.stdout, "run %d/%d, target %d: %s\n", rep+1, o.Repeat, i+1, termsafe.Text(base+".iotap"))
			}
			if len(targets[i].copies) > 0 {
				if err := prepareCopies(ctx, o, targets[i], st, ro); err != nil {
					return results, diverged, runs, err
				}
			} else if err := prepareRun(ctx, e, o, targets, i, rep, stores[i], st, ro); err != nil {
				return results, diverged, runs, err
			}
			t := targets[i] // after prepareRun: --between-runs opens a directory target again
			t.start = startLabel(o, i, rep)
			if o.Prepare == "only" {
				_, _ = fmt.Fprintf(e.stdout, "prepared %s\n", preparedWhere(t, stores[i]))
				continue
			}
			if o.DropCaches {
				dropCaches(e)
			}
			if len(t.copies) > 0 {
				sums, err := replayCopies(ctx, e, o, tracePath, base, t, st, ro, rep)
				for k, sum := range sums {
					if sum != nil {
						results[i] = append(results[i], fmt.Sprintf("%s.c%d.iotap", base, k+1))
						diverged += sum.Divergences
						runs++
					}
				}
				if errors.Is(err, context.Canceled) {
					return results, diverged, runs, errors.New("interrupted: the result traces and summaries above cover the ops replayed until then")
				}
				if err != nil {
					return results, diverged, runs, err
				}
				continue
			}
			sum, sampled, err := replayOnce(ctx, e, o, tracePath, base, t, st, ro, rep)
			if sum != nil {
				var out strings.Builder
				sum.Print(&out)
				procsample.WriteSummaries(&out, sampled, uint64(sum.ReplayedRead+sum.ReplayedWrite), "replayer")
				if sum.Interrupted {
					_, _ = fmt.Fprintf(&out, "  INTERRUPTED  the run stopped before the trace's end: %d of its %d replay ops were issued\n", sum.ReplayedOps, st.Ops)
				}
				_, _ = io.WriteString(e.stdout, termsafe.Text(out.String())) // the examples name the job's files
				results[i] = append(results[i], base+".iotap")
				diverged += sum.Divergences
				runs++
			}
			if errors.Is(err, context.Canceled) {
				return results, diverged, runs, errors.New("interrupted: the result trace and summary above cover the ops replayed until then")
			}
			if err != nil {
				return results, diverged, runs, err
			}
		}
		if o.Prepare == "only" {
			return results, diverged, runs, nil
		}
	}
	return results, diverged, runs, nil
}

// checkOutputDir checks that the directory of the result prefix exists and can be
// written, before any target is touched.
func checkOutputDir(prefix string) error {
	dir := filepath.Dir(prefix)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("results directory %s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".iotap-probe-*")
	if err != nil {
		return fmt.Errorf("results directory %s cannot be written: %w", dir, err)
	}
	_ = f.Close()
	return os.Remove(f.Name())
}

// resolvePath returns p absolute, with symbolic links resolved where it exists.
func resolvePath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// openTarget opens a --target: s3://bucket/prefix for the S3 backend, which also counts
// its requests, or a directory.
func openTarget(ctx context.Context, spec string, o replays3.Options) (replay.Backend, replay.RequestCounter, error) {
	if s3store.IsURL(spec) {
		b, err := replays3.Open(ctx, spec, o)
		if err != nil {
			return nil, nil, err
		}
		return b, b, nil
	}
	d, err := replay.OpenDir(spec)
	if err != nil {
		return nil, nil, err
	}
	return d, nil, nil
}

func openTrace(path string) (*trace.Reader, error) {
	r, err := trace.Open(path)
	if err != nil {
		return nil, fmt.Errorf("replay: open trace: %w", err)
	}
	return r, nil
}

// Replay --speed bounds: beyond them a scaled think time or start offset loses its
// meaning (it overflows, or rounds to nothing).
const (
	minSpeed = 1e-3
	maxSpeed = 1e6
)

// traceDamage is what reading a whole trace found wrong with it.
type traceDamage struct {
	err     error  // the first damage, nil if none
	cut     bool   // only the tail is missing: the writer was killed or its disk filled
	note    string // what a replay of it does, for the user
	events  uint64 // events readable
	dropped string // the events its recorder dropped (droppedNote), "" if none
}

// cancellable is a trace whose Next fails once ctx is done: the passes over a trace that
// issue no I/O (the starting state, the dry run) end on SIGINT and SIGTERM too.
type cancellable struct {
	*trace.Reader
	ctx context.Context
}

func (c cancellable) Next() (*trace.Event, error) {
	select {
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	default:
		return c.Reader.Next()
	}
}

func deriveState(ctx context.Context, path string, po replay.PlanOptions) (*replay.State, traceDamage, error) {
	r, err := openTrace(path)
	if err != nil {
		return nil, traceDamage{}, err
	}
	defer func() { _ = r.Close() }()
	st, err := replay.DeriveState(cancellable{r, ctx}, po)
	if err != nil {
		return nil, traceDamage{}, err
	}
	d := traceDamage{cut: r.CutShort(), events: r.EventsRead()}
	if f, ok := r.Footer(); ok {
		d.dropped = droppedNote(path, f)
	}
	dmg := r.Damage()
	if len(dmg) == 0 {
		return st, d, nil
	}
	d.err = dmg[0]
	if d.cut {
		lost := "it ends at a chunk boundary"
		for _, x := range dmg {
			if errors.Is(x, trace.ErrTruncated) {
				lost = fmt.Sprintf("its last chunk is cut off (%v)", x)
			}
		}
		d.note = fmt.Sprintf("%s was cut short (no footer: its recorder was killed, or its disk filled); %s. Replaying the %d events before the cut: what the job did after it is missing from the trace and from the replay",
			path, lost, d.events)
	} else {
		d.note = fmt.Sprintf("%s is corrupt (%d problems, the first: %v); --force: replaying the %d readable events, the corrupt chunks' events are missing",
			path, len(dmg), dmg[0], d.events)
	}
	return st, d, nil
}

// replayOnce runs one replay onto t, writing base.iotap, base.json (fidelity summary) and,
// for a backend that counts requests (S3), base.requests.json. It returns the summary and
// what sampling saw of the storage client and the replayer.
func replayOnce(ctx context.Context, e *env, o *replayOptions, tracePath, base string, t replayTarget, st *replay.State, ro replay.Options, rep int) (*replay.Summary, []procsample.Summary, error) {
	b := t.b
	r, err := openTrace(tracePath)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = r.Close() }()
	h := replayHeader(r.Header(), b, tracePath, ro, rep)
	if t.start != "" {
		h.Labels = append(h.Labels, trace.Label{Key: "replay.start", Value: t.start})
	}
	w, err := trace.Create(base+".iotap", h, trace.WriterOptions{Logger: e.log})
	if err != nil {
		return nil, nil, fmt.Errorf("replay: create result: %w", err)
	}
	// Preparing (and earlier runs) left garbage in the heap: give it back to the system so
	// that the replayer's memory sampled during the run is the run's own.
	debug.FreeOSMemory()
	sampler := o.startSampling(e, w, t.dir)
	var done atomic.Uint64
	ro.Progress = &done
	stop := startProgress(e, o.Progress, int64(st.Ops), fmt.Sprintf("%s run %d", b.Target().Path, rep+1), &done)
	sum, runErr := replay.Run(ctx, r, b, w, ro)
	stop()
	if sum != nil && sum.Prediction != nil {
		w.SetPrediction(sum.Prediction.Figures())
	}
	var sampled []procsample.Summary
	if sampler != nil {
		sampled = sampler.Stop()
	}
	if err := w.Close(); err != nil && runErr == nil {
		runErr = fmt.Errorf("replay: write result: %w", err)
	}
	if sum != nil {
		if js, err := json.MarshalIndent(sum, "", "  "); err == nil {
			if err := private.WriteFile(base+".json", append(js, '\n')); err != nil && runErr == nil {
				runErr = fmt.Errorf("replay: write summary: %w", err)
			}
		}
	}
	if f, ok := r.Footer(); ok && rep == 0 {
		if f.Dropped > f.Lost {
			_, _ = fmt.Fprintf(e.stderr, "iotap replay: the recording dropped %d events (buffer full): ops on their handles and paths may diverge\n", f.Dropped-f.Lost)
		}
		if f.Lost > 0 {
			_, _ = fmt.Fprintf(e.stderr, "iotap replay: the recording ends early: its last %d events were lost when the trace could not be written (%s)\n", f.Lost, termsafe.Name(f.WriteError))
		}
	}
	if t.requests != nil {
		if err := s3req.Write(base+".requests.json", t.requests.TakeRequests()); err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil && errors.Is(runErr, replay.ErrDiverged) {
		return sum, sampled, &exitCodeError{code: exitError, err: runErr}
	}
	return sum, sampled, runErr // damage was found, and said, by deriveState
}

// traceNativeRuntime returns the job's native runtime the trace keeps (record
// --native-first or --native-runtime), 0 if none.
func traceNativeRuntime(tracePath string) time.Duration {
	r, err := openTrace(tracePath)
	if err != nil {
		return 0
	}
	defer func() { _ = r.Close() }()
	v, ok := r.Header().Label(report.NativeRuntimeLabel)
	if !ok {
		return 0
	}
	ns, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ns <= 0 {
		return 0
	}
	return time.Duration(ns)
}

// replayHeader is the header of a replay trace of tracePath (header src) onto b.
func replayHeader(src *trace.Header, b replay.Backend, tracePath string, ro replay.Options, rep int) trace.Header {
	h := trace.Header{
		Kind:         "replay",
		WallStart:    time.Now().UTC(),
		Hostname:     sysinfo.Hostname(),
		IotapVersion: version,
		Kernel:       sysinfo.KernelRelease(),
		Target:       b.Target(),
		Command:      src.Command,
		Labels: append(append([]trace.Label(nil), src.Labels...),
			trace.Label{Key: "replay.of", Value: tracePath},
			trace.Label{Key: "replay.timing", Value: ro.Timing.String()},
			trace.Label{Key: "replay.speed", Value: strconv.FormatFloat(ro.Speed, 'g', -1, 64)},
			trace.Label{Key: "replay.run", Value: strconv.Itoa(rep + 1)},
			trace.Label{Key: "replay.recorded_fstype", Value: src.Target.FSType}),
	}
	if sb, ok := b.(*replays3.Backend); ok && sb.Given() != "" {
		h.Labels = append(h.Labels, trace.Label{Key: "replay.s3_options", Value: sb.Given()})
	}
	return h
}

// startProgress shows a progress bar on stderr when it is a terminal (or always).
func startProgress(e *env, when string, total int64, desc string, done *atomic.Uint64) func() {
	show := when == "always"
	if when == "auto" {
		if f, ok := e.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			show = true
		}
	}
	if !show || total <= 0 {
		return func() {}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("ops"),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	// The bar's clock starts now: left to start at its first update, it divides the ops
	// done by then by a few microseconds.
	bar.StartWithoutRender()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				_ = bar.Set64(int64(done.Load()))
				_ = bar.Finish()
				return
			case <-t.C:
				_ = bar.Set64(int64(done.Load()))
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// compareTargets prints the comparison of the targets' replay traces, each target's
// repeats merged, the first target as the baseline: the verdict first, then per system
// call, as compare prints it.
func compareTargets(ctx context.Context, e *env, targets []string, results [][]string) error {
	var sides []*stats.Stats
	for _, files := range results {
		if len(files) == 0 {
			return nil
		}
		per, _, err := loadTraces(ctx, e, files, stats.Options{})
		if err != nil {
			return err
		}
		s := stats.New()
		for _, p := range per {
			s.Merge(p)
		}
		sides = append(sides, s)
	}
	c := report.Compare(targets, sides, 0.05)
	report.CompareCalls(c, sides) // a replay's events are calls: per system call, as compare does
	c.Forced = len(c.Mismatches) > 0
	var buf bytes.Buffer
	if err := report.WriteCompareText(&buf, c); err != nil {
		return fmt.Errorf("replay: render comparison: %w", err)
	}
	_, _ = fmt.Fprintln(e.stdout)
	_, err := e.stdout.Write(buf.Bytes())
	return err
}

// raiseNoFile raises the open-file soft limit to the hard limit: a trace may hold many
// handles open at once.
func raiseNoFile(e *env) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			e.log.Warn("replay: raise open-file limit", "err", err)
		}
	}
}

var dropWarned bool

// dropCaches writes back dirty data and drops the page cache (root only).
func dropCaches(e *env) {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0o200); err != nil && !dropWarned {
		dropWarned = true
		_, _ = fmt.Fprintf(e.stderr, "iotap replay: --drop-caches: %v (runs continue with a warm cache)\n", err)
	}
}

// downloadTrace copies an s3:// trace to a temporary file: replay reads its trace twice
// (starting state, then the replay itself).
func downloadTrace(ctx context.Context, url string) (string, func(), error) {
	rc, err := s3store.Open(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = rc.Close() }()
	f, err := os.CreateTemp("", "iotap-replay-*.iotap")
	if err != nil {
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	cleanup := func() { _ = os.Remove(f.Name()) }
	if _, err := io.Copy(f, rc); err != nil {
		_ = f.Close()
		cleanup()
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("replay: download %s: %w", url, err)
	}
	return f.Name(), cleanup, nil
}
