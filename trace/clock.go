package trace

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock (CLOCK_MONOTONIC on Linux, read through the
// vDSO). The runtime keeps this linkname available for external packages.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in nanoseconds. It is cheap (no system call, no
// allocation); event Start times are Now() minus the writer's Origin.
func Now() int64 { return nanotime() }
