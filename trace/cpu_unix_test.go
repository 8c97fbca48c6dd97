//go:build unix

package trace

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time of this process so far, so benchmarks can
// report CPU per event, which a loaded machine distorts less than wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
