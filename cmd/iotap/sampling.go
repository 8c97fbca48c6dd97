// Sampling the storage client and iotap itself while recording and replaying: the
// flags, finding the client, and the summary lines.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/format"
	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// sampleOptions are the flags that choose what is sampled, shared by record, mount and
// replay.
type sampleOptions struct {
	ClientPIDs     []int
	SampleInterval time.Duration
}

func (o *sampleOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&o.ClientPIDs, "client-pid", nil, "sample the memory, CPU and I/O of process `pid` as the storage client "+
		"(repeatable; default: the FUSE daemon serving the target's mount, found by itself)")
	fs.DurationVar(&o.SampleInterval, "sample-interval", procsample.DefaultInterval,
		"sample the storage client and iotap itself every `interval` into the trace (0: no sampling)")
}

func (o *sampleOptions) check() error {
	if o.SampleInterval < 0 {
		return usageErrorf("--sample-interval must not be negative")
	}
	if o.SampleInterval > 0 && o.SampleInterval < time.Millisecond {
		return usageErrorf("--sample-interval %v: want at least 1ms (or 0 for none)", o.SampleInterval)
	}
	for _, p := range o.ClientPIDs {
		if p <= 0 {
			return usageErrorf("--client-pid %d: want a process id", p)
		}
		if _, err := procsample.Read(p); err != nil {
			return usageErrorf("--client-pid %d: %v", p, err)
		}
	}
	return nil
}

// clientsOf returns the processes to sample as the storage client of target: those named
// with --client-pid, else the FUSE daemon serving target's mount, if any. note says which,
// or why there is none when that is worth saying ("" for a local file system).
func (o *sampleOptions) clientsOf(target string) (procs []procsample.Process, note string) {
	if len(o.ClientPIDs) > 0 {
		var names []string
		for _, p := range o.ClientPIDs {
			pr := procsample.Process{Role: trace.RoleClient, Pid: p, Name: procsample.Comm(p)}
			procs = append(procs, pr)
			names = append(names, fmt.Sprintf("%s (pid %d)", pr.Name, p))
		}
		return procs, "sampling the storage client " + strings.Join(names, ", ")
	}
	c, err := procsample.FindClient(target)
	switch {
	case err == nil:
		note = fmt.Sprintf("sampling the storage client %s (pid %d), which serves %s (%s)", c.Name, c.Pid, c.Mount, c.FSType)
		return []procsample.Process{{Role: trace.RoleClient, Pid: c.Pid, Name: c.Name}}, note
	case errors.Is(err, procsample.ErrNoClient):
		return nil, ""
	case errors.Is(err, procsample.ErrKernelClient):
		return nil, fmt.Sprintf("%v; --client-pid names a helper process to sample", err)
	}
	return nil, fmt.Sprintf("the storage client is not sampled: %v (--client-pid names it)", err)
}

// startSampling starts sampling the storage client of target (when it has one; none for an
// s3:// target, whose client is iotap) and this process, in role self, into w. It returns
// nil when --sample-interval is 0.
func (o *sampleOptions) startSampling(e *env, w *trace.Writer, target string) *procsample.Sampler {
	if o.SampleInterval <= 0 {
		return nil
	}
	var procs []procsample.Process
	if target != "" {
		var note string
		procs, note = o.clientsOf(target)
		if note != "" {
			_, _ = fmt.Fprintf(e.stderr, "iotap: %s\n", termsafe.Text(note))
		}
	}
	procs = append(procs, procsample.Process{Role: trace.RoleSelf, Pid: os.Getpid(), Name: "iotap"})
	return procsample.Start(w, w.Origin(), o.SampleInterval, procs, e.log)
}

// writeSampleSummary prints one line per sampled process: peak and mean resident memory,
// CPU time, and CPU seconds per GB moved when moved (the job's bytes read and written) is
// known. self names iotap's role ("recorder" or "replayer").
func writeSampleSummary(w io.Writer, sums []procsample.Summary, moved uint64, self string) {
	for _, s := range sums {
		who := "storage client " + s.Name
		if s.Role == trace.RoleSelf {
			who = "iotap " + self
		}
		if s.Samples == 0 {
			_, _ = fmt.Fprintf(w, "  %s (pid %d): not sampled: %v\n", termsafe.Name(who), s.Pid, s.Err)
			continue
		}
		cpu := s.User + s.Sys
		line := fmt.Sprintf("  %s (pid %d): peak RSS %s, mean %s; CPU %s user + %s sys", who, s.Pid,
			format.Bytes(s.PeakRSS), format.Bytes(s.MeanRSS), secs(s.User), secs(s.Sys))
		if moved > 0 {
			line += fmt.Sprintf(" = %.2f CPU-s per GB moved", cpu.Seconds()/(float64(moved)/1e9))
		}
		if s.Gone {
			line += " (it exited during the run)"
		}
		_, _ = fmt.Fprintln(w, termsafe.Text(line))
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }
