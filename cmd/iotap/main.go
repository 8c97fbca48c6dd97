// Command iotap records the filesystem operations of a real job through a tracing FUSE
// layer, reports their latency distributions, and replays them on other storage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/lazyfree"
	"github.com/iotap/iotap/internal/memlimit"
	"github.com/iotap/iotap/internal/recorder"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/replay/campaign"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes. They are listed in --help; keep the two in step.
const (
	exitOK       = 0
	exitError    = 1 // the command failed (bad trace, unreachable target, ...)
	exitUsage    = 2 // bad flags or arguments
	exitDamaged  = 3 // the trace was read, but it is damaged (truncated or corrupt chunks)
	exitDropped  = 4 // the trace was read whole, but its recorder dropped events (footer)
	exitNotFound = 127
)

// env is what a command needs from the process: its streams and a logger (tests pass
// buffers).
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
	// traces are the S3 settings of the s3:// traces the command reads: its --s3-endpoint,
	// --s3-region and --aws-profile (traceStore), set before it runs.
	traces traceStore
}

// command is one subcommand. The xxxCommands function of a cmd_<name>.go file returns the
// command <name> and those that go with it: cmd_mount.go has unmount, cmd_completion.go
// man, cmd_record.go the hidden commands the recorder re-executes iotap as. commandList
// lists them all. What several commands share has a file named for what it is (s3io.go,
// traceset.go, output.go, sampling.go, replay_places.go, ...).
type command struct {
	name    string
	summary string
	usage   string // argument synopsis after the command name
	// setup binds the flags of a fresh options struct to fs, and returns the function
	// that runs the command with those options (withOptions, withoutOptions).
	setup  func(fs *pflag.FlagSet) runFunc
	hidden bool // not listed in --help (the recorder's internal commands)
}

// runFunc runs a command on its arguments.
type runFunc = func(ctx context.Context, e *env, args []string) error

// withOptions is the setup of a command whose flags are those of its options struct O:
// each setup binds them to a fresh O, which run is then given with the arguments.
func withOptions[O any, P interface {
	*O
	AddFlags(fs *pflag.FlagSet)
}](run func(ctx context.Context, e *env, opts P, args []string) error) func(*pflag.FlagSet) runFunc {
	return func(fs *pflag.FlagSet) runFunc {
		opts := P(new(O))
		opts.AddFlags(fs)
		return func(ctx context.Context, e *env, args []string) error {
			if s, ok := any(opts).(traceStoreUser); ok {
				e.traces = s.store() // the command's s3:// traces are read with its flags
			}
			return run(ctx, e, opts, args)
		}
	}
}

// withoutOptions is the setup of a command that has no flags.
func withoutOptions(run runFunc) func(*pflag.FlagSet) runFunc {
	return func(*pflag.FlagSet) runFunc { return run }
}

// commandList returns every subcommand of iotap.
func commandList() []*command {
	var all []*command
	for _, cs := range [][]*command{
		recordCommands(), mountCommands(), reportCommands(), compareCommands(),
		replayCommands(), infoCommands(), exportCommands(), summaryCommands(), anonymizeCommands(),
		completionCommands(),
	} {
		all = append(all, cs...)
	}
	return all
}

// exitCodeError carries a specific exit code (a wrapped job's, or 127 for a missing command).
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitCodeError) Unwrap() error { return e.err }

// errUsage marks an error in flags or arguments.
var errUsage = errors.New("usage")

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

