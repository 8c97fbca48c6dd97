// What record and mount check before mounting: the flags they share, the spec the
// serving process receives, and where the trace goes.

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/trace"
	"github.com/spf13/pflag"
)

// layerOptions are the settings of the tracing layer and the trace writer that `record`
// and `mount` share.
type layerOptions struct {
	Target        string
	Output        string
	Cache         string
	MountAt       string
	Labels        []string
	Include       []string
	Exclude       []string
	UIDs          []uint
	Comms         []string
	StatsInterval time.Duration
	StatsFormat   string
	Metrics       string
	DropWhenFull  bool
	AllowOther    bool
	FUSEDebug     bool
	ServerProcs   int
	Legs          string
	sampleOptions
	traceStore
}

func (o *layerOptions) addFlags(fs *pflag.FlagSet, targetHelp string) {
	fs.StringVar(&o.Target, "target", "", targetHelp)
	fs.StringVarP(&o.Output, "output", "o", "", "write the trace to `file` (default iotap-<UTC time>.iotap outside the target; "+
		"placeholders: %j Slurm job id, %n node name, %t task id, %h host name, %p pid, %% a percent sign)")
	fs.StringVar(&o.Cache, "cache", "none", "fidelity `mode`: none (every call reaches the layer at its own size; replay needs this) "+
		"or kernel (page, write-back and attribute caching on, as on a kernel file system: the trace shows what reached the backend)")
	fs.StringArrayVar(&o.Labels, "label", nil, "attach a `key=value` label to the trace (repeatable)")
	fs.StringArrayVar(&o.Include, "include", nil, "record only paths matching `glob` (repeatable; relative to the target)")
	fs.StringArrayVar(&o.Exclude, "exclude", nil, "do not record paths matching `glob` (repeatable)")
	fs.UintSliceVar(&o.UIDs, "uid", nil, "record only calls by user `id` (repeatable)")
	fs.StringArrayVar(&o.Comms, "comm", nil, "record only calls by processes whose comm is `name` (repeatable)")
	fs.DurationVar(&o.StatsInterval, "stats-interval", 0, "print a live line (ops/s, MB/s, p99) on stderr every `interval` (e.g. 1s); SIGUSR1 prints one at any time")
	fs.StringVar(&o.StatsFormat, "stats-format", "text", "`format` of the live line: text, or json (one object per line)")
	fs.StringVar(&o.Metrics, "metrics", "", "serve Prometheus metrics at http://`addr`/metrics while the layer is mounted "+
		"(PORT or :PORT: on 127.0.0.1 only; HOST:PORT, e.g. 0.0.0.0:9464, on that address)")
	fs.BoolVar(&o.DropWhenFull, "drop-when-full", false, "drop events instead of slowing the job when the trace buffer is full (drops are counted)")
	fs.BoolVar(&o.AllowOther, "allow-other", false, "let other users use the traced view (adds default_permissions)")
	fs.BoolVar(&o.FUSEDebug, "fuse-debug", false, "print every FUSE request (very verbose)")
	fs.IntVar(&o.ServerProcs, "server-procs", 0, "CPUs the layer's Go code may use at once (GOMAXPROCS of the serving process; `n`=0: one per 4 CPUs, at least 1; "+
		"a job that keeps many requests in flight on slow storage runs faster, and is timed closer, with 4)")
	fs.StringVar(&o.Legs, "legs", "auto", "how to measure the FUSE legs outside the layer (what a replay leaves out of think times): "+
		"`source` kernel (every request and system call, from kernel tracepoints; needs root), probe (a sampled round trip), "+
		"or auto (kernel where possible, else probe)")
	o.sampleOptions.addFlags(fs)
	o.addStoreFlags(fs)
}

// recordSpec is everything the serving process needs. `record` builds it after checking
// the user's input, and hands it to the re-executed child (as JSON) or serves it itself.
type recordSpec struct {
	Target        string // absolute target path, as the user named it
	RealTarget    string // Target with symlinks resolved
	MountPoint    string // where the layer is mounted (== Target when in place)
	InPlace       bool
	Output        string // absolute trace path
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
	StatsFormat   string // "text" or "json" (--stats-format)
	// Metrics is the address the metrics are served on ("" for none); the recorder gets its
	// listener, bound by `record` before anything is mounted, as descriptor 4.
	Metrics      string
	DropWhenFull bool
	ServerProcs  int    // GOMAXPROCS while serving (0: fusefs.DefaultServerProcs)
	Legs         string // "auto", "kernel" or "probe" (--legs)
	Kind         string // "record" or "mount" (for messages)
	// What to sample into the trace: the storage client (the given pids, or the process
	// serving the target's mount) and the recorder, every SampleInterval (0: nothing).
	Sample sampleOptions
	// Store is the S3 account, region and endpoint of an s3:// trace (Output).
	Store traceStore
}

