package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/replay"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// Spec is what a campaign replays, where, how often and how: the replay command's flags.
type Spec struct {
	// Trace is the recorded trace, a local file: it is read once for the starting state,
	// then once per run.
	Trace string
	// Output is the results' prefix (PREFIX.tT.rR.*); "" is Trace without ".iotap", plus
	// ".replay".
	Output string

	// Targets are where the trace is replayed: directories, or places Env.Places opens
	// (s3://bucket/prefix).
	Targets []string
	// Stores are the places behind the targets (--prepare-via), one per target in the same
	// order, or none: the starting state is made in a store, not through its target.
	Stores []string
	// BetweenRuns is a shell command run before each run, after the starting state is
	// made ("": none).
	BetweenRuns string
	Repeat      int    // runs per target, the targets interleaved
	Copies      int    // copies of the job per run, at once, copy K in TARGET/copyK
	Prepare     string // the starting state: "auto" (made before each run), "skip" (there already) or "only" (made, no run)
	Scratch     bool   // the targets and stores are scratch areas: what they hold may be deleted
	DropCaches  bool   // sync and drop the page cache before each run (root)
	DryRun      bool   // list the ops that cannot reproduce their outcome; touch no place
	Force       bool   // replay the readable events of a corrupt trace
	NoCompare   bool   // leave out the comparison of several targets
	Progress    string // a progress bar on Env.Stderr: "auto" (when it is a terminal), "always" or "never"

	// How each run replays (replay.Options).
	Timing        string        // replay.ParseTiming
	Speed         float64       // think times and start offsets scaled by 1/Speed
	RoundTrip     string        // the recording layer's round trip: "auto" (from the trace) or a duration
	ThinkCPU      string        // what a thread does in its think time: "sleep" or "spin"
	KeepRunDelay  bool          // think times keep the time a recorded thread waited for a CPU
	NativeRuntime time.Duration // the job's runtime without the layer; 0: the one the trace keeps
	OnDiverge     string        // replay.ParseDivergePolicy
	Fill          string        // data written: "zero" or "random"
	NoFold        bool          // replay every lookup as its own lstat
}

// Env is what a campaign needs from the program that runs it.
type Env struct {
	// Places opens the targets, their copies and the stores, and checks the ones that are
	// not directories.
	Places Places
	// Sample, if set, starts sampling the storage client of a directory target (dir; ""
	// for another place) and the replayer into a run's replay trace w. It returns nil when
	// nothing is sampled.
	Sample func(w *trace.Writer, dir string) *procsample.Sampler
	// Load aggregates replay traces, one Stats each, for the figures of copies, the
	// comparison and the cold/warm table; it reports damage it finds itself.
	Load func(ctx context.Context, files []string) ([]*stats.Stats, error)
	// Stdout receives the runs' headers, summaries and tables; Stderr warnings, notes and
	// the progress bar.
	Stdout, Stderr io.Writer
	Log            *slog.Logger
	// Version is iotap's version, for the replay traces' headers.
	Version string
}

// Places opens the places a campaign names. The replay command implements it: it chooses
// the backend of each place by its URL scheme (a directory, or S3 through replay/s3 for
// s3://), so that the campaign speaks no S3.
type Places interface {
	// Remote reports whether spec names a place that is no directory (s3://bucket/prefix):
	// nothing to stat, create or sample, and its parts (copies) are key prefixes.
	Remote(spec string) bool
	// CheckRemote checks a remote place, given with flag, without reaching it.
	CheckRemote(flag, spec string) error
	// Open opens a place, a directory or a remote one.
	Open(ctx context.Context, spec string) (replay.Backend, error)
	// Labels are what a replay trace onto b keeps in its header about how b was opened.
	Labels(b replay.Backend) []trace.Label
}

// ErrUsage marks an error in a Spec, a value or a place it names: a command reports it as
// a usage error.
var ErrUsage = errors.New("usage")

