package trace

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"
	"testing"
	"time"
)

// legEvents returns events covering each combination of what the kernel's view can hold:
// nothing, queue and completion only, a call's entry, its return, a run delay, and an
// asynchronous request whose call returned before it completed.
func legEvents() []Event {
	return []Event{
		{Op: OpForget, Start: 10, Dur: 1},
		{Op: OpLookup, Start: 1000, Dur: 50, Unique: 2, Queued: 900, Done: 1100},
		{Op: OpOpen, Start: 2000, Dur: 70, Unique: 4, Queued: 1950, Done: 2090, CallStart: 1900, CallNr: 257, RunDelay: 1},
		{Op: OpRead, Start: 3000, Dur: 40, Unique: 6, Queued: 2990, Done: 3045, CallStart: 2980, CallEnd: 3100, CallNr: 0, RunDelay: 12_345 + 1, WokenAt: 2900, Waker: 77},
		{Op: OpFlush, Start: 4000, Dur: 5, Unique: 8, Queued: 3990, Done: 4010, CallStart: 3980, CallNr: 3, WokenAt: 3970},
		// A release the kernel sent while close(2) returned: the call ends before it.
		{Op: OpRelease, Start: 4100, Dur: 5, Unique: 10, Queued: 4020, Done: 4200, CallStart: 3980, CallEnd: 4050, CallNr: 3},
		// Ids go down as well as up: events of another thread's shard.
		{Op: OpGetattr, Start: 5000, Dur: 3, Unique: 3, Queued: 4998, Done: 5004, CallStart: 4990, CallEnd: 5010, CallNr: 332},
		// Clock skew between the kernel's clock and the layer's: a leg may read negative.
		{Op: OpWrite, Start: 6000, Dur: 10, Unique: 1 << 40, Queued: 6001, Done: 6009, CallStart: 5990, CallEnd: 6020, CallNr: 1},
		// Pages of a mapped file faults brought in: no request, no system call, no duration.
		{Op: OpRead, Start: 7000, Queued: 7000, Done: 7000, Passthrough: true, Flags: MapFault, Handle: 3, Node: 5, Offset: 8192, Size: 65536, Ret: 60000},
	}
}

// TestLegsRoundTrip writes events holding the kernel's view and reads them back unchanged:
// the version-4 columns carry every field, and unmeasured ones read back as zero.
func TestLegsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := legEvents()
	for i := range want {
		w.Append(&want[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Header().Version; v != writeVersion {
		t.Fatalf("version %d, want %d", v, writeVersion)
	}
	got := readAll(t, r)
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d:\n got  %+v\n want %+v", i, got[i], want[i])
		}
	}
	if d, ok := got[3].ThinkRunDelay(); !ok || d != 12_345 {
		t.Errorf("run delay %v %v, want 12.345µs", d, ok)
	}
	if _, ok := got[1].ThinkRunDelay(); ok {
		t.Error("an event without a call has a run delay")
	}
}

// TestLegsOnlyWithTheirBits checks that values of the kernel's view the writer cannot
// stand for (a call's times without the request's) are not written.
func TestLegsOnlyWithTheirBits(t *testing.T) {
	in := []Event{{Op: OpRead, Start: 100, Dur: 1, Unique: 2, CallStart: 50, CallEnd: 200, CallNr: 0, RunDelay: 9, WokenAt: 40, Waker: 3}}
	var p offsetPredictor
	b := appendEvents(nil, Version4, in, &p)
	var col []uint64
	out, err := decodeEvents(b, Version4, nil, &col, &p)
	if err != nil {
		t.Fatal(err)
	}
	want := Event{Op: OpRead, Start: 100, Dur: 1, Unique: 2}
	if out[0] != want {
		t.Errorf("got %+v, want %+v", out[0], want)
	}
}

// TestLegsBadBits checks that a legs column claiming a call without the request's times,
// or unknown bits, is a corrupt chunk.
func TestLegsBadBits(t *testing.T) {
	for _, bits := range []byte{legsCall, legsReturn, legsDelay | legsQueued, legsWoken | legsQueued, 0x20} {
		var p offsetPredictor
		b := appendEvents(nil, Version4, []Event{{Op: OpRead, Start: 1}}, &p)
		// The legs column is the 22nd: count, 21 one-byte values before it.
		b[1+21] = bits
		var col []uint64
		if _, err := decodeEvents(b, Version4, nil, &col, &p); err == nil {
			t.Errorf("bits %#x: no error", bits)
		}
	}
}

// fakeLegs fills each event's Queued from its Unique, and counts.
type fakeLegs struct {
	mu     sync.Mutex
	filled uint64
	calls  int
}

func (f *fakeLegs) Fill(evs []Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	for i := range evs {
		if evs[i].Unique != 0 {
			evs[i].Queued, evs[i].Done = evs[i].Start-1, evs[i].End()+1
			f.filled++
		}
	}
}

func (f *fakeLegs) LegStats() LegStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return LegStats{Filled: f.filled, Missing: 7, Lost: 3}
}

