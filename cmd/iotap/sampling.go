// Sampling the storage client and iotap itself while recording and replaying: the
// flags, and finding the client (procsample.WriteSummaries prints the summary lines).

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

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
// s3:// target, whose client is iotap) and this process, in role self, into sink (the trace
// writer, whose Origin is origin). It returns nil when --sample-interval is 0.
func (o *sampleOptions) startSampling(e *env, sink procsample.Sink, origin int64, target string) *procsample.Sampler {
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
	return procsample.Start(sink, origin, o.SampleInterval, procs, e.log)
}
