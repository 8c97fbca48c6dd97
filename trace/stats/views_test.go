package stats

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// TestHeat: an event counts in the cell its start falls in, a row keeps at most
// MaxHeatCells cells by doubling its width, and rows of two traces merge on the wall clock.
func TestHeat(t *testing.T) {
	ms := int64(time.Millisecond)
	evs := []trace.Event{
		{Op: trace.OpRead, Path: 2, Pid: 7, Tid: 7, Start: 0, Dur: 10, Ret: 100},
		{Op: trace.OpRead, Path: 2, Pid: 7, Tid: 7, Start: ms - 1, Dur: 20, Ret: 50},
		{Op: trace.OpWrite, Path: 2, Pid: 7, Tid: 7, Start: ms, Dur: 30, Ret: 7},
		{Op: trace.OpGetattr, Path: 2, Pid: 8, Tid: 8, Start: 5 * ms, Dur: 40},
		{Op: trace.OpCopyFileRange, Path: 2, Path2: 3, Pid: 8, Tid: 8, Start: 5*ms + 1, Dur: 50, Ret: 1000},
	}
	s := accumulate("t", evs, Options{})
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	want := Heat{Width: HeatBase, Cells: []HeatCell{{Start: start, Ns: 30, Bytes: 150}, {Start: start + ms, Ns: 30, Bytes: 7}, {Start: start + 5*ms, Ns: 90, Bytes: 1000}}}
	if got := s.Files["?2"].Heat; !reflect.DeepEqual(got, want) {
		t.Errorf("file heat %+v, want %+v", got, want)
	}
	if got, want := s.Files["?3"].Heat, (Heat{Width: HeatBase, Cells: []HeatCell{{Start: start + 5*ms, Bytes: 1000}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("copy's output file: heat %+v, want %+v", got, want)
	}
	p8 := s.Procs[ProcKey{Host: "h1", Pid: 8}]
	if want := (Heat{Width: HeatBase, Cells: []HeatCell{{Start: start + 5*ms, Ns: 90, Bytes: 2000}}}); !reflect.DeepEqual(p8.Heat, want) {
		t.Errorf("process heat %+v, want %+v (a copy's bytes read and written)", p8.Heat, want)
	}

	// A row busy over 1000 ms keeps at most MaxHeatCells cells, whose sums are kept.
	var long []trace.Event
	for i := range 1000 {
		long = append(long, trace.Event{Op: trace.OpWrite, Path: 2, Start: int64(i) * ms, Dur: 1, Ret: 1})
	}
	h := accumulate("t", long, Options{}).Files["?2"].Heat
	var ns int64
	for _, c := range h.Cells {
		ns += c.Ns
		if (c.Start-start)%int64(h.Width) != 0 {
			t.Errorf("cell at +%d ns is not on the row's %v grid", c.Start-start, h.Width)
		}
	}
	if len(h.Cells) > MaxHeatCells || h.Width != 8*HeatBase || ns != 1000 {
		t.Errorf("%d cells %v wide, %d ns in all; want at most %d cells 8ms wide, 1000 ns", len(h.Cells), h.Width, ns, MaxHeatCells)
	}

	// Two traces: their cells together on the wall clock (those that start at the same
	// time add up), at the wider width.
	m := New()
	m.Merge(s)
	m.Merge(accumulate("t", long[:2], Options{}))
	got := m.Files["?2"].Heat
	if got.Width != HeatBase || len(got.Cells) != 3 || got.Cells[0].Ns != 31 || got.Cells[1].Ns != 31 || got.Cells[2].Ns != 90 {
		t.Errorf("merged heat %+v", got)
	}
}

// TestProcessNames: a process is named after its main thread's record, else after the
// first of its threads'.
func TestProcessNames(t *testing.T) {
	procs := []trace.Process{
		{Tid: 11, Pid: 10, Comm: "worker"},
		{Tid: 10, Pid: 10, Comm: "java", Cmdline: []string{"java", "-jar", "x.jar"}},
		{Tid: 21, Pid: 20, Comm: "pool-1"},
		{Tid: 22, Pid: 20, Comm: "pool-2"},
	}
	got := ProcessNames(procs)
	if got[10].Comm != "java" || got[20].Comm != "pool-1" || len(got) != 2 {
		t.Errorf("names %+v", got)
	}
	// The report's processes take them, command line included.
	r := &Names{Procs: map[uint32]trace.Process{}}
	for _, p := range procs {
		r.Procs[p.Tid] = p
	}
	a := NewAccumulator("t", &trace.Header{Hostname: "h"}, Options{})
	a.Add(&trace.Event{Op: trace.OpGetattr, Path: 1, Pid: 10, Tid: 11, Start: 1, Dur: 1})
	s := a.Finish(r, nil, nil)
	if p := s.Procs[ProcKey{Host: "h", Pid: 10, Comm: "java"}]; p == nil || !reflect.DeepEqual(p.Cmdline, []string{"java", "-jar", "x.jar"}) {
		t.Errorf("processes %+v", s.Procs)
	}
}

// TestCallPathsAndSizes: the calls' time per kind and path, and reads and writes by the
// bytes they moved, at Darshan's bucket edges.
func TestCallPathsAndSizes(t *testing.T) {
	h := &trace.Header{Kind: "replay"}
	a := NewAccumulator("t", h, Options{})
	var start int64
	ev := func(op trace.Op, path uint32, ret int64, errno uint16) {
		start += 10
		a.Add(&trace.Event{Op: op, Path: path, Start: start, Dur: 3, Ret: ret, Errno: errno})
	}
	sizes := []int64{0, 100, 101, 1024, 1025, 10 << 10, 100 << 10, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30, 1<<30 + 1}
	for _, n := range sizes {
		ev(trace.OpRead, 2, n, 0)
	}
	ev(trace.OpRead, 2, 0, 5) // failed: in no bucket
	ev(trace.OpWrite, 3, 4096, 0)
	ev(trace.OpFsync, 3, 0, 0)
	s := a.Finish(&Names{Paths: map[uint32]string{2: "in", 3: "out"}}, nil, nil)
	want := map[CallPath]int64{{fold.SysRead, "in"}: 3 * int64(len(sizes)+1), {fold.SysWrite, "out"}: 3, {fold.SysFsync, "out"}: 3}
	if !reflect.DeepEqual(s.CallPaths, want) {
		t.Errorf("call paths %v, want %v", s.CallPaths, want)
	}
	wantCounts := [NumAccessSizes]uint64{2, 2, 2, 1, 1, 1, 1, 1, 1, 1}
	for b := range NumAccessSizes {
		if got := s.AccessSizes[0][b].Count; got != wantCounts[b] {
			name, _ := AccessSizeLabel(b)
			t.Errorf("reads of %s: %d, want %d", name, got, wantCounts[b])
		}
	}
	if w := s.AccessSizes[1][AccessSizeOf(4096)]; w != (AccessSize{Count: 1, Bytes: 4096, TotalNs: 3}) {
		t.Errorf("writes of 1K-10K: %+v", w)
	}
}

// TestGroups: the events split by group add up to the whole.
func TestGroups(t *testing.T) {
	evs := genEvents(20_000, 5)
	for i := range evs {
		evs[i].Uid = evs[i].Pid % 2
	}
	s := accumulate("t", evs, Options{Group: func(ev *trace.Event) string { return fmt.Sprint("uid=", ev.Uid) }})
	if len(s.Groups) != 2 {
		t.Fatalf("%d groups", len(s.Groups))
	}
	var events uint64
	var total int64
	for _, g := range s.Groups {
		events += g.Events
		total += g.TotalNs()
		if g.Groups != nil {
			t.Errorf("a group has groups")
		}
	}
	if events != s.Events || total != s.TotalNs() {
		t.Errorf("groups: %d events, %d ns; whole: %d, %d", events, total, s.Events, s.TotalNs())
	}
}

// TestHeatRowModel: a heat row counts every event in the cell of its start at the row's
// final width, keeps at most MaxHeatCells cells, and widens only when it must: against a
// plain list of the events, over streams in start order with late events among them.
func TestHeatRowModel(t *testing.T) {
	type ev struct {
		start, ns int64
		bytes     uint64
	}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 9))
		var h heatRow
		var evs []ev
		clock := int64(0)
		n := 1 + rng.IntN(3000)
		step := int64(1) << rng.IntN(26) // from events on one cell to events on new cells
		for range n {
			clock += rng.Int64N(step)
			e := ev{start: clock, ns: 1 + rng.Int64N(1000), bytes: uint64(rng.IntN(5000))}
			if rng.IntN(10) == 0 {
				e.start -= rng.Int64N(50 * step) // late: the sort window passed it
			}
			h.add(e.start, e.ns, e.bytes)
			evs = append(evs, e)
			if n := len(h.export(time.Unix(0, 0)).Cells); n > MaxHeatCells {
				t.Fatalf("seed %d: %d cells after %d events", seed, n, len(evs))
			}
		}
		got := h.export(time.Unix(0, 0))
		w := int64(got.Width)
		// The cells the events make at the row's width.
		want := map[int64]HeatCell{}
		for _, e := range evs {
			k := max(e.start, 0) / w * w
			c := want[k]
			c.Start, c.Ns, c.Bytes = k, c.Ns+e.ns, c.Bytes+e.bytes
			want[k] = c
		}
		if len(got.Cells) != len(want) || len(got.Cells) > MaxHeatCells {
			t.Fatalf("seed %d: %d cells %v wide, want %d (at most %d)", seed, len(got.Cells), got.Width, len(want), MaxHeatCells)
		}
		for i, c := range got.Cells {
			if i > 0 && c.Start <= got.Cells[i-1].Start {
				t.Fatalf("seed %d: cells out of order at %d", seed, i)
			}
			if c != want[c.Start] {
				t.Fatalf("seed %d: cell %+v, want %+v", seed, c, want[c.Start])
			}
		}
		// Half the width would have needed more cells than a row keeps (or the width is
		// the narrowest).
		if got.Width > HeatBase {
			half := map[int64]bool{}
			for _, e := range evs {
				half[max(e.start, 0)/(w/2)] = true
			}
			if len(half) <= MaxHeatCells {
				t.Fatalf("seed %d: width %v, but %d cells of half of it would do", seed, got.Width, len(half))
			}
		}
	}
}