// ErrDamaged marks a campaign on a damaged trace: refused (a corrupt one, without
// Spec.Force), or run on its readable events (Result.Damage).
var ErrDamaged = errors.New("trace damaged")

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Bounds of Spec values.
const (
	// Speed: beyond these a scaled think time or start offset loses its meaning (it
	// overflows, or rounds to nothing).
	minSpeed = 1e-3
	maxSpeed = 1e6
	// maxCopies bounds Copies: each copy is a goroutine team per traced thread, an open
	// trace and a target of its own.
	maxCopies = 1024
)

// Campaign is a checked Spec, ready to run.
type Campaign struct {
	spec   Spec
	env    Env
	prefix string         // the results' prefix
	engine replay.Options // each run's options; the round trip and workers come from the trace
	// autoRoundTrip: the round trip is the one the trace's recorder measured (--round-trip auto).
	autoRoundTrip bool
}

// New checks s before anything is read or touched: its values, then (unless DryRun) the
// places it writes. Its errors wrap ErrUsage, or are those of env.Places.CheckRemote.
func New(s Spec, env Env) (*Campaign, error) {
	if env.Places == nil || env.Load == nil {
		return nil, errors.New("campaign: Env.Places and Env.Load are required")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	c := &Campaign{spec: s, env: env}
	if err := c.checkValues(); err != nil {
		return nil, err
	}
	c.prefix = s.Output
	if c.prefix == "" {
		c.prefix = strings.TrimSuffix(s.Trace, ".iotap") + ".replay"
	}
	if !s.DryRun {
		// Before the trace is read, which takes a while on a large one.
		if err := c.checkPlaces(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkValues checks the values of the spec and sets the engine's options (the round trip
// still to be estimated when it is auto).
func (c *Campaign) checkValues() error {
	s := &c.spec
	timing, err := replay.ParseTiming(s.Timing)
	if err != nil {
		return usageErrorf("--timing: %v", err)
	}
	policy, err := replay.ParseDivergePolicy(s.OnDiverge)
	if err != nil {
		return usageErrorf("--on-diverge: %v", err)
	}
	if !(s.Speed >= minSpeed && s.Speed <= maxSpeed) { // NaN fails too
		return usageErrorf("--speed %g: want a factor from %g to %g", s.Speed, minSpeed, maxSpeed)
	}
	if s.ThinkCPU != "sleep" && s.ThinkCPU != "spin" {
		return usageErrorf("--think-cpu %q: want sleep or spin", s.ThinkCPU)
	}
	var roundTrip time.Duration
	c.autoRoundTrip = s.RoundTrip == "auto"
	if !c.autoRoundTrip {
		if roundTrip, err = time.ParseDuration(s.RoundTrip); err != nil || roundTrip < 0 {
			return usageErrorf("--round-trip %q: want auto or a duration such as 30us", s.RoundTrip)
		}
	}
	if s.Repeat < 1 {
		return usageErrorf("--repeat %d: want at least 1", s.Repeat)
	}
	if s.Copies < 1 || s.Copies > maxCopies {
		return usageErrorf("--copies %d: want 1 to %d", s.Copies, maxCopies)
	}
	if s.Copies > 1 && (len(s.Stores) > 0 || s.BetweenRuns != "") {
		return usageErrorf("--copies prepares each copy in its own part of the target: it does not go with --prepare-via or --between-runs")
	}
	switch s.Prepare {
	case "auto", "skip", "only":
	default:
		return usageErrorf("--prepare %q: want auto, skip or only", s.Prepare)
	}
	if s.Fill != "zero" && s.Fill != "random" {
		return usageErrorf("--fill %q: want zero or random", s.Fill)
	}
	if len(s.Targets) == 0 && !s.DryRun {
		return usageErrorf("replay needs at least one --target")
	}
	switch s.Progress {
	case "auto", "always", "never":
	default:
		return usageErrorf("--progress %q: want auto, always or never", s.Progress)
	}
	c.engine = replay.Options{
		Timing: timing, Speed: s.Speed, RoundTrip: roundTrip, ThinkSpin: s.ThinkCPU == "spin", OnDiverge: policy,
		KeepRunDelay: s.KeepRunDelay, NativeRuntime: s.NativeRuntime,
		Plan: replay.PlanOptions{NoFold: s.NoFold}, FillRandom: s.Fill == "random", Log: c.env.Log,
	}
	return nil
}

// checkPlaces checks the places a campaign writes, before the trace is read and before any
// of them is touched: the results directory exists and can be written; a directory target
// exists, is no symbolic link and holds neither the trace nor the results (a campaign
// empties its targets); there is one store per target, each a directory under the same
// rules, or a remote place.
func (c *Campaign) checkPlaces() error {
	s := &c.spec
	if err := checkOutputDir(c.prefix); err != nil {
		return usageErrorf("-o %s: %v", c.prefix, err)
	}
	absPrefix := filepath.Join(resolvePath(filepath.Dir(c.prefix)), filepath.Base(c.prefix))
	if rest, ok := strings.CutPrefix(resolvePath(s.Trace), absPrefix); ok && resultName.MatchString(rest) {
		return usageErrorf("-o %s: the results would overwrite the trace %s: choose another prefix", c.prefix, s.Trace)
	}
	for _, t := range s.Targets {
		if c.env.Places.Remote(t) {
			if err := c.env.Places.CheckRemote("--target", t); err != nil {
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
		if s.Prepare != "skip" {
			if err := c.holdsNoInput(t, "--target"); err != nil {
				return err
			}
		}
	}
	if err := c.checkApart(); err != nil {
		return err
	}
	return c.checkStores()
}

// checkApart refuses two directory targets where one holds the other: preparing the outer
// one deletes the inner one, which the replay then cannot open. The same directory or
// remote place given twice (with different settings, say) is prepared again before each
// run, and a remote place holds no directory that could go.
func (c *Campaign) checkApart() error {
	targets := c.spec.Targets
	for i, a := range targets {
		for _, b := range targets[i+1:] {
			if c.env.Places.Remote(a) || c.env.Places.Remote(b) {
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

// checkStores checks the stores: one per target, not with Prepare "skip"; a directory
// store must exist, be no symbolic link, and hold neither the trace nor the results, as
// the campaign empties it.
func (c *Campaign) checkStores() error {
	s := &c.spec
	if len(s.Stores) == 0 {
		return nil
	}
	if len(s.Stores) != len(s.Targets) {
		return usageErrorf("--prepare-via given %d times for %d targets: give one store per --target, in the same order", len(s.Stores), len(s.Targets))
	}
	if s.Prepare == "skip" {
		return usageErrorf("--prepare-via makes the starting state: it does not go with --prepare skip")
	}
	for _, spec := range s.Stores {
		if c.env.Places.Remote(spec) {
			if err := c.env.Places.CheckRemote("--prepare-via", spec); err != nil {
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
		if err := c.holdsNoInput(spec, "--prepare-via"); err != nil {
			return err
		}
	}
	return nil
}

// holdsNoInput checks that dir, which the campaign empties (a target or a store, named by
// flag), holds neither the trace nor the results.
func (c *Campaign) holdsNoInput(dir, flag string) error {
	abs := resolvePath(dir)
	if sysinfo.Within(resolvePath(c.spec.Trace), abs) {
		return usageErrorf("%s %s holds the trace %s, and replay empties it", flag, dir, c.spec.Trace)
	}
	absPrefix := filepath.Join(resolvePath(filepath.Dir(c.prefix)), filepath.Base(c.prefix))
	if sysinfo.Within(absPrefix, abs) {
		return usageErrorf("%s %s would hold the results (%s.*), and replay empties it: choose -o elsewhere", flag, dir, c.prefix)
	}
	return nil
}

// resultName matches what a campaign appends to its results prefix: .tN.rM, a copy's
// .cK, and the files' suffixes.
var resultName = regexp.MustCompile(`^\.t[0-9]+\.r[0-9]+(\.c[0-9]+)?\.(iotap|json|requests\.json|copies\.json)$`)

// checkOutputDir checks that the directory of the results prefix exists and can be
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
