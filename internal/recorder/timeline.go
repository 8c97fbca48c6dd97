// The recording's timeline at debug level: where its fixed cost goes.

package recorder

import (
	"time"

	"github.com/iotap/iotap/trace"
)

// timeline logs at debug level (IOTAP_DEBUG) each step of a recording's start and end, with
// the time since `iotap record` or `iotap mount` began, the same clock in the recorder
// process as in the one that started it: what a recording costs besides the job, step by
// step (bench/startup.sh measures the whole).
type timeline struct {
	log    logger
	origin int64 // trace.Now() when the command began
}

// mark logs that step has just ended.
func (t timeline) mark(step string) {
	if t.log == nil || t.origin == 0 {
		return
	}
	t.log.Debug("timeline", "step", step, "at", time.Duration(trace.Now()-t.origin).Round(10*time.Microsecond))
}