func (s *recordSpec) fuseOptions(e *env) fusefs.Options {
	return fusefs.Options{
		Cache:      fusefs.CacheMode(s.Cache),
		AllowOther: s.AllowOther,
		Debug:      s.FUSEDebug,
		Logger:     e.log,
		Include:    s.Include,
		Exclude:    s.Exclude,
		UIDs:       s.UIDs,
		Comms:      s.Comms,
		IgnoreSelf: true,
	}
}

// minStatsInterval is the shortest --stats-interval.
const minStatsInterval = 10 * time.Millisecond

// prepare checks the user's input and resolves paths, without mounting anything.
func prepare(o *layerOptions, kind string) (*recordSpec, error) {
	switch o.Cache {
	case "none", "kernel":
	default:
		return nil, usageErrorf("--cache must be none or kernel, not %q", o.Cache)
	}
	if o.StatsInterval < 0 {
		return nil, usageErrorf("--stats-interval must not be negative")
	}
	if o.StatsInterval > 0 && o.StatsInterval < minStatsInterval {
		// Shorter, the live lines would flood stderr and take CPU from the job.
		return nil, usageErrorf("--stats-interval %v: want at least %v (or 0 for none)", o.StatsInterval, minStatsInterval)
	}
	switch o.StatsFormat {
	case "text", "json":
	case "":
		o.StatsFormat = "text"
	default:
		return nil, usageErrorf("--stats-format must be text or json, not %q", o.StatsFormat)
	}
	metricsAt, err := metricsAddr(o.Metrics)
	if err != nil {
		return nil, err
	}
	if o.ServerProcs < 0 {
		return nil, usageErrorf("--server-procs must not be negative")
	}
	switch o.Legs {
	case "auto", "kernel", "probe":
	case "":
		o.Legs = "auto"
	default:
		return nil, usageErrorf("--legs must be auto, kernel or probe, not %q", o.Legs)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	labels, err := splitLabels(o.Labels)
	if err != nil {
		return nil, err
	}
	for _, g := range append(append([]string(nil), o.Include...), o.Exclude...) {
		if _, err := path.Match(g, ""); err != nil {
			return nil, usageErrorf("bad glob %q in --include/--exclude: %v", g, err)
		}
	}
	spec := &recordSpec{
		Cache: o.Cache, Include: o.Include, Exclude: o.Exclude, Comms: o.Comms,
		AllowOther: o.AllowOther, FUSEDebug: o.FUSEDebug, StatsInterval: o.StatsInterval, StatsFormat: o.StatsFormat,
		Metrics: metricsAt, DropWhenFull: o.DropWhenFull, ServerProcs: o.ServerProcs, Kind: kind, Sample: o.sampleOptions,
		Legs: o.Legs, Store: o.traceStore,
	}
	for _, u := range o.UIDs {
		spec.UIDs = append(spec.UIDs, uint32(u))
	}
	for _, l := range labels {
		spec.Labels = append(spec.Labels, trace.Label{Key: l[0], Value: l[1]})
	}
	spec.Labels = append(spec.Labels, slurmLabels(os.Getenv)...)

	target := o.Target
	if target == "" {
		target = "."
	}
	if spec.Target, spec.RealTarget, err = checkDir(target, "target"); err != nil {
		return nil, err
	}
	if o.MountAt != "" {
		var realMnt string
		if spec.MountPoint, realMnt, err = checkDir(o.MountAt, "mount point"); err != nil {
			return nil, err
		}
		if sysinfo.Within(realMnt, spec.RealTarget) || sysinfo.Within(spec.RealTarget, realMnt) {
			return nil, fmt.Errorf("mount point %s and target %s must not contain each other", spec.MountPoint, spec.Target)
		}
		if m, busy, err := sysinfo.IsMountPoint(realMnt); err == nil && busy {
			return nil, fmt.Errorf("mount point %s is busy: %s is mounted there already (unmount it, or pick another directory)", spec.MountPoint, m.FSType)
		}
	} else {
		spec.MountPoint = spec.Target
		spec.InPlace = true
	}
	if spec.InPlace && geteuid() != 0 {
		return nil, errors.New("tracing --target in place mounts over it in a private mount namespace, which needs root " +
			"(CAP_SYS_ADMIN); run as root, or use --mount-at DIR to expose the traced view at another directory " +
			"(needs read-write access to /dev/fuse and fusermount3)")
	}
	if err := fuseAvailable(); err != nil {
		return nil, fmt.Errorf("FUSE is not available: %w", err)
	}
	if spec.Output, err = resolveOutput(o.Output, spec.RealTarget, realOrSelf(spec.MountPoint)); err != nil {
		return nil, err
	}
	if err := spec.Store.usedBy(spec.Output); err != nil {
		return nil, err
	}
	return spec, nil
}

func realOrSelf(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// checkDir makes p absolute and checks it is an existing directory. It returns the clean
// absolute path and the path with symlinks resolved.
func checkDir(p, what string) (abs, real string, err error) {
	abs, err = filepath.Abs(p)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: %w", what, p, err)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", usageErrorf("%s %s does not exist", what, p)
	case err != nil:
		return "", "", usageErrorf("%s %s: %v", what, p, err)
	case !st.IsDir():
		return "", "", usageErrorf("%s %s is not a directory", what, p)
	}
	real, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: %w", what, p, err)
	}
	return abs, real, nil
}

