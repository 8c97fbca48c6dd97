package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/internal/lazyfree"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/s3store"
	"github.com/iotap/iotap/internal/sysinfo"
	"github.com/iotap/iotap/internal/tally"
	"github.com/iotap/iotap/trace"
)

// recordCommands returns the record subcommand and the hidden one it re-executes itself as.
func recordCommands() []*command {
	return []*command{
		{
			name:    "record",
			summary: "run a command with its I/O under --target traced, and write the trace",
			usage:   "[flags] -- COMMAND [ARGS...]",
			setup: func(fs *pflag.FlagSet) func(context.Context, *env, []string) error {
				opts := &recordOptions{}
				opts.AddFlags(fs)
				return func(ctx context.Context, e *env, args []string) error { return runRecord(ctx, e, opts, args) }
			},
		},
		{
			name:    recordChildCommand,
			summary: "internal: the recorder inside its private mount namespace",
			usage:   "(internal)",
			hidden:  true,
			setup: func(fs *pflag.FlagSet) func(context.Context, *env, []string) error {
				return func(ctx context.Context, e *env, args []string) error { return runRecordChild(ctx, e) }
			},
		},
	}
}

// recordChildCommand is the hidden subcommand `record` re-executes itself as, inside a new
// mount namespace. Its spec arrives as JSON on fd 3.
const recordChildCommand = "__record-child"

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
	DropWhenFull  bool
	AllowOther    bool
	FUSEDebug     bool
	ServerProcs   int
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
	fs.BoolVar(&o.DropWhenFull, "drop-when-full", false, "drop events instead of slowing the job when the trace buffer is full (drops are counted)")
	fs.BoolVar(&o.AllowOther, "allow-other", false, "let other users use the traced view (adds default_permissions)")
	fs.BoolVar(&o.FUSEDebug, "fuse-debug", false, "print every FUSE request (very verbose)")
	fs.IntVar(&o.ServerProcs, "server-procs", 0, "CPUs the layer's Go code may use at once (GOMAXPROCS of the serving process; `n`=0: one per 4 CPUs, at least 1; "+
		"backend calls run in parallel either way)")
}

// recordOptions are the flags of `iotap record`.
type recordOptions struct {
	layerOptions
}

// AddFlags registers the flags of `iotap record`.
func (o *recordOptions) AddFlags(fs *pflag.FlagSet) {
	o.addFlags(fs, "trace the directory `dir` in place (default: the current directory)")
	fs.StringVar(&o.MountAt, "mount-at", "", "expose the traced view at `dir` instead of over --target (no mount namespace needed)")
}

// Test hooks.
var (
	fuseAvailable = fusefs.Available
	geteuid       = os.Geteuid
	nowUTC        = func() time.Time { return time.Now().UTC() }
)

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
	DropWhenFull  bool
	ServerProcs   int    // GOMAXPROCS while serving (0: fusefs.DefaultServerProcs)
	Kind          string // "record" or "mount" (for messages)
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
	}
}

func runRecord(ctx context.Context, e *env, opts *recordOptions, args []string) error {
	if len(args) == 0 {
		return usageErrorf("missing the command to run (iotap record [flags] -- COMMAND [ARGS...])")
	}
	spec, err := prepare(&opts.layerOptions, "record")
	if err != nil {
		return err
	}
	spec.Argv = args
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("current directory: %w", err)
	}
	spec.Dir = cwd
	if !spec.InPlace {
		spec.Dir = mapDir(cwd, spec.RealTarget, spec.MountPoint)
	}
	// Find the command before mounting anything: a typo costs no mount.
	if _, err := job.Lookup(args[0], cwd); err != nil {
		var se *job.StartError
		if errors.As(err, &se) {
			return &exitCodeError{code: se.Code, err: describeStartError(se)}
		}
		return err
	}
	if err := createOutput(spec.Output); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: tracing %s%s, trace %s\n", spec.Target, viewNote(spec), spec.Output)
	if !spec.InPlace {
		return serve(ctx, e, spec)
	}
	return reexecInNamespace(e, spec)
}

func viewNote(s *recordSpec) string {
	if s.InPlace {
		return " in place (private mount namespace)"
	}
	return " at " + s.MountPoint
}

