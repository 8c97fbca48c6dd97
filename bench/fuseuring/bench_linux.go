//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// driveResult is what one drive process prints.
type driveResult struct {
	Op       string  `json:"op"`
	Ops      int     `json:"ops"`   // operations issued, warm-up included
	Timed    int     `json:"timed"` // operations timed
	MedianNs int64   `json:"median_ns"`
	P99Ns    int64   `json:"p99_ns"`
	OpsPerS  float64 `json:"ops_per_s"`
	CPUNs    int64   `json:"cpu_ns"` // the process's CPU time over the timed operations
}

// drive is the "drive" subcommand: N timed operations on one file, after N/10 untimed ones.
func drive(args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("drive", flag.ContinueOnError)
	path := fl.String("path", "", "`file` to stat or read")
	op := fl.String("op", "stat", "`stat` or pread (4 KiB at offset 0)")
	n := fl.Int("n", 20000, "timed operations")
	cpu := fl.Int("cpu", -1, "pin the timed thread to `cpu` (-1: no pinning)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *path == "" || *n < 1 {
		return errors.New("drive: -path and a positive -n are required")
	}
	runtime.LockOSThread()
	if *cpu >= 0 {
		var set unix.CPUSet
		set.Set(*cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("drive: pin to CPU %d: %w", *cpu, err)
		}
	}
	var do func() error
	switch *op {
	case "stat":
		var st unix.Stat_t
		do = func() error { return unix.Stat(*path, &st) }
	case "pread":
		fd, err := unix.Open(*path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("drive: open %s: %w", *path, err)
		}
		defer func() { _ = unix.Close(fd) }()
		buf := make([]byte, 4096)
		do = func() error {
			k, err := unix.Pread(fd, buf, 0)
			if err == nil && k != len(buf) {
				err = fmt.Errorf("short read: %d bytes", k)
			}
			return err
		}
	default:
		return fmt.Errorf("drive: unknown op %q", *op)
	}
	warm := max(*n/10, 1)
	for range warm {
		if err := do(); err != nil {
			return fmt.Errorf("drive: %s %s: %w", *op, *path, err)
		}
	}
	lat := make([]int64, *n)
	cpu0 := cpuTime()
	start := time.Now()
	for i := range lat {
		t := time.Now()
		if err := do(); err != nil {
			return fmt.Errorf("drive: %s %s: %w", *op, *path, err)
		}
		lat[i] = int64(time.Since(t))
	}
	total := time.Since(start)
	cpuUsed := cpuTime() - cpu0
	slices.Sort(lat)
	return json.NewEncoder(stdout).Encode(driveResult{
		Op: *op, Ops: warm + *n, Timed: *n, MedianNs: lat[len(lat)/2], P99Ns: lat[len(lat)*99/100],
		OpsPerS: float64(*n) / total.Seconds(), CPUNs: int64(cpuUsed),
	})
}

// target is one thing bench measures: native tmpfs, or the server with a transport.
type target struct {
	name      string // as given in -targets
	transport string // "" for native
	readers   int
	noPin     bool // uring:nopin: queue threads not pinned to their CPUs
	deferTR   bool // uring:defer: rings with IORING_SETUP_DEFER_TASKRUN
}

func parseTargets(s string) ([]target, error) {
	var ts []target
	for _, name := range strings.Split(s, ",") {
		kind, arg, hasArg := strings.Cut(name, ":")
		t := target{name: name, transport: kind, readers: 1}
		switch {
		case kind == "native" && !hasArg:
			t.transport = ""
		case kind == "uring" && (!hasArg || arg == "nopin" || arg == "defer"):
			t.noPin, t.deferTR = arg == "nopin", arg == "defer"
		case kind == "dev":
			if hasArg {
				r, err := strconv.Atoi(arg)
				if err != nil || r < 1 {
					return nil, fmt.Errorf("target %q: readers must be a positive number", name)
				}
				t.readers = r
			}
		default:
			return nil, fmt.Errorf("unknown target %q (native, dev, dev:N, uring, uring:nopin, uring:defer)", name)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// phaseResult is one drive run with the server's requests during it.
type phaseResult struct {
	driveResult
	requests, viaURing uint64
	serverCPU          time.Duration // over the whole drive process, warm-up included
}

// bench is the "bench" subcommand.
func bench(ctx context.Context, args []string, stdout io.Writer) error {
	fl := flag.NewFlagSet("bench", flag.ContinueOnError)
	work := fl.String("work", "/var/tmp/fuseuring", "work `dir` (a tmpfs and a mount point are made in it)")
	targetList := fl.String("targets", "native,dev,uring", "comma-separated: native, dev, dev:N (N reader threads), uring, uring:nopin (queue threads not pinned), uring:defer (DEFER_TASKRUN rings)")
	rounds := fl.Int("rounds", 5, "rounds; the targets' order rotates each round")
	n := fl.Int("n", 20000, "timed operations per phase")
	depth := fl.Int("depth", 8, "entries per io_uring queue")
	cpu := fl.Int("driver-cpu", -1, "pin the drive processes' timed thread to `cpu` (-1: no pinning)")
	jobs := fl.Int("jobs", 1, "drive processes running at once on each phase")
	if err := fl.Parse(args); err != nil {
		return err
	}
	targets, err := parseTargets(*targetList)
	if err != nil {
		return err
	}
	if *rounds < 1 || *n < 1 || *jobs < 1 {
		return errors.New("bench: -rounds, -n and -jobs must be positive")
	}
	l := load{n: *n, cpu: *cpu, jobs: *jobs}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	tmpfs, mnt := filepath.Join(*work, "tmpfs"), filepath.Join(*work, "mnt")
	for _, d := range []string{tmpfs, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", tmpfs, "tmpfs", 0, "size=16m"); err != nil {
		return fmt.Errorf("mount tmpfs: %w", err)
	}
	defer func() { _ = unix.Unmount(tmpfs, unix.MNT_DETACH) }()
	if err := os.WriteFile(filepath.Join(tmpfs, fileName), make([]byte, fileSize), 0o644); err != nil {
		return err
	}
	ops := []string{"stat", "pread"}
	res := map[string]map[string][]phaseResult{}
	for _, t := range targets {
		res[t.name] = map[string][]phaseResult{}
	}
	for r := range *rounds {
		for i := range targets {
			t := targets[(i+r)%len(targets)]
			var prs []phaseResult
			if t.transport == "" {
				prs, err = runNative(ctx, self, filepath.Join(tmpfs, fileName), ops, l)
			} else {
				prs, err = runServer(ctx, self, mnt, t, *depth, ops, l)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, t.name, err)
			}
			for k, pr := range prs {
				res[t.name][ops[k]] = append(res[t.name][ops[k]], pr)
			}
			fmt.Fprintf(os.Stderr, "round %d %-8s stat %6.1f µs  pread %6.1f µs\n", r+1, t.name,
				float64(prs[0].MedianNs)/1e3, float64(prs[1].MedianNs)/1e3)
		}
	}
	_, err = io.WriteString(stdout, table(targets, ops, res))
	return err
}

// load is what each phase runs: jobs drive processes at once, each timing n operations.
type load struct{ n, cpu, jobs int }

// runDrive runs l.jobs drive processes at once and combines their results: the median of
// their medians, the largest p99, and sums of rates, operations and CPU time.
func runDrive(ctx context.Context, self, path, op string, l load) (driveResult, error) {
	type res struct {
		dr  driveResult
		err error
	}
	ch := make(chan res, l.jobs)
	for range l.jobs {
		go func() {
			dr, err := runDrive1(ctx, self, path, op, l)
			ch <- res{dr, err}
		}()
	}
	var all driveResult
	var meds []float64
	var errs []error
	for range l.jobs {
		r := <-ch
		errs = append(errs, r.err)
		all.Op = r.dr.Op
		all.Ops += r.dr.Ops
		all.Timed += r.dr.Timed
		all.OpsPerS += r.dr.OpsPerS
		all.CPUNs += r.dr.CPUNs
		all.P99Ns = max(all.P99Ns, r.dr.P99Ns)
		meds = append(meds, float64(r.dr.MedianNs))
	}
	all.MedianNs = int64(median(meds))
	return all, errors.Join(errs...)
}

func runDrive1(ctx context.Context, self, path, op string, l load) (driveResult, error) {
	cmd := exec.CommandContext(ctx, self, "drive", "-path", path, "-op", op, "-n", strconv.Itoa(l.n), "-cpu", strconv.Itoa(l.cpu))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return driveResult{}, fmt.Errorf("drive %s: %w", op, err)
	}
	var dr driveResult
	if err := json.Unmarshal(out, &dr); err != nil {
		return driveResult{}, fmt.Errorf("drive %s output %q: %w", op, out, err)
	}
	return dr, nil
}

func runNative(ctx context.Context, self, path string, ops []string, l load) ([]phaseResult, error) {
	var prs []phaseResult
	for _, op := range ops {
		dr, err := runDrive(ctx, self, path, op, l)
		if err != nil {
			return nil, err
		}
		prs = append(prs, phaseResult{driveResult: dr})
	}
	return prs, nil
}

// serverProc is a running serve child with its stdin and stdout lines.
type serverProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

func (p *serverProc) counts() (dev, uring uint64, cpu time.Duration, err error) {
	if _, err := io.WriteString(p.in, "counts\n"); err != nil {
		return 0, 0, 0, err
	}
	return p.readCounts()
}

func (p *serverProc) readCounts() (dev, uring uint64, cpu time.Duration, err error) {
	for p.lines.Scan() {
		line, ok := strings.CutPrefix(p.lines.Text(), "counts ")
		if !ok {
			continue
		}
		var m map[string]map[string]uint64
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			return 0, 0, 0, fmt.Errorf("server counts %q: %w", line, err)
		}
		for op, k := range m["dev"] {
			if op != "FORGET" && op != "BATCH_FORGET" && op != "INIT" {
				dev += k
			}
		}
		for _, k := range m["uring"] {
			uring += k
		}
		return dev, uring, time.Duration(m["cpu"]["ns"]), nil
	}
	return 0, 0, 0, fmt.Errorf("server ended without counts: %v", p.lines.Err())
}

