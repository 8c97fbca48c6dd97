package fusefs

import "github.com/iotap/iotap/trace"

// now returns the monotonic clock in ns, the clock of trace event times.
func now() int64 { return trace.Now() }

var _ Recorder = (*trace.Writer)(nil)