func describeStartError(se *job.StartError) error {
	if errors.Is(se, job.ErrNotFound) {
		return fmt.Errorf("%s: command not found", se.Name)
	}
	return se
}

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
	if o.ServerProcs < 0 {
		return nil, usageErrorf("--server-procs must not be negative")
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
		AllowOther: o.AllowOther, FUSEDebug: o.FUSEDebug, StatsInterval: o.StatsInterval,
		DropWhenFull: o.DropWhenFull, ServerProcs: o.ServerProcs, Kind: kind,
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
		return "", "", fmt.Errorf("%s %s does not exist", what, p)
	case err != nil:
		return "", "", fmt.Errorf("%s %s: %w", what, p, err)
	case !st.IsDir():
		return "", "", fmt.Errorf("%s %s is not a directory", what, p)
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
		return "", fmt.Errorf("output %s: %w", abs, err)
	}
	rout := filepath.Join(rdir, filepath.Base(abs))
	if sysinfo.Within(rout, realTarget) {
		return "", fmt.Errorf("output %s is inside the traced tree %s: write the trace elsewhere (-o)", abs, realTarget)
	}
	if realView != "" && sysinfo.Within(rout, realView) {
		return "", fmt.Errorf("output %s is inside the mount point %s: write the trace elsewhere (-o)", abs, realView)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return "", fmt.Errorf("output %s is a directory", abs)
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
		return fmt.Errorf("cannot write the trace: %w", err)
	}
	f, err := private.OpenFile(path, os.O_WRONLY)
	if err != nil {
		return fmt.Errorf("cannot write the trace: %w", err)
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

// reexecInNamespace runs this binary again as the hidden child command in a new mount
// namespace, so that the mount over the target is seen by the job alone. The child is
// killed if this process dies (the job then gets ENOTCONN instead of hanging).
func reexecInNamespace(e *env, spec *recordSpec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode recorder spec: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer func() { _ = pr.Close() }()
	cmd := exec.Command("/proc/self/exe", recordChildCommand)
	cmd.Env = lazyfree.ChildEnv(os.Environ()) // the child serves the mount
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.stdin, e.stdout, e.stderr
	cmd.ExtraFiles = []*os.File{pr}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Unshareflags: syscall.CLONE_NEWNS,
		Pdeathsig:    syscall.SIGKILL,
	}
	// SIGUSR1 asks the recorder for a stats line; it is not the job's. Catch it before the
	// job can run, so that an early one cannot kill iotap.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	// Pdeathsig fires when the creating thread exits: keep it for the child's lifetime.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		_ = pw.Close()
		if errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("cannot create a private mount namespace (needs CAP_SYS_ADMIN); use --mount-at DIR: %w", err)
		}
		return fmt.Errorf("start recorder: %w", err)
	}
	_ = pr.Close()
	_, werr := pw.Write(data)
	_ = pw.Close()
	stop := job.Forward(cmd.Process)
	go func() {
		for range usr1 {
			_ = cmd.Process.Signal(syscall.SIGUSR1)
		}
	}()
	err = cmd.Wait()
	signal.Stop(usr1)
	close(usr1)
	stop()
	if werr != nil && err == nil {
		return fmt.Errorf("send recorder spec: %w", werr)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("wait for recorder: %w", err)
	}
	st := cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return &exitCodeError{code: job.ExitCode(st), err: fmt.Errorf("recorder %s", job.Describe(st))}
	}
	if code := st.ExitCode(); code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// runRecordChild is the recorder inside its private mount namespace.