// mapDir maps a directory inside target to the same place under view; others stay.
func mapDir(dir, target, view string) string {
	real := realOrSelf(dir)
	if !sysinfo.Within(real, target) {
		return dir
	}
	rel, err := filepath.Rel(target, real)
	if err != nil {
		return dir
	}
	return filepath.Join(view, rel)
}

// resolveOutput expands placeholders, picks the default name, and refuses a trace inside
// the traced tree (the job would see it change, and in place it would be hidden).
func resolveOutput(out, realTarget, realView string) (string, error) {
	if out == "" {
		dir, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("current directory: %w", err)
		}
		rdir := realOrSelf(dir)
		if sysinfo.Within(rdir, realTarget) {
			if realTarget == "/" {
				return "", usageErrorf("the target is /: name the trace with -o FILE outside it")
			}
			rdir = filepath.Dir(realTarget)
		}
		out = filepath.Join(rdir, "iotap-"+nowUTC().Format("20060102T150405Z")+".iotap")
	} else {
		out = expandOutput(out, os.Getenv, sysinfo.Hostname(), os.Getpid())
	}
	if s3store.IsURL(out) {
		return out, nil // uploaded as it is written; never inside the traced tree
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("output %s: %w", out, err)
	}
	dir := filepath.Dir(abs)
	rdir, err := resolveMissing(dir)
	if err != nil {
		return "", usageErrorf("output %s: %v", abs, err)
	}
	rout := filepath.Join(rdir, filepath.Base(abs))
	if sysinfo.Within(rout, realTarget) {
		return "", usageErrorf("output %s is inside the traced tree %s: write the trace elsewhere (-o)", abs, realTarget)
	}
	if realView != "" && sysinfo.Within(rout, realView) {
		return "", usageErrorf("output %s is inside the mount point %s: write the trace elsewhere (-o)", abs, realView)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return "", usageErrorf("output %s is a directory", abs)
	}
	return abs, nil
}

// resolveMissing resolves symlinks in dir, which may not exist yet: its longest existing
// ancestor is resolved and the missing rest appended.
func resolveMissing(dir string) (string, error) {
	var rest []string
	for {
		r, err := filepath.EvalSymlinks(dir)
		if err == nil {
			st, serr := os.Stat(r)
			if serr != nil {
				return "", serr
			}
			if !st.IsDir() {
				return "", fmt.Errorf("%s is not a directory", dir)
			}
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", err
		}
		rest = append(rest, filepath.Base(dir))
		dir = parent
	}
}

// createOutput checks early that the trace can be written (the recorder truncates it).
// Missing directories are created (a per-job directory such as traces/%j/ cannot exist
// beforehand).
func createOutput(path string) error {
	if s3store.IsURL(path) {
		return nil // checked when the recorder opens the upload
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return usageErrorf("cannot write the trace: %v", err)
	}
	f, err := private.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return usageErrorf("cannot write the trace: %v", err)
	}
	return f.Close()
}

// expandOutput replaces %j (Slurm job id), %n (node name), %t (task id), %h (host name),
// %p (pid) and %% in an output file name.
func expandOutput(s string, getenv func(string) string, host string, pid int) string {
	if !strings.Contains(s, "%") {
		return s
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	short := host
	if i := strings.IndexByte(short, '.'); i > 0 {
		short = short[:i]
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'j':
			b.WriteString(or(getenv("SLURM_JOB_ID"), "nojob"))
		case 'n':
			b.WriteString(or(getenv("SLURMD_NODENAME"), short))
		case 't':
			b.WriteString(or(getenv("SLURM_PROCID"), "0"))
		case 'h':
			b.WriteString(host)
		case 'p':
			b.WriteString(strconv.Itoa(pid))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// slurmLabels turns the Slurm job placement variables that are set into labels.
func slurmLabels(getenv func(string) string) []trace.Label {
	var out []trace.Label
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID", "SLURM_PROCID", "SLURMD_NODENAME"} {
		if v := getenv(k); v != "" {
			out = append(out, trace.Label{Key: k, Value: v})
		}
	}
	return out
}