// TestHeatMergeModel: merging heat rows gives one cell per start, in Start order, holding
// the sums of the cells of that start, whatever the rows (in Start order or not, with
// starts repeated, empty), and the wider width.
func TestHeatMergeModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	row := func(sorted bool) Heat {
		h := Heat{Width: time.Duration(1+rng.IntN(4)) * time.Second}
		for range rng.IntN(40) {
			h.Cells = append(h.Cells, HeatCell{Start: int64(rng.IntN(30)) * 1000, Ns: rng.Int64N(1e6), Bytes: uint64(rng.IntN(1e6))})
		}
		if sorted {
			slices.SortFunc(h.Cells, func(a, b HeatCell) int { return cmp.Compare(a.Start, b.Start) })
		}
		return h
	}
	for i := range 2000 {
		h := row(i%5 != 0)
		want := map[int64]HeatCell{}
		width, merged := h.Width, false
		for _, c := range h.Cells {
			w := want[c.Start]
			want[c.Start] = HeatCell{Start: c.Start, Ns: w.Ns + c.Ns, Bytes: w.Bytes + c.Bytes}
		}
		rows := []*Heat{{Width: h.Width, Cells: slices.Clone(h.Cells)}}
		for range 1 + rng.IntN(4) {
			o := row(i%7 != 0)
			rows = append(rows, &Heat{Width: o.Width, Cells: slices.Clone(o.Cells)})
			for _, c := range o.Cells {
				w := want[c.Start]
				want[c.Start] = HeatCell{Start: c.Start, Ns: w.Ns + c.Ns, Bytes: w.Bytes + c.Bytes}
			}
			if len(o.Cells) > 0 {
				width = max(width, o.Width)
				merged = true
			}
			h.Merge(&o)
		}
		// The rows merged at once (a directory's) are the rows merged one after another
		// into an empty one.
		var seq Heat
		for _, r := range rows {
			seq.Merge(r)
		}
		if all := mergeHeats(rows); all.Width != seq.Width || !slices.Equal(all.Cells, seq.Cells) {
			t.Fatalf("row %d: merged at once %+v, one after another %+v", i, all, seq)
		}
		if !merged {
			continue // only empty rows merged: h is left as it was
		}
		if h.Width != width || len(h.Cells) != len(want) {
			t.Fatalf("row %d: %d cells %v wide, want %d %v wide", i, len(h.Cells), h.Width, len(want), width)
		}
		for j, c := range h.Cells {
			if j > 0 && c.Start <= h.Cells[j-1].Start || c != want[c.Start] {
				t.Fatalf("row %d: cell %d is %+v, want %+v (in Start order, once)", i, j, c, want[c.Start])
			}
		}
	}
}
