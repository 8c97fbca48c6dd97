package trace

import (
	"math"
	"testing"
	"time"
)

// TestRetune checks the calibration's arithmetic on a counter of exactly 2.5 GHz against a
// monotonic clock: the first clock has the measured rate, a later one starts where the
// previous one is (no jump) and steers its offset to zero over the horizon, by at most
// 0.1 %.
func TestRetune(t *testing.T) {
	const ghz = 2.5
	cyc := func(ns int64) int64 { return int64(float64(ns) * ghz) }
	c := retune(nil, 1e9, cyc(1e9), 1e9+20e6, cyc(1e9+20e6), 1e9)
	if c == nil {
		t.Fatal("retune: no clock from two good pairs")
	}
	for _, ns := range []int64{1e9 + 20e6, 2e9, 1e12} {
		// 32.32 fixed point: within a part in 10⁹
		if got := c.at(cyc(ns)); math.Abs(float64(got-ns)) > 2+float64(ns)*1e-9 {
			t.Errorf("at %d ns: clock reads %d", ns, got)
		}
	}
	// A clock 50 µs ahead, retuned at 3 s with a 1 s horizon: continuous at 3 s, and on
	// the monotonic clock again 1 s later.
	ahead := &cycleClock{c0: c.c0, ns0: c.ns0 + 50e3, mult: c.mult}
	n := retune(ahead, 1e9, cyc(1e9), 3e9, cyc(3e9), 1e9)
	if got, want := n.at(cyc(3e9)), ahead.at(cyc(3e9)); got != want {
		t.Errorf("retune jumped: %d, was %d", got, want)
	}
	if got := n.at(cyc(4e9)); math.Abs(float64(got-4e9)) > 10 {
		t.Errorf("1 s after retuning the clock is %d ns off", got-4e9)
	}
	// 10 ms ahead: the correction is capped at 0.1 %, 1 ms over 1 s.
	far := &cycleClock{c0: c.c0, ns0: c.ns0 + 10e6, mult: c.mult}
	n = retune(far, 1e9, cyc(1e9), 3e9, cyc(3e9), 1e9)
	if got := n.at(cyc(4e9)) - 4e9; math.Abs(float64(got-9e6)) > 1e3 {
		t.Errorf("capped correction: %d ns ahead after 1 s, want 9 ms", got)
	}
	// Bad pairs keep the old clock.
	if got := retune(c, 2e9, cyc(2e9), 1e9, cyc(1e9), 1e9); got != c {
		t.Errorf("pairs out of order: clock replaced")
	}
	// A counter read on another CPU a little behind the anchor reads the anchor.
	if got := c.at(c.c0 - 100); got != c.ns0 {
		t.Errorf("counter behind the anchor: %d, want %d", got, c.ns0)
	}
}

// TestCycleClock checks the real counter against CLOCK_MONOTONIC once calibrated: close to
// it, monotonic on one goroutine, and measuring a sleep within 0.1 % of it.
func TestCycleClock(t *testing.T) {
	CalibrateClock()
	if !haveCycles || !kernelClockIsTSC() {
		t.Skip("no cycle clock here: not amd64, or the kernel's clock source is not tsc")
	}
	deadline := time.Now().Add(5 * time.Second)
	for cycleClk.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the cycle clock was not calibrated within 5 s (%s=%q?)", ClockEnv, "vdso")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// pair reads both clocks at one moment: Now on either side of nanotime, retried until
	// the goroutine was not preempted in between (a loaded CI machine preempts for ms).
	pair := func() (n, m int64) {
		for range 1000 {
			a := Now()
			m = nanotime()
			if b := Now(); b-a < 20e3 {
				return a + (b-a)/2, m
			}
		}
		t.Fatal("could not read the two clocks within 20 us of each other in 1000 tries")
		return 0, 0
	}
	for range 5 {
		n0, m0 := pair()
		if d := n0 - m0; d > 200e3 || d < -200e3 {
			t.Errorf("Now is %d ns from CLOCK_MONOTONIC", d)
		}
		time.Sleep(30 * time.Millisecond)
		n1, m1 := pair()
		if r := float64(n1-n0) / float64(m1-m0); math.Abs(r-1) > 2e-3 {
			t.Errorf("a 30 ms sleep: cycle clock / monotonic = %.6f", r)
		}
	}
	prev := Now()
	for range 1_000_000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went back: %d after %d", n, prev)
		}
		prev = n
	}
}

func BenchmarkNow(b *testing.B) {
	CalibrateClock()
	time.Sleep(50 * time.Millisecond)
	var s int64
	b.Run("cycles="+map[bool]string{true: "on", false: "off"}[cycleClk.Load() != nil], func(b *testing.B) {
		for b.Loop() {
			s += Now()
		}
	})
	b.Run("nanotime", func(b *testing.B) {
		for b.Loop() {
			s += nanotime()
		}
	})
	_ = s
}
