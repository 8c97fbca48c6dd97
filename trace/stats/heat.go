package stats

import (
	"cmp"
	"slices"
	"time"
)

// The heat of a file or a process: its time in the storage and the bytes it moved over
// time, for the heat maps of a report (time × file, time × program).
//
// An event counts in the cell its start falls in. A row's cells are HeatBase·2^k wide and
// anchored at the trace's origin, so that any two of them nest; a row keeps at most
// MaxHeatCells cells that hold something, and doubles its width (merging neighbours) when
// it would need more. A row that is busy all along therefore costs at most MaxHeatCells
// cells, one touched once costs one.

// HeatBase is the narrowest cell of a heat row; MaxHeatCells bounds the cells a row holds.
const (
	HeatBase     = time.Millisecond
	MaxHeatCells = 128
)

// heatCell is one cell of a heat row being accumulated: slot is its index at the row's
// width.
type heatCell struct {
	slot  int64
	ns    int64
	bytes uint64
}

// heatRow accumulates one row; its cells are in slot order, events come in start order.
// The last cell is kept in the row itself: most events add to it, and they then touch
// nothing outside the row's owner (a file's or a process's state).
type heatRow struct {
	cells []heatCell // the cells before last
	last  heatCell   // the last cell, when has
	has   bool
	shift uint8 // the row's width is HeatBase << shift
}

// add counts an event that started at start (ns since the trace's origin), took ns in the
// storage and moved bytes.
func (h *heatRow) add(start, ns int64, bytes uint64) {
	slot := max(start, 0) / int64(HeatBase<<h.shift)
	if h.has {
		if h.last.slot == slot {
			h.last.ns += ns
			h.last.bytes += bytes
			return
		}
		if slot < h.last.slot { // a late event (the sort window passed it): its own place
			h.insert(slot, ns, bytes)
			return
		}
		if len(h.cells)+1 == MaxHeatCells {
			h.coarsen()
			h.add(start, ns, bytes)
			return
		}
		h.cells = append(h.cells, h.last)
	}
	h.last, h.has = heatCell{slot: slot, ns: ns, bytes: bytes}, true
}

// insert counts an event in slot, before the last cell.
func (h *heatRow) insert(slot, ns int64, bytes uint64) {
	i, found := slices.BinarySearchFunc(h.cells, slot, func(c heatCell, s int64) int {
		switch {
		case c.slot < s:
			return -1
		case c.slot > s:
			return 1
		}
		return 0
	})
	if found {
		h.cells[i].ns += ns
		h.cells[i].bytes += bytes
		return
	}
	h.cells = slices.Insert(h.cells, i, heatCell{slot: slot, ns: ns, bytes: bytes})
	for len(h.cells)+1 > MaxHeatCells {
		h.coarsen()
	}
}

// coarsen doubles the row's width, merging the cells that fall together.
func (h *heatRow) coarsen() {
	h.shift++
	cells := h.all()
	if len(cells) == 0 {
		return
	}
	cells = coarsen(cells, func(_ int, c *heatCell) int64 { return c.slot },
		func(c *heatCell, k int64) { c.slot = k },
		func(into, from *heatCell) { into.ns += from.ns; into.bytes += from.bytes })
	n := len(cells) - 1
	h.cells, h.last = cells[:n], cells[n]
}

// all returns the row's cells, the last included (which it appends to cells).
func (h *heatRow) all() []heatCell {
	if !h.has {
		return h.cells
	}
	return append(h.cells, h.last)
}

// export returns the row with its cells on the wall clock of a trace that started at
// origin.
func (h *heatRow) export(origin time.Time) Heat {
	cells := h.all()
	if len(cells) == 0 {
		return Heat{}
	}
	w := HeatBase << h.shift
	out := Heat{Width: w, Cells: make([]HeatCell, len(cells))}
	for i, c := range cells {
		out.Cells[i] = HeatCell{Start: origin.Add(time.Duration(c.slot) * w).UnixNano(), Ns: c.ns, Bytes: c.bytes}
	}
	return out
}

// Heat is the heat of a file or process: its time in the storage and the bytes it moved
// per cell of time. Every cell is Width wide or, for cells merged from several traces,
// narrower (the widest of them); an event counts in the cell its start falls in.
type Heat struct {
	Width time.Duration
	Cells []HeatCell // by Start; only cells that hold something
}

// HeatCell is one cell of a Heat: what the events that started in [Start, Start+Width)
// did.
type HeatCell struct {
	Start int64  // Unix ns
	Ns    int64  // time in the storage (the events' durations summed)
	Bytes uint64 // bytes read and written
}

// Merge adds o's cells to h's.
//
// Both lists are in Start order: one pass merges them (a directory's row takes each of its
// files' in turn, so sorting the directory's cells again at each file would cost its
// cells' count times its files').
func (h *Heat) Merge(o *Heat) {
	if len(o.Cells) == 0 {
		return
	}
	h.Width = max(h.Width, o.Width)
	byStart := func(a, b HeatCell) int { return cmp.Compare(a.Start, b.Start) }
	if !slices.IsSortedFunc(h.Cells, byStart) || !slices.IsSortedFunc(o.Cells, byStart) {
		cells := append(slices.Clip(h.Cells), o.Cells...)
		slices.SortStableFunc(cells, byStart)
		h.Cells = sumSameStart(cells)
		return
	}
	a, b := h.Cells, o.Cells
	cells := make([]HeatCell, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].Start <= b[0].Start {
			cells, a = append(cells, a[0]), a[1:]
		} else {
			cells, b = append(cells, b[0]), b[1:]
		}
	}
	cells = append(append(cells, a...), b...)
	h.Cells = sumSameStart(cells)
}

// mergeHeats returns rows merged into one, as Merge would merge them into an empty row one
// after another, in any order: the cells of all, sorted once.
func mergeHeats(rows []*Heat) Heat {
	var h Heat
	n := 0
	for _, r := range rows {
		if len(r.Cells) > 0 {
			h.Width = max(h.Width, r.Width)
			n += len(r.Cells)
		}
	}
	if n == 0 {
		return h
	}
	cells := make([]HeatCell, 0, n)
	for _, r := range rows {
		cells = append(cells, r.Cells...)
	}
	slices.SortStableFunc(cells, func(a, b HeatCell) int { return cmp.Compare(a.Start, b.Start) })
	h.Cells = sumSameStart(cells)
	return h
}

// sumSameStart adds up, in place, the neighbouring cells of cells (in Start order) that
// start at the same time.
func sumSameStart(cells []HeatCell) []HeatCell {
	out := cells[:0]
	for _, c := range cells {
		if n := len(out); n > 0 && out[n-1].Start == c.Start {
			out[n-1].Ns += c.Ns
			out[n-1].Bytes += c.Bytes
			continue
		}
		out = append(out, c)
	}
	return out
}
