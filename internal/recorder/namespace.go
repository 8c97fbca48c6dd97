// The recorder process: Record re-executes the program as a child that serves the layer and
// runs the job (in place, in a mount namespace of its own, over the target there).

package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"github.com/iotap/iotap/internal/job"
	"github.com/iotap/iotap/internal/lazyfree"
	"github.com/iotap/iotap/internal/sysinfo"
	"golang.org/x/sys/unix"
)

// ChildCommand is the hidden subcommand Record re-executes the program as
// (/proc/self/exe ChildCommand), inside a new mount namespace: the program must run
// RunChild for it. Its plan arrives as JSON on fd 3, and with --metrics the listener bound
// for them as fd 4.
const ChildCommand = "__record-child"

// reexecRecorder runs this binary again as the hidden child command, the recorder: it
// mounts the layer, serves it and runs the job as its own child. In place, the recorder has
// a new mount namespace, so that the mount over the target is seen by the job alone.
//
// The new namespace is a copy of this one, made by clone(CLONE_NEWNS); the recorder makes
// its mounts slaves of the ones they copy (makeSlave) before it mounts anything. Go's
// Unshareflags would make them private instead: the copies would then pin the host's
// mounts, and a disk the host unmounts lazily would stay busy until the job ended.
//
// The job ends with iotap, however iotap ends (docs/manual.md, "When iotap is stopped"):
//   - this process killed: the recorder gets parentDeathSignal, ends the job's processes,
//     and takes down the mount and the trace as when the job ends;
//   - the recorder killed: the job's command gets SIGKILL from the kernel (its
//     Pdeathsig), and this process, the reaper of the orphans below it (job.Subreaper in
//     Record), kills what is left of the job.
func reexecRecorder(e Env, spec *plan, ml net.Listener) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode recorder plan: %w", err)
	}
	var mf *os.File
	if ml != nil {
		if mf, err = listenerFile(ml); err != nil {
			return fmt.Errorf("hand the metrics listener to the recorder: %w", err)
		}
		defer func() { _ = mf.Close() }() // the recorder has it once started
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	defer func() { _ = pr.Close() }()
	cmd := exec.Command("/proc/self/exe", ChildCommand)
	cmd.Env = lazyfree.ChildEnv(os.Environ()) // the child serves the mount
	cmd.Stdin, cmd.Stdout, cmd.Stderr = e.Stdin, e.Stdout, e.Stderr
	cmd.ExtraFiles = []*os.File{pr}
	if mf != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, mf)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: parentDeathSignal}
	if spec.InPlace {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
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
		if errors.Is(err, syscall.EPERM) && spec.InPlace {
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
		return fmt.Errorf("send recorder plan: %w", werr)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("wait for recorder: %w", err)
	}
	st := cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// The job's command died with the recorder; its orphans came here.
		msg := fmt.Sprintf("recorder %s", job.Describe(st))
		if n := job.KillDescendants(killWait); n > 0 {
			msg += fmt.Sprintf("; ended what was left of the job (%d processes)", n)
		}
		if !spec.InPlace {
			// The view's server is gone: take its dead mount away (in place, it went with
			// the recorder's mount namespace).
			if m, ok, err := sysinfo.IsMountPoint(realOrSelf(spec.MountPoint)); err == nil && ok && isIotapMount(m) {
				if err := unmountDir(e.Stderr, realOrSelf(spec.MountPoint)); err != nil {
					msg += fmt.Sprintf("; %v", err)
				}
			}
		}
		return &ExitError{Code: job.ExitCode(st), Err: errors.New(msg)}
	}
	if code := st.ExitCode(); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// parentDeathSignal is the signal the recorder gets when the iotap process that started it
// dies (its Pdeathsig): it then ends the job (watchJob). iotap uses it for nothing else.
const parentDeathSignal = syscall.SIGUSR2

// killWait bounds the killing of a job's processes (job.KillDescendants): a process stuck
// in the kernel (a hung network file system) dies only when its call returns.
const killWait = 5 * time.Second

