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
	"github.com/iotap/iotap/trace"
)

// TestRecordMeasuresRoundTrip: the recorder times the layer's round trip against its
// mount before the job and while it runs, stores it in the footer (and none of the probe's
// requests among the events), and a think-mode replay takes it out of the recorded gaps,
// saying so; --round-trip still overrides it.
func TestRecordMeasuresRoundTrip(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "sh", "cat", "sleep")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	tr := filepath.Join(dir, "rec.iotap")
	job := `for i in 1 2 3; do echo $i > f$i; cat f$i > /dev/null; sleep 0.6; done`
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", tr, "--", "sh", "-c", job)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "layer round trip ") {
		t.Errorf("record summary names no round trip:\n%s", out)
	}
	r, err := trace.Open(tr)
	mustDo(t, err)
	for {
		ev, err := r.Next()
		if err != nil {
			break
		}
		if name := r.PathName(ev.Path); strings.Contains(name, ".iotap-rtt-probe") {
			t.Errorf("the probe's request is in the trace: %v %q", ev.Op, name)
		}
	}
	f, ok := r.Footer()
	_ = r.Close()
	if !ok {
		t.Fatal("no footer")
	}
	rt := f.RoundTrip
	t.Logf("round trip %+v", rt)
	// A FUSE round trip on any machine: more than 1 µs, less than 10 ms.
	for _, d := range []time.Duration{rt.Start, rt.Run} {
		if d < time.Microsecond || d > 10*time.Millisecond {
			t.Errorf("round trip %+v: not a plausible FUSE round trip", rt)
		}
	}
	if rt.Samples < 1 {
		t.Errorf("%d samples while the job ran (about 1.8 s)", rt.Samples)
	}
	if code, stdout, stderr := runIotap(t, nil, "info", tr); code != 0 || !strings.Contains(stdout, "per request before the job") {
		t.Errorf("info does not show the round trip (exit %d):\n%s%s", code, stdout, stderr)
	}

	for _, tc := range []struct {
		name string
		flag []string
		want time.Duration
		src  string
	}{
		{"auto", nil, rt.Run, "measured by the recorder while the job ran"},
		{"flag", []string{"--round-trip", "7us"}, 7 * time.Microsecond, "--round-trip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := filepath.Join(dir, "t-"+tc.name)
			mustDo(t, os.Mkdir(tgt, 0o755))
			prefix := filepath.Join(dir, "res-"+tc.name)
			args := append([]string{"replay", tr, "--target", tgt, "-o", prefix, "--sample-interval", "0"}, tc.flag...)
			code, stdout, stderr := runReplayCLI(t, args...)
			if code != 0 {
				t.Fatalf("replay: exit %d\n%s\n%s", code, stdout, stderr)
			}
			js, err := os.ReadFile(prefix + ".t1.r1.json")
			mustDo(t, err)
			var s replay.Summary
			mustDo(t, json.Unmarshal(js, &s))
			if s.RoundTrip != tc.want || !strings.HasPrefix(s.RoundTripSource, tc.src) {
				t.Errorf("replay round trip %v (%s), want %v (%s)", s.RoundTrip, s.RoundTripSource, tc.want, tc.src)
			}
			if !strings.Contains(stdout, "recording layer round trip: "+tc.want.String()+" per request ("+tc.src) {
				t.Errorf("replay does not say which round trip it used:\n%s", stdout)
			}
		})
	}
}
