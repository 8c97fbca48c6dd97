// The record spec, the recorder's API: what the user asked for, checked and resolved into
// the plan the serving process receives.

package recorder

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
)

// Spec is what the user asked for: the flags of `iotap record` and `iotap mount`, as they
// give them. Record and Mount check it before anything is mounted or run. Its errors name
// those flags, since that is where a user corrects them.
type Spec struct {
	// Target is the directory to trace ("": the current directory).
	Target string
	// MountAt is where the traced view is exposed; "" traces Target in place, in a mount
	// namespace of the recorder's own (record only, as root).
	MountAt string
	// Output is the trace: a file, whose name may hold placeholders (%j Slurm job id, %n
	// node name, %t task id, %h host name, %p pid, %%), or an s3:// URL. "" is
	// iotap-<UTC time>.iotap in the current directory, or beside the target when that
	// directory is inside it.
	Output string
	// Store is the S3 account, region and endpoint of an s3:// Output.
	Store TraceStore
	// Cache is the fidelity mode: "none" (every call reaches the layer at its own size) or
	// "kernel" (the kernel's caches on).
	Cache string
	// Labels are key=value labels kept in the trace's header.
	Labels []string
	// Include and Exclude are globs of the paths recorded (relative to the target).
	Include, Exclude []string
	// UIDs and Comms record only the calls by these users and process names.
	UIDs  []uint32
	Comms []string
	// StatsInterval is how often a live line is printed on Env.Stderr (0: never; SIGUSR1
	// prints one at any time); StatsFormat is its format, "text" or "json".
	StatsInterval time.Duration
	StatsFormat   string
	// Metrics is the address Prometheus metrics are served on while the layer is mounted:
	// PORT or :PORT (127.0.0.1 only), or HOST:PORT ("": none).
	Metrics      string
	DropWhenFull bool // drop events instead of slowing the job when the trace buffer is full
	AllowOther   bool // let other users use the traced view
	FUSEDebug    bool // print every FUSE request
	ServerProcs  int  // GOMAXPROCS of the serving process (0: fusefs.DefaultServerProcs)
	// Legs is how the FUSE legs outside the layer are measured: "kernel", "probe" or "auto"
	// ("" is auto).
	Legs string
	// Data is how reads and writes are recorded: "kernel" (kernel FUSE passthrough serves
	// them from the backing files at native speed, and the kernel times each call in the
	// application's thread), "layer" (each is a FUSE request the layer serves and times),
	// or "auto" ("": kernel where this machine allows it, else layer, saying why).
	Data string
	// Sample is what is sampled into the trace besides its events.
	Sample Sampling

	// Record only.
	Argv          []string      // the job's command
	NativeFirst   bool          // run the job once without the layer first, and keep its runtime
	NativeRuntime time.Duration // the job's runtime without the layer, measured elsewhere
}

// TraceStore is the S3 account, region and endpoint of an s3:// trace; unset, each comes
// from the environment as the AWS SDK reads it.
type TraceStore struct {
	Endpoint   string `json:",omitempty"`
	Region     string `json:",omitempty"`
	AWSProfile string `json:",omitempty"`
}

// Env is what the recorder needs from the program that runs it.
type Env struct {
	// Stdin, Stdout and Stderr are the job's streams; Stderr also gets the recorder's
	// notes, live lines and summary.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Log            *slog.Logger
	// Version is iotap's version, for the trace's header and the metrics.
	Version string
}

func (e *Env) defaults() {
	if e.Stdin == nil {
		e.Stdin = strings.NewReader("")
	}
	if e.Stdout == nil {
		e.Stdout = io.Discard
	}
	if e.Stderr == nil {
		e.Stderr = io.Discard
	}
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
}

// ErrUsage marks an error in a Spec: a command reports it as a usage error.
var ErrUsage = errors.New("usage")

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// ExitError is a recording's outcome as an exit code: the job's (its exit status, or 127
// for a command not found), or the recorder's. Err, when set, is what to print.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitError is the recorder's exit code for a failure of its own.
const exitError = 1

// Kinds of recording, for messages and the trace's header.
const (
	kindRecord = "record"
	kindMount  = "mount"
)

// plan is a checked Spec with its paths resolved: everything the serving process needs.
// Record hands it to the recorder it re-executes (as JSON); Mount serves it itself.
type plan struct {
	Target        string // absolute target path, as the user named it
	RealTarget    string // Target with symlinks resolved
	MountPoint    string // where the layer is mounted (== Target when in place)
	InPlace       bool
	Output        string // absolute trace path, or an s3:// URL
	Argv          []string
	Dir           string // job working directory
	Labels        []trace.Label
	Cache         string
	Include       []string
	Exclude       []string
	UIDs          []uint32
	Comms         []string
	AllowOther    bool
	FUSEDebug     bool
	StatsInterval time.Duration
	StatsFormat   string // "text" or "json"
	// Metrics is the address the metrics are served on ("" for none); the recorder gets its
	// listener, bound by Record before anything is mounted, as descriptor 4.
	Metrics      string
	DropWhenFull bool
	ServerProcs  int    // GOMAXPROCS while serving (0: fusefs.DefaultServerProcs)
	Legs         string // "auto", "kernel" or "probe"
	Data         string // "auto", "kernel" or "layer"
	Kind         string // kindRecord or kindMount
	Sample       Sampling
	Store        TraceStore
	Version      string // iotap's
	Started      int64  // trace.Now() when the command began: the debug timeline's origin
}

