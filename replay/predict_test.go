package replay

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPredictInterval checks the interval's terms one by one on a summary whose figures
// are known: the time some op was late (the union of the lags, not their sum) lowers the
// low end, the run delay not waited raises the
// high end, each estimated think time widens both by half a round trip, and the model's
// error widens both by its share of the point.
func TestPredictInterval(t *testing.T) {
	s := &Summary{
		Timing: TimingThink.String(), ReplaySpan: 10 * time.Second, ReplayIO: 4 * time.Second,
		RecordedIO: 3 * time.Second, LagTotal: 900 * time.Millisecond, LagUnion: 500 * time.Millisecond, RunDelayCut: 200 * time.Millisecond,
		ThinkEstimated: 1000, RoundTrip: 40 * time.Microsecond, ThinkWait: 5 * time.Second, ReplayedOps: 10_000,
	}
	s.predict(Options{NativeRuntime: 2 * time.Second})
	p := s.Prediction
	est := int64(1000 * 40 * time.Microsecond / 2)
	model := int64(float64(10*time.Second) * ModelError.Runtime)
	slower := int64(float64(5*time.Second) * ModelError.Think)
	calls := 10_000 * int64(ModelError.Call)
	if want := int64(10*time.Second) - int64(500*time.Millisecond) - est - slower - model; p.RuntimeLowNs != want {
		t.Errorf("runtime low %v, want %v", time.Duration(p.RuntimeLowNs), time.Duration(want))
	}
	if want := int64(10*time.Second) + int64(200*time.Millisecond) + est + calls + model; p.RuntimeHighNs != want {
		t.Errorf("runtime high %v, want %v", time.Duration(p.RuntimeHighNs), time.Duration(want))
	}
	ioErr := int64(float64(4*time.Second) * ModelError.IO)
	if p.IOLowNs != int64(4*time.Second)-ioErr || p.IOHighNs != int64(4*time.Second)+ioErr+calls {
		t.Errorf("I/O interval %v–%v", time.Duration(p.IOLowNs), time.Duration(p.IOHighNs))
	}
	// Anchored: 2 s native + 4 s replayed I/O - 3 s recorded.
	if p.AnchoredNs != int64(3*time.Second) || p.AnchoredLowNs != int64(3*time.Second)-ioErr || p.AnchoredHighNs != int64(3*time.Second)+ioErr+calls {
		t.Errorf("anchored %v (%v–%v), want 3s - %v + %v", time.Duration(p.AnchoredNs), time.Duration(p.AnchoredLowNs), time.Duration(p.AnchoredHighNs), time.Duration(ioErr), time.Duration(ioErr+calls))
	}
	// With the run delay kept, it is no longer a reason to be higher.
	s.predict(Options{KeepRunDelay: true})
	if want := int64(10*time.Second) + est + calls + model; s.Prediction.RuntimeHighNs != want || s.Prediction.AnchoredNs != 0 {
		t.Errorf("keep run delay: high %v anchored %v", time.Duration(s.Prediction.RuntimeHighNs), s.Prediction.AnchoredNs)
	}
	// Other timings predict nothing.
	s.Prediction, s.Timing = nil, TimingAFAP.String()
	s.predict(Options{})
	if s.Prediction != nil {
		t.Error("an afap replay predicts")
	}
}

// TestMergePredictions: several runs give their median, in the interval of all of them.
func TestMergePredictions(t *testing.T) {
	ps := []*Prediction{
		{RuntimeNs: 10, RuntimeLowNs: 8, RuntimeHighNs: 12, IONs: 5, IOLowNs: 4, IOHighNs: 6, Runs: 1},
		nil,
		{RuntimeNs: 14, RuntimeLowNs: 11, RuntimeHighNs: 17, IONs: 7, IOLowNs: 6, IOHighNs: 8, Runs: 1},
		{RuntimeNs: 12, RuntimeLowNs: 10, RuntimeHighNs: 13, IONs: 6, IOLowNs: 5, IOHighNs: 7, Runs: 1},
	}
	m := MergePredictions(ps)
	want := Prediction{RuntimeNs: 12, RuntimeLowNs: 8, RuntimeHighNs: 17, IONs: 6, IOLowNs: 4, IOHighNs: 8, Runs: 3}
	if *m != want {
		t.Errorf("merged %+v, want %+v", *m, want)
	}
	if m := MergePredictions(ps[:2]); m.Runs != 1 || m.RuntimeNs != 10 {
		t.Errorf("one run merged: %+v", m)
	}
	if MergePredictions([]*Prediction{nil}) != nil {
		t.Error("no run, a prediction")
	}
}

// TestInterruptedPredictsNothing: a think-mode run that was interrupted predicts nothing,
// and says so in its text and its JSON.
func TestInterruptedPredictsNothing(t *testing.T) {
	s := &Summary{Timing: TimingThink.String(), ReplaySpan: 2 * time.Second, ReplayIO: time.Second,
		ReplayedOps: 9044, RecordedOps: 9044, Interrupted: true}
	s.predict(Options{NativeRuntime: time.Second})
	if s.Prediction != nil {
		t.Fatalf("an interrupted run predicts %s", s.Prediction.Line())
	}
	var text strings.Builder
	s.Print(&text)
	if strings.Contains(text.String(), "predicts runtime") || !strings.Contains(text.String(), "predicts nothing: the run was interrupted (9044 ops replayed)") {
		t.Errorf("text:\n%s", text.String())
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["prediction"]; ok || !strings.Contains(m["no_prediction"].(string), "interrupted") {
		t.Errorf("JSON prediction %v, no_prediction %q", m["prediction"], m["no_prediction"])
	}
	// The same run whole predicts.
	s.Interrupted = false
	s.predict(Options{})
	if s.Prediction == nil || s.NoPrediction != "" {
		t.Errorf("a whole run: prediction %v, no_prediction %q", s.Prediction, s.NoPrediction)
	}
}