func runServer(ctx context.Context, self, mnt string, t target, depth int, ops []string, l load) (prs []phaseResult, err error) {
	cmd := exec.CommandContext(ctx, self, "serve", "-mnt", mnt, "-transport", t.transport,
		"-readers", strconv.Itoa(t.readers), "-depth", strconv.Itoa(depth), "-pin="+strconv.FormatBool(!t.noPin),
		"-defer-taskrun="+strconv.FormatBool(t.deferTR))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProc{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	mounted := false
	defer func() {
		if mounted {
			if uerr := unix.Unmount(mnt, 0); uerr != nil {
				_ = unix.Unmount(mnt, unix.MNT_DETACH)
				err = errors.Join(err, fmt.Errorf("unmount: %w", uerr))
			}
		}
		_ = in.Close()
		done := make(chan error, 1)
		go func() {
			_, _ = io.Copy(io.Discard, out)
			done <- cmd.Wait()
		}()
		select {
		case werr := <-done:
			if werr != nil {
				err = errors.Join(err, fmt.Errorf("server: %w", werr))
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			err = errors.Join(err, fmt.Errorf("server did not exit 10 s after unmount (killed: %w)", <-done))
		}
	}()
	if !p.lines.Scan() || !strings.HasPrefix(p.lines.Text(), "ready ") {
		return nil, fmt.Errorf("server did not become ready (%q)", p.lines.Text())
	}
	mounted = true
	path := filepath.Join(mnt, fileName)
	dev0, ur0, cpu0, err := p.counts()
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		dr, err := runDrive(ctx, self, path, op, l)
		if err != nil {
			return nil, err
		}
		dev1, ur1, cpu1, err := p.counts()
		if err != nil {
			return nil, err
		}
		prs = append(prs, phaseResult{driveResult: dr, requests: dev1 - dev0 + ur1 - ur0, viaURing: ur1 - ur0, serverCPU: cpu1 - cpu0})
		dev0, ur0, cpu0 = dev1, ur1, cpu1
	}
	return prs, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// table returns, per target and operation, the medians over rounds of the median and p99
// latency, of ops/s, of the requests and CPU per operation, and of the share served through
// io_uring; and the median over rounds of the per-round ratios of median latency and ops/s to
// the first FUSE target's (the base), measured in the same round.
func table(targets []target, ops []string, res map[string]map[string][]phaseResult) string {
	base := ""
	for _, t := range targets {
		if t.transport != "" {
			base = t.name
			break
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "| target | op | median µs | p99 µs | ops/s | median / %[1]s | ops/s / %[1]s | FUSE requests/op | via io_uring | caller CPU µs/op | server CPU µs/op |\n", base)
	fmt.Fprintln(&w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, op := range ops {
		for _, t := range targets {
			prs := res[t.name][op]
			var med, p99, rate, rpo, share, ccpu, scpu, medRatio, rateRatio []float64
			for k, pr := range prs {
				med = append(med, float64(pr.MedianNs)/1e3)
				p99 = append(p99, float64(pr.P99Ns)/1e3)
				rate = append(rate, pr.OpsPerS)
				rpo = append(rpo, float64(pr.requests)/float64(pr.Ops))
				ccpu = append(ccpu, float64(pr.CPUNs)/1e3/float64(pr.Timed))
				scpu = append(scpu, float64(pr.serverCPU)/1e3/float64(pr.Ops))
				if pr.requests > 0 {
					share = append(share, float64(pr.viaURing)/float64(pr.requests))
				}
				if b := res[base][op]; base != "" && k < len(b) {
					medRatio = append(medRatio, float64(pr.MedianNs)/float64(b[k].MedianNs))
					rateRatio = append(rateRatio, pr.OpsPerS/b[k].OpsPerS)
				}
			}
			rq, via, sc, mr, rr := "–", "–", "–", "–", "–"
			if t.transport != "" {
				rq = fmt.Sprintf("%.2f", median(rpo))
				via = fmt.Sprintf("%.0f %%", 100*median(share))
				sc = fmt.Sprintf("%.1f", median(scpu))
			}
			if len(medRatio) > 0 {
				mr, rr = fmt.Sprintf("%.2f", median(medRatio)), fmt.Sprintf("%.2f", median(rateRatio))
			}
			fmt.Fprintf(&w, "| %s | %s | %.1f | %.1f | %.0f | %s | %s | %s | %s | %.1f | %s |\n", t.name, op, median(med), median(p99),
				median(rate), mr, rr, rq, via, median(ccpu), sc)
		}
	}
	return w.String()
}
