// Sampling the storage client and iotap itself while recording (and replaying): finding
// the client, and starting the sampler (procsample.WriteSummaries prints the summary lines).

package recorder

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/iotap/iotap/internal/procsample"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// Sampling is what is sampled besides the events: the memory, CPU and I/O of the storage
// client and of iotap itself. The replay command samples the same way.
type Sampling struct {
	// ClientPIDs are the storage client's processes; none: the FUSE daemon serving the
	// target's mount, found by itself.
	ClientPIDs []int
	// Interval is how often they are sampled (0: not at all).
	Interval time.Duration
}

// Check checks the interval and that each of ClientPIDs is a process that can be read.
// Its errors wrap ErrUsage.
func (s Sampling) Check() error {
	if s.Interval < 0 {
		return usageErrorf("--sample-interval must not be negative")
	}
	if s.Interval > 0 && s.Interval < time.Millisecond {
		return usageErrorf("--sample-interval %v: want at least 1ms (or 0 for none)", s.Interval)
	}
	for _, p := range s.ClientPIDs {
		if p <= 0 {
			return usageErrorf("--client-pid %d: want a process id", p)
		}
		if _, err := procsample.Read(p); err != nil {
			return usageErrorf("--client-pid %d: %v", p, err)
		}
	}
	return nil
}

// clientsOf returns the processes to sample as the storage client of target: ClientPIDs,
// else the FUSE daemon serving target's mount, if any. note says which, or why there is
// none when that is worth saying ("" for a local file system).
func (s Sampling) clientsOf(target string) (procs []procsample.Process, note string) {
	if len(s.ClientPIDs) > 0 {
		var names []string
		for _, p := range s.ClientPIDs {
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

// Start starts sampling the storage client of target (when it has one; none for target
// "", a place that is no directory, whose client is iotap) and this process, in role
// self, into sink (a trace writer, whose Origin is origin). It says on stderr which client
// it samples. It returns nil when Interval is 0.
func (s Sampling) Start(stderr io.Writer, log *slog.Logger, sink procsample.Sink, origin int64, target string) *procsample.Sampler {
	if s.Interval <= 0 {
		return nil
	}
	var procs []procsample.Process
	if target != "" {
		var note string
		procs, note = s.clientsOf(target)
		if note != "" {
			_, _ = fmt.Fprintf(stderr, "iotap: %s\n", termsafe.Text(note))
		}
	}
	procs = append(procs, procsample.Process{Role: trace.RoleSelf, Pid: os.Getpid(), Name: "iotap"})
	return procsample.Start(sink, origin, s.Interval, procs, log)
}
