// Package job starts the command a recording wraps and reports how it ended the way a shell
// would: its own exit code, 128+signal when a signal killed it, 127 when the command was not
// found and 126 when it could not be executed.
package job

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Shell-compatible exit codes for a job that could not be started.
const (
	CodeNotExecutable = 126
	CodeNotFound      = 127
)

// ErrNotFound and ErrNotExecutable classify a command that could not be started.
var (
	ErrNotFound      = errors.New("command not found")
	ErrNotExecutable = errors.New("permission denied")
)

// StartError is a command that could not be started. Code is the exit code a shell would
// give (127 or 126, or 1 for other failures).
type StartError struct {
	Name string
	Code int
	Err  error
}

func (e *StartError) Error() string { return fmt.Sprintf("%s: %v", e.Name, e.Err) }
func (e *StartError) Unwrap() error { return e.Err }

// Spec describes the job.
type Spec struct {
	Argv   []string
	Dir    string   // working directory; resolved by path when the job starts
	Env    []string // nil: the caller's environment
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// SysProcAttr, if set, is used as is (for example Unshareflags or Pdeathsig).
	SysProcAttr *syscall.SysProcAttr
	// ExtraFiles are passed as fds 3, 4, ...
	ExtraFiles []*os.File
}

// Lookup resolves argv0 the way Start will, relative to dir for names with a slash. It
// returns a *StartError (127 or 126) when the command cannot be run.
func Lookup(argv0, dir string) (string, error) {
	if argv0 == "" {
		return "", &StartError{Name: argv0, Code: CodeNotFound, Err: ErrNotFound}
	}
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", &StartError{Name: argv0, Code: CodeNotFound, Err: fmt.Errorf("%w (no such file)", ErrNotFound)}
		case err != nil:
			return "", &StartError{Name: argv0, Code: CodeNotExecutable, Err: err}
		case st.IsDir():
			return "", &StartError{Name: argv0, Code: CodeNotExecutable, Err: fmt.Errorf("%w (is a directory)", ErrNotExecutable)}
		case st.Mode()&0o111 == 0:
			return "", &StartError{Name: argv0, Code: CodeNotExecutable, Err: ErrNotExecutable}
		}
		return argv0, nil
	}
	p, err := exec.LookPath(argv0)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", &StartError{Name: argv0, Code: CodeNotFound, Err: ErrNotFound}
		}
		if errors.Is(err, fs.ErrPermission) {
			return "", &StartError{Name: argv0, Code: CodeNotExecutable, Err: ErrNotExecutable}
		}
		return "", &StartError{Name: argv0, Code: 1, Err: err}
	}
	return p, nil
}

// Start starts the job. A command that cannot be found or executed gives a *StartError.
func Start(s Spec) (*exec.Cmd, error) {
	if len(s.Argv) == 0 {
		return nil, &StartError{Code: CodeNotFound, Err: ErrNotFound}
	}
	path, err := Lookup(s.Argv[0], s.Dir)
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        s.Argv,
		Dir:         s.Dir,
		Env:         s.Env,
		Stdin:       s.Stdin,
		Stdout:      s.Stdout,
		Stderr:      s.Stderr,
		SysProcAttr: s.SysProcAttr,
		ExtraFiles:  s.ExtraFiles,
	}
	if strings.Contains(s.Argv[0], "/") {
		// A relative Path is resolved against Dir when the job starts.
		cmd.Path = s.Argv[0]
	}
	if s.Dir != "" && s.Env == nil {
		cmd.Env = EnvWithPWD(os.Environ(), s.Dir)
	}
	if err := cmd.Start(); err != nil {
		code := 1
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, exec.ErrNotFound):
			code = CodeNotFound
		case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
			code = CodeNotExecutable
		}
		return nil, &StartError{Name: s.Argv[0], Code: code, Err: err}
	}
	return cmd, nil
}

// EnvWithPWD returns env with PWD set to dir, so that shells started in dir report the
// path the user knows.
func EnvWithPWD(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PWD=") {
			out = append(out, kv)
		}
	}
	return append(out, "PWD="+dir)
}

// ExitCode returns a shell's view of how a process ended: its exit status, or 128+signal
// when a signal killed it.
func ExitCode(st *os.ProcessState) int {
	if st == nil {
		return 1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

// Describe says how a process ended, for a summary line ("exit 3", "killed by SIGTERM").
func Describe(st *os.ProcessState) string {
	if st == nil {
		return "not started"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by %s", signalName(ws.Signal()))
	}
	return fmt.Sprintf("exit %d", st.ExitCode())
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	}
	return fmt.Sprintf("signal %d", int(s))
}

// Forwarded are the signals a wrapper relays to its job.
var Forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// Forward relays the Forwarded signals this process receives to p until the returned stop
// function is called. While it runs, those signals no longer kill this process.
//
// SIGINT and SIGQUIT are not relayed while this process group owns the terminal on stdin:
// the terminal sent them to the whole group, the job included, and relaying would deliver
// them twice.
func Forward(p *os.Process) (stop func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, Forwarded...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				if (s == syscall.SIGINT || s == syscall.SIGQUIT) && foregroundTTY() {
					continue
				}
				_ = p.Signal(s)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// foregroundTTY reports whether stdin is a terminal whose foreground process group is ours.
func foregroundTTY() bool {
	pg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pg == unix.Getpgrp()
}

// Wait waits for cmd and returns its shell exit code. It never fails on a non-zero exit.
func Wait(cmd *exec.Cmd) (int, error) {
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return 1, fmt.Errorf("wait for %s: %w", cmd.Args[0], err)
	}
	return ExitCode(cmd.ProcessState), nil
}