// RunChild is the recorder, the program run as ChildCommand by Record (in a mount namespace
// of its own when in place). It prints its errors on e.Stderr, naming the user's command,
// and returns an *ExitError with the exit code to end with, or nil.
func RunChild(ctx context.Context, e Env) error {
	e.defaults()
	// The iotap process that started the recorder dies: the job must not outlive it.
	parent := os.Getppid()
	deathSig := make(chan os.Signal, 1)
	signal.Notify(deathSig, parentDeathSignal)
	parentDied := make(chan struct{})
	go func() {
		for range deathSig {
			if os.Getppid() != parent { // the signal is the kernel's, not a stray one
				close(parentDied)
				return
			}
		}
	}()
	// The job's processes that lose their parent stay below the recorder, where it finds
	// them when it must end the job.
	if err := job.Subreaper(); err != nil {
		e.Log.Warn("the job's orphaned processes cannot be followed", "err", err)
	}
	// Re-executed as /proc/self/exe, this process is called "exe": name the thread that
	// enters the job's directory and starts the job, so the trace attributes those few
	// requests to iotap.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte("iotap\x00")[0])), 0, 0, 0)
	fail := func(err error) error {
		_, _ = fmt.Fprintf(e.Stderr, "iotap: recorder: %v\n", err)
		return &ExitError{Code: exitError}
	}
	f := os.NewFile(3, "plan")
	if f == nil {
		return fail(errors.New("no plan on fd 3"))
	}
	data, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return fail(fmt.Errorf("read plan: %w", err))
	}
	spec := &plan{}
	if err := json.Unmarshal(data, spec); err != nil {
		return fail(fmt.Errorf("decode plan: %w", err))
	}
	tl := spec.timeline(e.Log)
	tl.mark("recorder running")
	var ml net.Listener
	if spec.Metrics != "" {
		mf := os.NewFile(4, "metrics")
		if mf == nil {
			return fail(errors.New("no metrics listener on fd 4"))
		}
		ml, err = net.FileListener(mf) // a descriptor of its own, close-on-exec
		_ = mf.Close()
		if err != nil {
			return fail(fmt.Errorf("metrics listener: %w", err))
		}
	}
	if spec.InPlace {
		if err := makeSlave(parent); err != nil {
			if ml != nil {
				_ = ml.Close()
			}
			_, _ = fmt.Fprintf(e.Stderr, "iotap %s: %v\n", spec.Kind, err)
			return &ExitError{Code: exitError}
		}
		tl.mark("mount namespace ready")
	}
	err = serve(ctx, e, spec, ml, parentDied)
	var ec *ExitError
	if err != nil && !errors.As(err, &ec) {
		// Print with the user's command name, then exit quietly.
		_, _ = fmt.Fprintf(e.Stderr, "iotap %s: %v\n", spec.Kind, err)
		return &ExitError{Code: exitError}
	}
	if ec != nil && ec.Err != nil {
		_, _ = fmt.Fprintf(e.Stderr, "iotap %s: %v\n", spec.Kind, ec.Err)
		return &ExitError{Code: ec.Code}
	}
	return err
}

// makeSlave makes every mount of this process's new mount namespace a slave of the mount it
// copies: unmounts and mounts on the host reach the job's namespace (a disk the host
// unmounts is not pinned by the copy), and mounts made here, the layer's first, never reach
// the host. A mount that was private on the host stays private. Nothing may be mounted
// before this succeeds: a shared copy would propagate the mount to the host. It refuses to
// change the mounts of the namespace of parent, the process that made this one.
func makeSlave(parent int) error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return fmt.Errorf("the recorder's mount namespace: %w", err)
	}
	if host, err := os.Readlink("/proc/" + strconv.Itoa(parent) + "/ns/mnt"); err != nil || host == self {
		return fmt.Errorf("the recorder is not in a mount namespace of its own (%s): its mounts are left as they are", self)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the mount namespace's mounts slaves of the host's: %w", err)
	}
	return nil
}
