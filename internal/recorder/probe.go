// The recording layer's round trip, measured against the mount while recording.

package recorder

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/trace"
)

// ProbeCommand is the hidden subcommand the recorder starts (/proc/self/exe ProbeCommand
// ARGS) to time the layer's round trip: the program must run RunProbe(ARGS) for it. It is a
// process of its own, outside the job, so that each timed call makes the whole trip (the
// caller's system call, the kernel's request to the daemon, the layer's reply, the caller
// woken up), as the job's calls do.
const ProbeCommand = "__rtt-probe"

// Probe sizes: lookups per calibration before the job, and per sample while it runs.
const (
	probeCalibration = 200
	probeSample      = 16
	probeInterval    = 250 * time.Millisecond
	probeStartWait   = 10 * time.Second // the calibration's answer, at most
)

// RunProbe is the probe process: once a line arrives on stdin (the layer is mounted), it
// times lstat(PATH) FIRST times, prints the median in ns on stdout, then every INTERVAL
// times it N times and prints that median, until ctx ends. PATH is the layer's probe name
// (fusefs.Options.ProbeName): each lstat is one LOOKUP the layer answers with ENOENT. args
// are PATH FIRST N INTERVAL; bad ones wrap ErrUsage. The end of stdin before a line, or of
// ctx, ends it without timing anything.
func RunProbe(ctx context.Context, stdin io.Reader, stdout io.Writer, args []string) error {
	if len(args) != 4 {
		return usageErrorf("want PATH FIRST N INTERVAL")
	}
	first, err1 := strconv.Atoi(args[1])
	n, err2 := strconv.Atoi(args[2])
	every, err3 := time.ParseDuration(args[3])
	if err := errors.Join(err1, err2, err3); err != nil || first < 1 || n < 1 || every <= 0 {
		return usageErrorf("bad probe arguments %q", args)
	}
	path := args[0]
	// The recorder starts this process while it loads the kernel's program and mounts
	// the layer, and says when the layer is there to time.
	mounted := make(chan bool, 1)
	go func() {
		_, err := bufio.NewReader(stdin).ReadString('\n')
		mounted <- err == nil
	}()
	select {
	case ok := <-mounted:
		if !ok {
			return nil
		}
	case <-ctx.Done():
		return nil
	}
	ds := make([]int64, 0, max(first, n))
	sample := func(k int) (int64, error) {
		ds = ds[:0]
		var st unix.Stat_t
		for range k {
			t0 := trace.Now()
			err := unix.Lstat(path, &st)
			ds = append(ds, trace.Now()-t0)
			if err != unix.ENOENT {
				return 0, fmt.Errorf("probe %s: %v (want ENOENT from the layer)", path, err)
			}
		}
		slices.Sort(ds)
		return ds[len(ds)/2], nil
	}
	k := first
	for {
		d, err := sample(k)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintln(stdout, d); err != nil {
			return nil // the recorder stopped reading
		}
		k = n
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// rttProbe is a running probe process and the samples it reported.
type rttProbe struct {
	cmd     *exec.Cmd
	mounted io.WriteCloser     // the probe's stdin: a line starts its calibration
	first   chan time.Duration // the calibration's median, once the probe has printed it
	start   time.Duration      // the calibration's median
	mu      sync.Mutex         // guards runs
	runs    []time.Duration
	done    chan struct{} // the reader ended
}

// probeName is the name in the mount's root the layer answers for the probe.
func probeName() string { return fmt.Sprintf(".iotap-rtt-probe-%d", os.Getpid()) }

// startProbe starts the probe process for the mount at mnt, which need not be mounted
// yet: the probe's start overlaps the mount's (calibrate then starts the timing). The
// caller's thread must stay locked (the probe dies with it: Pdeathsig).
func startProbe(mnt string) (*rttProbe, error) {
	cmd := exec.Command("/proc/self/exe", ProbeCommand, mnt+"/"+probeName(),
		strconv.Itoa(probeCalibration), strconv.Itoa(probeSample), probeInterval.String())
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		_ = in.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	first := make(chan time.Duration, 1)
	p := &rttProbe{cmd: cmd, mounted: in, first: first, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		for n := 0; sc.Scan(); n++ {
			v, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil || v <= 0 {
				continue
			}
			if n == 0 {
				first <- time.Duration(v)
				continue
			}
			p.mu.Lock()
			p.runs = append(p.runs, time.Duration(v))
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	return p, nil
}

// calibrate tells the probe the layer is mounted and waits for its calibration. When it
// fails, the probe is ended.
func (p *rttProbe) calibrate() error {
	_, err := io.WriteString(p.mounted, "\n")
	_ = p.mounted.Close()
	if err == nil {
		select {
		case p.start = <-p.first:
			return nil
		case <-p.done:
		case <-time.After(probeStartWait):
		}
	}
	p.kill()
	return errors.New("the round-trip probe gave no calibration")
}

func (p *rttProbe) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// stop ends the probe and returns the round trip it measured, less the layer's own time
// handling the probe's lookups (srv.Probes).
func (p *rttProbe) stop(srv *fusefs.Server) trace.RoundTrip {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
	}
	p.kill()
	var handling time.Duration
	if n, d := srv.Probes(); n > 0 {
		handling = d / time.Duration(n)
	}
	rt := trace.RoundTrip{Start: max(p.start-handling, 0)}
	p.mu.Lock()
	runs := slices.Clone(p.runs)
	p.mu.Unlock()
	if len(runs) > 0 {
		slices.Sort(runs)
		rt.Run = max(runs[len(runs)/2]-handling, 0)
		rt.Samples = uint64(len(runs))
	}
	return rt
}