// timeline is the debug timeline of this plan's recording.
func (p *plan) timeline(log logger) timeline { return timeline{log: log, origin: p.Started} }

func (p *plan) fuseOptions(log *slog.Logger) fusefs.Options {
	return fusefs.Options{
		Cache:      fusefs.CacheMode(p.Cache),
		AllowOther: p.AllowOther,
		Debug:      p.FUSEDebug,
		Logger:     log,
		Include:    p.Include,
		Exclude:    p.Exclude,
		UIDs:       p.UIDs,
		Comms:      p.Comms,
		IgnoreSelf: true,
	}
}

// minStatsInterval is the shortest StatsInterval.
const minStatsInterval = 10 * time.Millisecond

// Test hooks.
var (
	fuseAvailable = fusefs.Available
	geteuid       = os.Geteuid
	nowUTC        = func() time.Time { return time.Now().UTC() }
)

// check checks s and resolves its paths, without mounting anything.
func (s *Spec) check(kind, version string) (*plan, error) {
	switch s.Cache {
	case "none", "kernel":
	case "":
		s.Cache = "none"
	default:
		return nil, usageErrorf("--cache must be none or kernel, not %q", s.Cache)
	}
	if s.StatsInterval < 0 {
		return nil, usageErrorf("--stats-interval must not be negative")
	}
	if s.StatsInterval > 0 && s.StatsInterval < minStatsInterval {
		// Shorter, the live lines would flood stderr and take CPU from the job.
		return nil, usageErrorf("--stats-interval %v: want at least %v (or 0 for none)", s.StatsInterval, minStatsInterval)
	}
	switch s.StatsFormat {
	case "text", "json":
	case "":
		s.StatsFormat = "text"
	default:
		return nil, usageErrorf("--stats-format must be text or json, not %q", s.StatsFormat)
	}
	metricsAt, err := metricsAddr(s.Metrics)
	if err != nil {
		return nil, err
	}
	if s.ServerProcs < 0 {
		return nil, usageErrorf("--server-procs must not be negative")
	}
	switch s.Legs {
	case "auto", "kernel", "probe":
	case "":
		s.Legs = "auto"
	default:
		return nil, usageErrorf("--legs must be auto, kernel or probe, not %q", s.Legs)
	}
	switch s.Data {
	case "auto", "kernel", "layer":
	case "":
		s.Data = "auto"
	default:
		return nil, usageErrorf("--data must be auto, kernel or layer, not %q", s.Data)
	}
	if s.Data == "kernel" && s.Cache == "kernel" {
		return nil, usageErrorf("--data kernel needs --cache none: --cache kernel caches writes in the kernel, which kernel passthrough excludes")
	}
	if s.Data == "kernel" && s.Legs == "probe" {
		return nil, usageErrorf("--data kernel times reads and writes in the kernel, which --legs probe turns off")
	}
	if err := s.Sample.Check(); err != nil {
		return nil, err
	}
	var labels []trace.Label
	for _, l := range s.Labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, usageErrorf("label %q is not key=value", l)
		}
		labels = append(labels, trace.Label{Key: k, Value: v})
	}
	for _, g := range append(append([]string(nil), s.Include...), s.Exclude...) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, usageErrorf("bad glob %q in --include/--exclude: %v", g, err)
		}
	}
	p := &plan{
		Cache: s.Cache, Include: s.Include, Exclude: s.Exclude, UIDs: s.UIDs, Comms: s.Comms,
		AllowOther: s.AllowOther, FUSEDebug: s.FUSEDebug, StatsInterval: s.StatsInterval, StatsFormat: s.StatsFormat,
		Metrics: metricsAt, DropWhenFull: s.DropWhenFull, ServerProcs: s.ServerProcs, Kind: kind, Sample: s.Sample,
		Legs: s.Legs, Data: s.Data, Store: s.Store, Version: version, Labels: labels,
	}
	p.Labels = append(p.Labels, slurmLabels(os.Getenv)...)

	target := s.Target
	if target == "" {
		target = "."
	}
	if p.Target, p.RealTarget, err = checkDir(target, "target"); err != nil {
		return nil, err
	}
	if s.MountAt != "" {
		var realMnt string
		if p.MountPoint, realMnt, err = checkDir(s.MountAt, "mount point"); err != nil {
			return nil, err
		}
		if sysinfo.Within(realMnt, p.RealTarget) || sysinfo.Within(p.RealTarget, realMnt) {
			return nil, fmt.Errorf("mount point %s and target %s must not contain each other", p.MountPoint, p.Target)
		}
		if m, busy, err := sysinfo.IsMountPoint(realMnt); err == nil && busy {
			return nil, fmt.Errorf("mount point %s is busy: %s is mounted there already (unmount it, or pick another directory)", p.MountPoint, m.FSType)
		}
	} else {
		p.MountPoint = p.Target
		p.InPlace = true
	}
	if p.InPlace && geteuid() != 0 {
		return nil, errors.New("tracing --target in place mounts over it in a private mount namespace, which needs root " +
			"(CAP_SYS_ADMIN); run as root, or use --mount-at DIR to expose the traced view at another directory " +
			"(needs read-write access to /dev/fuse and fusermount3)")
	}
	if err := fuseAvailable(); err != nil {
		return nil, fmt.Errorf("FUSE is not available: %w", err)
	}
	if p.Output, err = resolveOutput(s.Output, p.RealTarget, realOrSelf(p.MountPoint)); err != nil {
		return nil, err
	}
	return p, nil
}
