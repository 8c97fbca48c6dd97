// In-place recording: record re-executes itself in a private mount namespace and the
// child serves the layer over the target there.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/internal/lazyfree"
	"golang.org/x/sys/unix"
)

// recordChildCommand is the hidden subcommand `record` re-executes itself as, inside a new
// mount namespace. Its spec arrives as JSON on fd 3.
const recordChildCommand = "__record-child"

// reexecInNamespace runs this binary again as the hidden child command in a new mount
// namespace, so that the mount over the target is seen by the job alone. The child is
// killed if this process dies (the job then gets ENOTCONN instead of hanging).
//
// The new namespace is a copy of this one, made by clone(CLONE_NEWNS); the child makes its
// mounts slaves of the ones they copy (makeSlave) before it mounts anything. Go's
// Unshareflags would make them private instead: the copies would then pin the host's
// mounts, and a disk the host unmounts lazily would stay busy until the job ended.
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
		Cloneflags: syscall.CLONE_NEWNS,
		Pdeathsig:  syscall.SIGKILL,
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
	if err := makeSlave(); err != nil {
		_, _ = fmt.Fprintf(e.stderr, "iotap %s: %v\n", spec.Kind, err)
		return &exitCodeError{code: exitError}
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

// makeSlave makes every mount of this process's new mount namespace a slave of the mount it
// copies: unmounts and mounts on the host reach the job's namespace (a disk the host
// unmounts is not pinned by the copy), and mounts made here, the layer's first, never reach
// the host. A mount that was private on the host stays private. Nothing may be mounted
// before this succeeds: a shared copy would propagate the mount to the host.
func makeSlave() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the mount namespace's mounts slaves of the host's: %w", err)
	}
	return nil
}
