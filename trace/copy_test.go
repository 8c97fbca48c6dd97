package trace

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

// TestOrderedWriter: with Ordered, events of many threads come back in the order they were
// appended, even when one thread's events would otherwise wait in a partly filled batch.
func TestOrderedWriter(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []Event
	for i := range 50000 {
		tid := uint32(1 + i%7)
		if i%1000 == 0 {
			tid = 99 // a thread with few events among busy ones
		}
		ev := Event{Op: OpRead, Start: int64(i), Dur: 1, Tid: tid, Pid: tid, Path: RootPath, Size: 1, Ret: 1}
		w.Append(&ev)
		want = append(want, ev)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Start != want[i].Start || got[i].Tid != want[i].Tid {
			t.Fatalf("event %d: start %d tid %d, want start %d tid %d", i, got[i].Start, got[i].Tid, want[i].Start, want[i].Tid)
		}
	}
	if d := r.Damage(); len(d) > 0 {
		t.Fatal(d)
	}
}

// TestCopyFooter: a writer that copies a trace carries the copied footer's figures and
// counts its own events; with a nil footer it writes none.
func TestCopyFooter(t *testing.T) {
	orig := Footer{
		Events: 3, Dropped: 5, Blocked: time.Second, Chunks: 9, End: 12345, Errors: 2,
		WallClose: time.Date(2026, 12, 1, 2, 3, 4, 0, time.UTC), EncodeCPU: time.Millisecond,
		Layer: LayerCost{Requests: 7, InLayer: 8, Self: 9, Threads: 2, Connector: true, Late: 1},
		Lost:  4, WriteError: "trace: write: no space left on device",
		RoundTrip:  RoundTrip{Start: 20 * time.Microsecond, Run: 30 * time.Microsecond, Samples: 6},
		Legs:       LegStats{Filled: 3, Missing: 1},
		Prediction: Prediction{Runtime: 10, RuntimeLow: 9, RuntimeHigh: 11},
	}
	for _, tc := range []struct {
		name   string
		footer *Footer
	}{
		{name: "footer", footer: &orig},
		{name: "none", footer: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWriter(&buf, testHeader(), WriterOptions{Ordered: true})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				w.Append(&Event{Op: OpGetattr, Start: int64(i), Dur: 1, Tid: 1, Path: RootPath})
			}
			w.CopyFooter(tc.footer)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(readAll(t, r)); n != 3 {
				t.Fatalf("%d events", n)
			}
			f, ok := r.Footer()
			if tc.footer == nil {
				if ok || len(r.Damage()) != 1 || !errors.Is(r.Damage()[0], ErrNoFooter) {
					t.Fatalf("footer %v, damage %v: want none", f, r.Damage())
				}
				return
			}
			if !ok || len(r.Damage()) > 0 {
				t.Fatalf("footer %v damage %v", ok, r.Damage())
			}
			want := orig
			want.Events, want.Chunks, want.OpCounts = 3, f.Chunks, f.OpCounts
			if f.Events != 3 || f.OpCounts[OpGetattr] != 3 {
				t.Errorf("events %d, op counts %v: want this writer's", f.Events, f.OpCounts)
			}
			f.WallClose = f.WallClose.UTC()
			if f.Dropped != want.Dropped || f.Lost != want.Lost || f.Blocked != want.Blocked || f.End != want.End ||
				f.Errors != want.Errors || !f.WallClose.Equal(want.WallClose) || f.EncodeCPU != want.EncodeCPU ||
				f.Layer != want.Layer || f.WriteError != want.WriteError || f.RoundTrip != want.RoundTrip ||
				f.Legs != want.Legs || f.Prediction != want.Prediction {
				t.Errorf("footer\n%+v\nwant\n%+v", *f, want)
			}
		})
	}
}