// TestWriterFillsLegs checks that a writer with a LegFiller hands it every event before it
// is observed and encoded, after the hold, and keeps its counts in the footer.
func TestWriterFillsLegs(t *testing.T) {
	var buf bytes.Buffer
	legs := &fakeLegs{}
	var observed, unfilled int
	hold := 20 * time.Millisecond
	w, err := NewWriter(&buf, testHeader(), WriterOptions{
		ChunkEvents: 100, BufferEvents: 512, Legs: legs, LegHold: hold,
		Observe: func(evs []Event) {
			for i := range evs {
				observed++
				if evs[i].Queued == 0 {
					unfilled++
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		w.Append(&Event{Op: OpRead, Tid: uint32(i % 3), Start: int64(i+1) * 1000, Dur: 10, Unique: uint64(2 * (i + 1))})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if observed != n || unfilled != 0 {
		t.Errorf("observed %d events, %d not filled; want %d, 0", observed, unfilled, n)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, r)
	for _, ev := range evs {
		if !ev.HasLegs() {
			t.Fatalf("event without legs in the trace: %+v", ev)
		}
	}
	f, ok := r.Footer()
	if !ok || f.Legs != (LegStats{Filled: n, Missing: 7, Lost: 3}) {
		t.Errorf("footer legs %+v (footer %v)", f.Legs, ok)
	}
	if len(evs) != n {
		t.Errorf("%d events, want %d", len(evs), n)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("after the last event: %v", err)
	}
}

// TestFooterPrediction: a replay's prediction survives the footer, and a footer without
// one reads it as zero.
func TestFooterPrediction(t *testing.T) {
	for _, p := range []Prediction{{}, {Runtime: 5e9, RuntimeLow: 4e9, RuntimeHigh: 6e9, IO: 3e9, IOLow: 2e9, IOHigh: 4e9, Native: 1e9, Anchored: 2e9, AnchoredLow: 1e9, AnchoredHigh: 3e9}} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(), WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(&Event{Op: OpRead, Start: 1, Dur: 1})
		w.SetPrediction(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, r)
		f, ok := r.Footer()
		if !ok || f.Prediction != p || f.Legs != (LegStats{}) {
			t.Errorf("footer prediction %+v legs %+v (footer %v), want %+v", f.Prediction, f.Legs, ok, p)
		}
	}
}

// TestFooterPassthrough: the counts of kernel passthrough read back, the mapped files'
// with them; a footer without the mapped files' counts (none followed, or written before
// they existed) reads them as zero.
func TestFooterPassthrough(t *testing.T) {
	p := PassthroughStats{Opens: 7, LayerOpens: 1, Refused: "set-user-ID", Calls: 300, Async: 16, Unseen: 2, Lost: 1}
	for _, tc := range []struct {
		name string
		p    PassthroughStats
	}{
		{"calls", p},
		{"mapped files", PassthroughStats{Opens: 7, Calls: 300, Maps: 3, Faults: 1 << 33, MapsFull: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Footer{Events: 3, WallClose: time.Unix(1, 0).UTC(), Passthrough: tc.p}
			var got Footer
			if err := decodeFooter(appendFooter(nil, &f), &got); err != nil || got.Passthrough != tc.p {
				t.Errorf("footer %+v read as %+v, %v", tc.p, got.Passthrough, err)
			}
		})
	}
	// The same counts with the mapped files' after them: the earlier fields read the same.
	f := Footer{Events: 3, WallClose: time.Unix(1, 0).UTC(), Passthrough: p}
	without := appendFooter(nil, &f)
	f.Passthrough.Maps, f.Passthrough.Faults = 2, 40
	with := appendFooter(nil, &f)
	if !bytes.HasPrefix(with, without) || len(with) != len(without)+3 {
		t.Errorf("the mapped files' counts are not three fields after the others: %x, %x", without, with)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while the writer writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

// TestWriterLegsStillFlushes: held for their legs, events still reach the file about one
// flush interval after they were appended, without a Close (a killed recorder keeps them).
func TestWriterLegsStillFlushes(t *testing.T) {
	var out lockedBuffer
	w, err := NewWriter(&out, testHeader(), WriterOptions{FlushInterval: 50 * time.Millisecond, LegHold: 30 * time.Millisecond, Legs: &fakeLegs{}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	for i := range 10 {
		w.Append(&Event{Op: OpRead, Tid: 1, Start: int64(i + 1), Dur: 1, Unique: uint64(2 * (i + 1))})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := NewReader(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for {
			if _, err := r.Next(); err != nil {
				break
			}
			n++
		}
		if n == 10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 10 events in the file after 5 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDecodeLegsWithoutBits: a chunk none of whose events has a leg takes nothing from the
// eight columns after the bits, whether they hold zeros or other values, consumes them
// whole, and fails as any column does when one is cut short or overflows.
func TestDecodeLegsWithoutBits(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 23} {
		column := func(v uint64) []byte {
			var b []byte
			for range n {
				b = binary.AppendUvarint(b, v)
			}
			return b
		}
		head := append(column(2), column(0)...) // Unique deltas of 1 (zigzag 2), no bits
		rest := []byte("rest")
		for _, tt := range []struct {
			name string
			cols []byte
			err  bool
		}{
			{"zeros", bytes.Repeat(column(0), 8), false},
			{"values", append(bytes.Repeat(column(0), 5), append(column(300), append(column(1<<40), column(0)...)...)...), false},
			{"cut short", bytes.Repeat(column(0), 7)[:7*n-1], true},
			{"overflow", append(bytes.Repeat(column(0), 7), bytes.Repeat([]byte{0xff}, 11)...), true},
		} {
			b := append(append(append([]byte(nil), head...), tt.cols...), rest...)
			if tt.err {
				b = append(append([]byte(nil), head...), tt.cols...)
			}
			evs := make([]Event, n)
			c := make([]uint64, n)
			got, err := decodeLegs(b, Version5, evs, c)
			if tt.err {
				if err == nil {
					t.Errorf("%d events, %s: no error", n, tt.name)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, rest) {
				t.Errorf("%d events, %s: rest %q, %v; want %q", n, tt.name, got, err, rest)
				continue
			}
			for i := range evs {
				if want := (Event{Unique: uint64(i + 1)}); evs[i] != want {
					t.Errorf("%d events, %s: event %d is %+v, want %+v", n, tt.name, i, evs[i], want)
				}
			}
		}
	}
}