func runRecordChild(ctx context.Context, e *env) error {
	// Re-executed as /proc/self/exe, this process is called "exe": name the thread that
	// enters the job's directory and starts the job, so the trace attributes those few
	// requests to iotap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("iotap\x00")[0])), 0, 0, 0)
	f := os.NewFile(3, "spec")
	if f == nil {
		return errors.New("internal command: no spec on fd 3")
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	spec := &recordSpec{}
	if err := json.Unmarshal(data, spec); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	err = serve(ctx, e, spec)
	var ec *exitCodeError
	if err != nil && !errors.As(err, &ec) {
		// Print with the user's command name, then exit quietly.
		_, _ = fmt.Fprintf(e.stderr, "iotap %s: %v\n", spec.Kind, err)
		return &exitCodeError{code: exitError}
	}
	if ec != nil && ec.err != nil {
		_, _ = fmt.Fprintf(e.stderr, "iotap %s: %v\n", spec.Kind, ec.err)
		return &exitCodeError{code: ec.code}
	}
	return err
}

// session is a mounted tracing layer writing one trace.
type session struct {
	spec    *recordSpec
	w       *trace.Writer
	closeW  func() error // closes w and, for an s3:// trace, completes the upload
	srv     *fusefs.Server
	tally   tally.Tally
	started time.Time
	e       *env
}

// openSession writes the header, creates the trace and mounts the layer. In place, it
// first moves into the target so that the layer reaches the real directory through the
// working directory, under the mount it is about to put on top.
func openSession(e *env, spec *recordSpec) (*session, error) {
	h := trace.Header{
		Kind:         "record",
		WallStart:    time.Now().UTC(),
		Origin:       trace.Now(),
		Hostname:     sysinfo.Hostname(),
		IotapVersion: version,
		Kernel:       sysinfo.KernelRelease(),
		Target:       trace.Target{Path: spec.Target},
		Command:      spec.Argv,
		Labels:       spec.Labels,
	}
	if m, err := sysinfo.MountOf(spec.Target); err == nil {
		h.Target.FSType, h.Target.Source, h.Target.Mount = m.FSType, m.Source, m.MountPoint
	}
	o := spec.fuseOptions(e)
	h.FUSE = o.TraceOptions()
	if spec.InPlace {
		// Hold the real directory before covering it (fusefs also opens it by descriptor).
		if err := os.Chdir(spec.Target); err != nil {
			return nil, fmt.Errorf("enter target: %w", err)
		}
	}
	// The summary's and the live line's tally is fed by the trace writer's encoder, off the
	// requests' path: the layer records into the writer directly, as benchmarks measure it.
	s := &session{spec: spec, e: e}
	wo := trace.WriterOptions{
		DropWhenFull: spec.DropWhenFull, Logger: e.log, Observe: s.tally.AddBatch,
		FlushInterval: flushInterval(spec.StatsInterval),
	}
	w, closeW, err := createTraceAny(context.Background(), spec.Output, h, wo)
	if err != nil {
		return nil, fmt.Errorf("cannot write the trace: %w", err)
	}
	s.w, s.closeW = w, closeW
	procs := spec.ServerProcs
	if procs <= 0 {
		procs = fusefs.DefaultServerProcs()
	}
	runtime.GOMAXPROCS(procs)
	srv, err := fusefs.Mount(spec.MountPoint, spec.Target, w, o)
	if err != nil {
		_ = closeW()
		return nil, explainMountError(spec, err)
	}
	s.srv = srv
	s.started = time.Now()
	return s, nil
}

// flushInterval is the trace writer's flush interval for a live line every statsInterval:
// the live line counts the events the encoder has taken, which it does at least this often.
func flushInterval(statsInterval time.Duration) time.Duration {
	if statsInterval > 0 && statsInterval < 2*trace.DefaultFlushInterval {
		return max(statsInterval/2, 10*time.Millisecond)
	}
	return trace.DefaultFlushInterval
}

func explainMountError(spec *recordSpec, err error) error {
	switch {
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		return fmt.Errorf("mount %s: not permitted (needs root, or /dev/fuse access and fusermount3 for --mount-at): %w", spec.MountPoint, err)
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("mount %s: mount point busy: %w", spec.MountPoint, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("mount %s: mount point is not a directory: %w", spec.MountPoint, err)
	}
	return fmt.Errorf("mount %s: %w", spec.MountPoint, err)
}

// startLive starts printing a stats line every --stats-interval, and one at once on
// SIGUSR1 (the line then covers the time since the last one), until stop is closed. The
// signal is caught before startLive returns, so a SIGUSR1 sent after that cannot kill iotap.
func (s *session) startLive(stop <-chan struct{}) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go s.live(stop, usr1)
}

func (s *session) live(stop <-chan struct{}, usr1 chan os.Signal) {
	defer signal.Stop(usr1)
	var tick <-chan time.Time
	if s.spec.StatsInterval > 0 {
		t := time.NewTicker(s.spec.StatsInterval)
		defer t.Stop()
		tick = t.C
	}
	prev := s.tally.Snapshot()
	for {
		select {
		case <-stop:
			return
		case <-tick:
		case <-usr1:
		}
		cur := s.tally.Snapshot()
		_, _ = fmt.Fprintln(s.e.stderr, liveLine(cur.Sub(prev), cur.At.Sub(prev.At), s.w.Stats().Dropped))
		prev = cur
	}
}

func liveLine(d tally.Snapshot, dt time.Duration, dropped uint64) string {
	ops, errs, rd, wr := d.Totals()
	sec := dt.Seconds()
	if sec <= 0 {
		sec = 1
	}
	line := fmt.Sprintf("iotap: %8.0f ops/s  read %7.1f MB/s  write %7.1f MB/s  p99 %s",
		float64(ops)/sec, float64(rd)/sec/1e6, float64(wr)/sec/1e6, fmtDur(d.Quantile(0.99)))
	if errs > 0 {
		line += fmt.Sprintf("  errors %d", errs)
	}
	if dropped > 0 {
		line += fmt.Sprintf("  dropped %d", dropped)
	}
	return line
}

// unmount takes the layer down. If something still uses it, it is detached lazily and
// given a moment to drain; the trace is closed either way. It never blocks for long: a
// request stuck in the backend (a hung network file system) must not keep the trace open.
func (s *session) unmount() {
	res := make(chan error, 1)
	go func() { res <- s.srv.Unmount() }()
	var err error
	select {
	case err = <-res:
	case <-time.After(unmountTimeout):
		err = errors.New("unmount timed out")
	}
	if err != nil {
		s.e.log.Debug("unmount failed, detaching", "mountpoint", s.spec.MountPoint, "err", err)
		if derr := unix.Unmount(s.spec.MountPoint, unix.MNT_DETACH); derr != nil && !errors.Is(derr, unix.EINVAL) {
			_, _ = fmt.Fprintf(s.e.stderr, "iotap: unmount %s: %v\n", s.spec.MountPoint, derr)
			return
		}
	}
	done := make(chan struct{})
	go func() { s.srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(unmountTimeout):
		_, _ = fmt.Fprintf(s.e.stderr, "iotap: %s is still in use (or its backend hangs); closing the trace anyway\n", s.spec.MountPoint)
	}
}

// unmountTimeout bounds each step of taking the layer down.
const unmountTimeout = 5 * time.Second

// close closes the trace and prints the summary.
func (s *session) close(outcome string) error {
	elapsed := time.Since(s.started)
	cost := s.srv.Cost().LayerCost()
	s.w.SetLayerCost(cost)
	err := s.closeW()
	st := s.w.Stats()
	writeSummary(s.e.stderr, s.tally.Snapshot(), elapsed, st, cost, s.spec.Output, outcome)
	switch {
	case err != nil && st.Lost > 0:
		return fmt.Errorf("trace incomplete: %w: the %d events after the last chunk written whole were lost (the trace holds the first %d, and says so in its footer)",
			err, st.Lost, st.Written)
	case err != nil:
		return fmt.Errorf("close trace: %w", err)
	}
	return nil
}

// serve mounts the layer, runs the job (record) and takes everything down. It returns the
// job's exit status as an *exitCodeError.
func serve(ctx context.Context, e *env, spec *recordSpec) error {
	s, err := openSession(e, spec)
	if err != nil {
		return err
	}
	stopLive := make(chan struct{})
	s.startLive(stopLive)

	// go-fuse opens /dev/fuse without O_CLOEXEC: a job holding it would keep the connection
	// alive after iotap dies, and hang on its own requests instead of getting ENOTCONN.
	if err := closeOnExec(); err != nil {
		e.log.Warn("could not mark descriptors close-on-exec", "err", err)
	}
	// Enter the job's directory here rather than in the forked job, so the job's first
	// requests come after its exec and are attributed to the job's program.
	// Then step back out (through a descriptor: in place, the old directory is covered), so
	// that iotap itself does not keep the mount busy.
	jobDir := spec.Dir
	back, berr := os.Open(".")
	if berr == nil {
		defer func() { _ = back.Close() }()
		if err := os.Chdir(spec.Dir); err == nil {
			jobDir = ""
		}
	}
	cmd, err := job.Start(job.Spec{
		Argv: spec.Argv, Dir: jobDir, Env: job.EnvWithPWD(os.Environ(), spec.Dir),
		Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr,
	})
	if jobDir == "" {
		if cerr := back.Chdir(); cerr != nil {
			_ = os.Chdir("/")
		}
	}
	if err != nil {
		close(stopLive)
		s.unmount()
		code := 1
		var se *job.StartError
		if errors.As(err, &se) {
			code, err = se.Code, describeStartError(se)
		}
		if cerr := s.close(fmt.Sprintf("job not started (exit %d)", code)); cerr != nil {
			_, _ = fmt.Fprintf(e.stderr, "iotap %s: %v\n", spec.Kind, cerr)
		}
		return &exitCodeError{code: code, err: err}
	}
	stop := job.Forward(cmd.Process)
	code, werr := job.Wait(cmd)
	stop()
	close(stopLive)
	s.unmount()
	cerr := s.close("job " + job.Describe(cmd.ProcessState))
	switch {
	case werr != nil:
		return werr
	case code != 0:
		// The job's failure is the outcome its caller acts on; a trace that could not be
		// finished is printed, and is the outcome only when the job succeeded.
		return &exitCodeError{code: code, err: cerr}
	case cerr != nil:
		return cerr
	}
	return nil
}

// closeOnExec marks every descriptor above stderr close-on-exec.
func closeOnExec() error {
	err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %v; list fds: %w", err, rerr)
	}
	for _, ent := range ents {
		if fd, err := strconv.Atoi(ent.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// writeSummary prints the one-screen end-of-run summary.
func writeSummary(w io.Writer, snap tally.Snapshot, elapsed time.Duration, ws trace.WriterStats, cost trace.LayerCost, path, outcome string) {
	ops, errs, rd, wr := snap.Totals()
	_, _ = fmt.Fprintf(w, "\niotap: %s after %s\n", outcome, elapsed.Round(time.Millisecond))
	_, _ = fmt.Fprintf(w, "  ops %d (%d failed), read %s, written %s\n", ops, errs, fmtBytes(rd), fmtBytes(wr))
	if by := snap.ByTime(); len(by) > 0 {
		_, _ = fmt.Fprintf(w, "  %-14s %10s %10s %10s %10s %10s\n", "op", "count", "total", "p50", "p99", "bytes")
		for i, o := range by {
			if i == 8 {
				_, _ = fmt.Fprintf(w, "  ... %d more ops\n", len(by)-i)
				break
			}
			b := ""
			if o.Bytes > 0 {
				b = fmtBytes(o.Bytes)
			}
			_, _ = fmt.Fprintf(w, "  %-14s %10d %10s %10s %10s %10s\n", o.Op, o.Count, fmtDur(o.Dur), fmtDur(o.Quantile(0.5)), fmtDur(o.Quantile(0.99)), b)
		}
	}
	_, _ = fmt.Fprintf(w, "  events %d written, %d dropped", ws.Written, ws.Dropped)
	if ws.Lost > 0 {
		_, _ = fmt.Fprintf(w, " (%d of them when a write of the trace failed)", ws.Lost)
	}
	if ws.Blocked > 0 {
		_, _ = fmt.Fprintf(w, ", job waited %s for trace buffer space", ws.Blocked.Round(time.Millisecond))
	}
	if line := costLine(cost, ws.EncodeCPU, ws.Written); line != "" {
		_, _ = fmt.Fprintf(w, "\n  %s", line)
	}
	if ws.PathCompactions > 0 {
		_, _ = fmt.Fprintf(w, "\n  path index: %d paths no longer in use forgotten in %d compactions, %s",
			ws.PathsForgotten, ws.PathCompactions, fmtBytes(uint64(16*ws.PathIndexSlots)))
	}
	_, _ = fmt.Fprintf(w, "\n  trace %s (%s)", path, fmtBytes(ws.Bytes))
	if rss := peakRSS(); rss > 0 {
		_, _ = fmt.Fprintf(w, ", recorder peak RSS %s", fmtBytes(rss))
	}
	_, _ = fmt.Fprintln(w)
}

// costLine says what recording cost, as the layer and the writer measured it: the layer's
// own work per request, against the time requests spent in the layer, and the encoder's
// CPU per event written. Empty when nothing was measured.
func costLine(c trace.LayerCost, encodeCPU time.Duration, events uint64) string {
	if c.Requests == 0 || c.InLayer <= 0 {
		return ""
	}
	n := time.Duration(c.Requests)
	line := fmt.Sprintf("recording cost: %s of the layer's own work per request, %.1f%% of the %s a request spent in it",
		fmtDur(c.Self/n), 100*float64(c.Self)/float64(c.InLayer), fmtDur(c.InLayer/n))
	if c.Threads > 0 {
		line += fmt.Sprintf("\n    (of which %s: looking up %d new threads in /proc, %s each)",
			fmtDur(c.Resolve/n), c.Threads, fmtDur(c.Resolve/time.Duration(c.Threads)))
	}
	if encodeCPU > 0 && events > 0 {
		line += fmt.Sprintf("\n    trace encoder: %s of CPU per event", fmtDur(encodeCPU/time.Duration(events)))
	}
	return line
}

// peakRSS returns this process's peak resident set size (VmHWM), or 0.
func peakRSS() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func fmtBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d >= time.Microsecond:
		return fmt.Sprintf("%.1fµs", float64(d)/1e3)
	}
	return fmt.Sprintf("%dns", int64(d))
}
