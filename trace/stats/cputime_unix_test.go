//go:build unix

package stats

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user+system CPU time, so that benchmarks can report
// events per CPU second, which a loaded machine does not distort the way it distorts
// wall-clock rates.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
