//go:build !linux

package trace

import "time"

// threadCPU returns 0: the encoder's CPU time is measured on Linux only.
func threadCPU() time.Duration { return 0 }
