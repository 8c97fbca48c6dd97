package report

import (
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
)

// TestRecordingCost: the footer's cost becomes per-request figures; a footer without one
// (older traces, or nothing measured) gives none.
func TestRecordingCost(t *testing.T) {
	if c := recordingCost(&trace.Footer{Events: 5}); c != nil {
		t.Errorf("no cost measured: %+v", c)
	}
	if c := recordingCost(nil); c != nil {
		t.Errorf("no footer: %+v", c)
	}
	f := &trace.Footer{EncodeCPU: 3 * time.Millisecond, Layer: trace.LayerCost{
		Requests: 1000, InLayer: 40 * time.Millisecond, Self: 2 * time.Millisecond,
		Threads: 10, Resolve: time.Millisecond,
	}}
	c := recordingCost(f)
	if c == nil || c.SelfPerReq != 2000 || c.SelfShare != 0.05 || c.Threads != 10 || c.ResolveNs != 1e6 || c.EncodeCPUNs != 3e6 {
		t.Fatalf("cost %+v", c)
	}
	s := c.Summary()
	for _, want := range []string{"2.00µs of the layer's own work per request", "5.0% of the 40.0µs", "10 new threads", "100µs each", "3.00ms CPU"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
	f.Layer.Connector, f.Layer.Late, f.Layer.Missing = true, 2, 1
	s = recordingCost(f).Summary()
	if want := "10 threads attributed from the kernel's proc connector, 2 late, 1 missing"; !strings.Contains(s, want) {
		t.Errorf("summary %q lacks %q", s, want)
	}
}
