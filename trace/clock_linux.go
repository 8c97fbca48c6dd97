package trace

import (
	"bytes"
	"os"
)

// kernelClockIsTSC says the kernel keeps time with the time-stamp counter. It switches
// away from it when its watchdog finds the counter unstable.
func kernelClockIsTSC() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && bytes.Equal(bytes.TrimSpace(b), []byte("tsc"))
}
