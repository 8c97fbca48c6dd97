package fusefs

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock (CLOCK_MONOTONIC on Linux, read through the vDSO).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// now returns the monotonic clock in ns. It is the clock trace.Now reads.
func now() int64 { return nanotime() }
