package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/stats"
)

// queueDepthStats is a job that keeps 16 reads in flight for 3 s (each resubmitted as its
// predecessor ends, as fio at iodepth 16 does) while writing one block at a time.
func queueDepthStats(t *testing.T) *stats.Stats {
	t.Helper()
	h := &trace.Header{Hostname: "h", WallStart: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	a := stats.NewAccumulator("qd16", h, stats.Options{})
	const depth = 16
	var ends [depth]int64
	for i := 0; ends[i%depth] < int64(3*time.Second); i++ {
		k := i % depth
		s := int64(k) // the first 16 at once
		if i >= depth {
			s = ends[k]
		}
		d := int64(80_000 + (i*7919)%20_000)
		ends[k] = s + d
		a.Add(&trace.Event{Op: trace.OpRead, Start: s, Dur: d, Path: 2, Handle: 1, Size: 4096, Ret: 4096, Tid: 7, Pid: 7})
		if k == 0 {
			a.Add(&trace.Event{Op: trace.OpWrite, Start: s, Dur: 5_000, Path: 3, Handle: 2, Size: 4096, Ret: 4096, Tid: 8, Pid: 8})
		}
	}
	return a.Finish(nil, nil, nil)
}

// TestInflightReport: a job at queue depth 16 is reported at depth 16 in every format; an
// operation served one at a time is not listed as overlapping.
func TestInflightReport(t *testing.T) {
	r, err := Build([]*stats.Stats{queueDepthStats(t)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Total struct {
			Ops []struct {
				Op       string
				Inflight *struct {
					Max, P50, P99 uint32
					Mean          float64
					Hist          []struct{ Depth, Count uint64 }
				}
			}
			InflightIntervals *struct {
				WidthNs int64 `json:"width_ns"`
				Ops     []struct {
					Op   string
					Mean []float64
					Max  []uint32
				}
			} `json:"inflight_intervals"`
		}
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint32{}
	for _, o := range doc.Total.Ops {
		if o.Inflight == nil {
			t.Fatalf("%s: no inflight in the JSON", o.Op)
		}
		got[o.Op] = o.Inflight.Max
		if o.Op == "read" && (o.Inflight.P50 != 16 || o.Inflight.P99 != 16 || o.Inflight.Mean < 15.9) {
			t.Errorf("read inflight %+v, want 16 throughout", o.Inflight)
		}
	}
	if got["read"] != 16 || got["write"] != 1 {
		t.Errorf("max depth %v, want read 16 and write 1", got)
	}
	ii := doc.Total.InflightIntervals
	if ii == nil || len(ii.Ops) != 1 || ii.Ops[0].Op != "read" || len(ii.Ops[0].Mean) < 10 {
		t.Fatalf("inflight_intervals %+v: want the read series only", ii)
	}
	for i, m := range ii.Ops[0].Mean[1 : len(ii.Ops[0].Mean)-1] { // whole intervals
		if m < 15.5 || m > 16 || ii.Ops[0].Max[i+1] != 16 {
			t.Errorf("interval %d: mean %.2f max %d, want 16", i+1, m, ii.Ops[0].Max[i+1])
		}
	}

	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	line := ""
	for _, l := range strings.Split(txt.String(), "\n") {
		if strings.HasPrefix(l, "in flight at once") {
			line = l
		}
	}
	if !strings.Contains(line, "read max 16, p50 16, p99 16") || strings.Contains(line, "write") {
		t.Errorf("text line %q: want read at 16 and no write", line)
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"In-flight depth over time", "In-flight depth of the operations that overlapped", "read max 16, p50 16"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
