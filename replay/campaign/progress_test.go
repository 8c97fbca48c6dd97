package campaign

import (
	"bytes"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressRate: the replay's progress bar gives its rate over the time since the run
// started: 625 ops in about 0.3 s is some thousands of ops/s, not tens of millions.
func TestProgressRate(t *testing.T) {
	var out bytes.Buffer
	var done atomic.Uint64
	stop := startProgress(&out, "always", 2015, "run", &done)
	done.Store(625) // the run's first ops, done before the bar's first update
	time.Sleep(300 * time.Millisecond)
	stop()
	rates := regexp.MustCompile(`(\d+) ops/s`).FindAllStringSubmatch(out.String(), -1)
	if len(rates) == 0 {
		t.Fatalf("no rate in the bar's output:\n%q", out.String())
	}
	for _, m := range rates {
		r, _ := strconv.Atoi(m[1])
		if r > 625*1000/50 { // more than 625 ops in 50 ms: the clock started late
			t.Errorf("rate %d ops/s for 625 ops in about 300 ms", r)
		}
	}
}
