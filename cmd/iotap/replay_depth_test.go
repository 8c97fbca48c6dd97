package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/replay"
)

// TestReplayPredictsAtQueueDepth records fio reading at queue depth 16 (libaio, direct
// I/O) and replays it: the ops late together count once in the time the replayer held
// ops back (lag_union_ns, at most the run's span, where their summed lag is several
// times it), and the prediction's low end is the span less that union and the other
// terms, recomputed here from the summary's figures.
func TestReplayPredictsAtQueueDepth(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "fio")
	dir := t.TempDir()
	work, tgt := filepath.Join(dir, "work"), filepath.Join(dir, "target")
	mustDo(t, os.Mkdir(work, 0o755))
	mustDo(t, os.Mkdir(tgt, 0o755))
	tr := filepath.Join(dir, "fio.iotap")
	rec := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--",
		"fio", "--name=qd16", "--directory=.", "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio",
		"--iodepth=16", "--size=8m", "--runtime=2", "--time_based")
	rec.Dir = work
	if out, err := rec.CombinedOutput(); err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	prefix := filepath.Join(dir, "res")
	code, stdout, stderr := runIotap(t, nil, "replay", tr, "--target", tgt, "-o", prefix, "--sample-interval", "0")
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s\n%s", code, stdout, stderr)
	}
	js, err := os.ReadFile(prefix + ".t1.r1.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Span           int64              `json:"replay_span_ns"`
		LagTotal       int64              `json:"lag_total_ns"`
		LagUnion       *int64             `json:"lag_union_ns"`
		ThinkWait      int64              `json:"think_wait_ns"`
		ThinkEstimated int64              `json:"think_estimated"`
		RoundTrip      int64              `json:"round_trip_ns"`
		Depth          int                `json:"max_queue_depth"`
		Divergences    int                `json:"divergences"`
		Prediction     *replay.Prediction `json:"prediction"`
	}
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if s.LagUnion == nil || s.Prediction == nil {
		t.Fatalf("no lag union or no prediction in the summary:\n%s", js)
	}
	union := *s.LagUnion
	t.Logf("span %v, lag summed %v, union %v; %s", time.Duration(s.Span), time.Duration(s.LagTotal), time.Duration(union), s.Prediction.Line())
	if s.Depth != 16 || s.Divergences != 0 {
		t.Errorf("replayed at depth %d with %d divergences, want 16 and 0", s.Depth, s.Divergences)
	}
	if union <= 0 || union > s.LagTotal || union > s.Span {
		t.Errorf("lag union %v: want above 0, at most the summed lag %v and the span %v",
			time.Duration(union), time.Duration(s.LagTotal), time.Duration(s.Span))
	}
	est := s.ThinkEstimated * s.RoundTrip / 2
	slower := int64(float64(min(s.ThinkWait, s.Span)) * replay.ModelError.Think)
	want := max(s.Span-union-est-slower-int64(float64(s.Span)*replay.ModelError.Runtime), 0)
	if s.Prediction.RuntimeLowNs != want {
		t.Errorf("runtime low %v, want the span less the lag union and the other terms: %v",
			time.Duration(s.Prediction.RuntimeLowNs), time.Duration(want))
	}
	if !strings.Contains(stdout, "some op late during") {
		t.Errorf("the summary does not say how long ops were late:\n%s", stdout)
	}
}
