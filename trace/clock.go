package trace

import (
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock (CLOCK_MONOTONIC on Linux, read through the
// vDSO). The runtime keeps this linkname available for external packages.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns the monotonic clock in nanoseconds. It is cheap (no system call, no
// allocation); event Start times are Now() minus the writer's Origin.
//
// After CalibrateClock, where the kernel's own clock source is the CPU's time-stamp
// counter, Now reads the counter directly and scales it: 10 ns instead of 24 on a warm
// cache, and no access to the vDSO's data page, which in a FUSE daemon is cold on every
// request (the tracing layer reads the clock about three times per request). It stays
// within microseconds of CLOCK_MONOTONIC (see retune).
func Now() int64 {
	if c := cycleClk.Load(); c != nil {
		return c.at(cycles())
	}
	return nanotime()
}

// cycleClock maps the cycle counter to the monotonic clock: ns0 at counter c0, then mult
// ns per cycle (32.32 fixed point).
type cycleClock struct {
	c0, ns0 int64
	mult    uint64
}

func (c *cycleClock) at(cyc int64) int64 {
	d := max(cyc-c.c0, 0) // another CPU's counter may be a few cycles behind the anchor's
	hi, lo := bits.Mul64(uint64(d), c.mult)
	return c.ns0 + int64(hi<<32|lo>>32)
}

var (
	cycleClk  atomic.Pointer[cycleClock] // nil: Now reads nanotime
	clockOnce sync.Once
)

// ClockEnv names the environment variable that keeps Now on the vDSO clock when set to
// "vdso" (for comparisons, or on a machine whose counters are suspected to drift).
const ClockEnv = "IOTAP_CLOCK"

// clockSteps are the waits between calibrations: the first after 20 ms, then longer
// baselines; the last repeats for as long as the process lives.
var clockSteps = []time.Duration{20 * time.Millisecond, time.Second, 4 * time.Second,
	16 * time.Second, 64 * time.Second, 256 * time.Second, 10 * time.Minute}

// CalibrateClock makes Now read the CPU's cycle counter once it has been calibrated
// against CLOCK_MONOTONIC (20 ms from the first call; Now reads the vDSO clock until
// then), if this CPU has a usable counter: amd64, and a kernel that uses the time-stamp
// counter as its own clock source (it does only when the counter is invariant and
// synchronized across CPUs). The calibration is refined in the background with longer
// baselines, and Now goes back to the vDSO clock if the kernel stops using the counter.
// It returns at once; later calls do nothing.
func CalibrateClock() {
	clockOnce.Do(func() {
		if !haveCycles || os.Getenv(ClockEnv) == "vdso" || !kernelClockIsTSC() {
			return
		}
		n0, c0 := clockPair()
		var step func(i int)
		step = func(i int) {
			time.AfterFunc(clockSteps[i], func() {
				if !kernelClockIsTSC() {
					cycleClk.Store(nil)
					return
				}
				next := min(i+1, len(clockSteps)-1)
				n1, c1 := clockPair()
				if c := retune(cycleClk.Load(), n0, c0, n1, c1, clockSteps[next].Nanoseconds()); c != nil {
					cycleClk.Store(c)
				}
				step(next)
			})
		}
		step(0)
	})
}

// clockPair reads the monotonic clock and the cycle counter at the same moment: the
// counter on either side of the clock, in the tightest of a few tries.
func clockPair() (ns, cyc int64) {
	best := int64(-1)
	for range 8 {
		a := cycles()
		n := nanotime()
		b := cycles()
		if w := b - a; w >= 0 && (best < 0 || w < best) {
			best, ns, cyc = w, n, a+w/2
		}
	}
	return ns, cyc
}

// retune returns the clock to use from counter c1 on, given the calibration pairs
// (n0, c0) and (n1, c1) and the current clock old (nil: none yet). The rate is the one
// measured between the pairs. The new clock starts where old is at c1, so Now never
// jumps, and its rate is corrected so that the offset from the monotonic clock (about the
// error of the previous rate times the time since) shrinks to zero over the next horizon
// ns; the correction is at most 0.1 %, so the clock stays monotonic and smooth.
func retune(old *cycleClock, n0, c0, n1, c1, horizon int64) *cycleClock {
	if c1 <= c0 || n1 <= n0 || horizon <= 0 {
		return old
	}
	rate := float64(n1-n0) / float64(c1-c0) // ns per cycle
	ns0 := n1
	if old != nil {
		ns0 = old.at(c1)
	}
	off := float64(ns0 - n1) // ns ahead of the monotonic clock
	corr := min(max(-off/float64(horizon), -1e-3), 1e-3)
	return &cycleClock{c0: c1, ns0: ns0, mult: uint64(rate * (1 + corr) * (1 << 32))}
}