func main() {
	// The commands that serve a mount free memory lazily. record serves none itself: its
	// recorder is the child it starts (recorder.ChildCommand), which gets the setting from
	// its environment without executing itself again.
	if len(os.Args) > 1 && (os.Args[1] == "mount" || os.Args[1] == recorder.ChildCommand) {
		lazyfree.Reexec() // before anything else: it may execute iotap again
	}
	// The garbage collector works to the memory limit of iotap's cgroup, if it has one.
	if _, err := memlimit.Set(); err != nil && os.Getenv("IOTAP_DEBUG") != "" {
		_, _ = fmt.Fprintf(os.Stderr, "iotap: Go memory limit from the cgroup: %v\n", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	stopProfile := startProfile(os.Getenv(profileEnv))
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopProfile()
	stop()
	os.Exit(code)
}

// profileEnv names the environment variable that makes iotap write a CPU profile of the
// whole invocation to the file it names (for `go tool pprof`).
const profileEnv = "IOTAP_CPUPROFILE"

// startProfile starts a CPU profile into file (none when file is empty) and returns the
// function that ends it.
func startProfile(file string) func() {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "iotap: %s: %v\n", profileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// run executes one iotap invocation and returns the process exit code. It never exits.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	level := slog.LevelWarn
	if os.Getenv("IOTAP_DEBUG") != "" {
		level = slog.LevelDebug
	}
	e := &env{
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}
	commands := map[string]*command{}
	for _, c := range commandList() {
		commands[c.name] = c
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				fs := newFlagSet(c)
				c.setup(fs)
				printCommandHelp(stdout, c, fs)
				return exitOK
			}
		}
		printHelp(stdout, commands)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "version" {
		_, _ = fmt.Fprintf(stdout, "iotap %s\n", version)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		_, _ = fmt.Fprintf(stderr, "iotap: unknown command %q (see iotap --help)\n", args[0])
		return exitUsage
	}
	fs := newFlagSet(c)
	runFn := c.setup(fs)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printCommandHelp(stdout, c, fs)
			return exitOK
		}
		_, _ = fmt.Fprintf(stderr, "iotap %s: %v\n", c.name, err)
		_, _ = fmt.Fprintf(stderr, "usage: iotap %s %s (see iotap %s --help)\n", c.name, c.usage, c.name)
		return exitUsage
	}
	err := runFn(ctx, e, fs.Args())
	return exitCode(stderr, c.name, err)
}

// exitCode maps an error to the process exit code, printing it. This is the one place
// where errors become exit codes.
func exitCode(stderr io.Writer, name string, err error) int {
	var ec *exitCodeError
	var rec *recorder.ExitError
	// Messages may name files of the traced job: escaped for the terminal.
	say := func(err error) { _, _ = fmt.Fprintf(stderr, "iotap %s: %s\n", name, termsafe.Text(err.Error())) }
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ec):
		if ec.err != nil {
			say(ec.err)
		}
		return ec.code
	case errors.As(err, &rec):
		if rec.Err != nil {
			say(rec.Err)
		}
		return rec.Code
	case errors.Is(err, errUsage), errors.Is(err, campaign.ErrUsage), errors.Is(err, recorder.ErrUsage):
		say(err)
		return exitUsage
	case errors.Is(err, errDamaged), errors.Is(err, campaign.ErrDamaged): // before errDropped: a trace may be both
		say(err)
		return exitDamaged
	case errors.Is(err, errDropped):
		say(err)
		return exitDropped
	default:
		say(err)
		return exitError
	}
}

// errDamaged marks a command that completed on a damaged trace.
var errDamaged = errors.New("trace damaged")

func newFlagSet(c *command) *pflag.FlagSet {
	fs := pflag.NewFlagSet("iotap "+c.name, pflag.ContinueOnError)
	fs.SortFlags = false
	fs.SetInterspersed(true)
	return fs
}

func printHelp(w io.Writer, commands map[string]*command) {
	_, _ = fmt.Fprintf(w, "iotap %s: record a job's filesystem I/O, report its latencies, replay it on other storage.\n\n", version)
	_, _ = fmt.Fprintln(w, "Usage: iotap <command> [flags] [args]")
	_, _ = fmt.Fprintln(w, "\nCommands:")
	names := make([]string, 0, len(commands))
	for n, c := range commands {
		if !c.hidden {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		_, _ = fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	_, _ = fmt.Fprintln(w, "\nRun 'iotap <command> --help' for a command's flags.")
	_, _ = fmt.Fprint(w, exitCodesHelp)
}

const exitCodesHelp = `
Exit codes:
  0    success
  1    the command failed
  2    bad flags or arguments (a missing target, an -o that cannot be written: before any
       work, in every command)
  3    the trace was read but is damaged (cut short, or corrupt chunks); the output covers
       its readable part (replay: up to a cut; a corrupt trace only with --force)
  4    the trace was read whole, but its recorder dropped events (a full buffer with
       --drop-when-full, or a trace write that failed): the output leaves them out
       (3 when a trace is also damaged)
  127  record: the job's command was not found
  N    record: the job's own exit code (128+signal if it was killed)
`

func printCommandHelp(w io.Writer, c *command, fs *pflag.FlagSet) {
	_, _ = fmt.Fprintf(w, "Usage: iotap %s %s\n\n%s\n\nFlags:\n", c.name, c.usage, c.summary)
	_, _ = fmt.Fprint(w, fs.FlagUsages())
	_, _ = fmt.Fprint(w, exitCodesHelp)
}
