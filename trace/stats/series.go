package stats

import "time"

// Slot is one interval of the series.
type Slot struct {
	Ops        uint64
	Errors     uint64
	ReadOps    uint64
	WriteOps   uint64
	ReadBytes  uint64
	WriteBytes uint64
	BusyNs     int64   // sum of durations of ops that started in the interval
	MaxNs      int64   // longest op that started in the interval
	Lat        LogHist // latency of all ops that started in the interval
}

// add counts one op that started in the interval.
func (s *Slot) add(dur int64, failed bool) {
	s.Ops++
	s.BusyNs += dur
	s.MaxNs = max(s.MaxNs, dur)
	s.Lat.Add(dur)
	if failed {
		s.Errors++
	}
}

// transfer counts a read or write of n bytes.
func (s *Slot) transfer(write bool, n uint64) {
	if write {
		s.WriteOps++
		s.WriteBytes += n
	} else {
		s.ReadOps++
		s.ReadBytes += n
	}
}

func (s *Slot) merge(o *Slot) {
	s.Ops += o.Ops
	s.Errors += o.Errors
	s.ReadOps += o.ReadOps
	s.WriteOps += o.WriteOps
	s.ReadBytes += o.ReadBytes
	s.WriteBytes += o.WriteBytes
	s.BusyNs += o.BusyNs
	s.MaxNs = max(s.MaxNs, o.MaxNs)
	s.Lat.Merge(&o.Lat)
}

// Series is the per-interval view: ops are placed in the interval their start falls in.
// Slot i covers [Start+i*Width, Start+(i+1)*Width).
type Series struct {
	Start time.Time // wall clock of slot 0 (the trace's Header.WallStart)
	Width time.Duration
	Slots []Slot
	max   int // coarsen when a slot index reaches max (0: unlimited)
}

// slot returns the slot for an event starting at ns since the series start, coarsening
// the series when it would grow beyond its limit.
func (s *Series) slot(ns int64) *Slot {
	if ns < 0 {
		ns = 0
	}
	i := ns / int64(s.Width)
	for s.max > 0 && i >= int64(s.max) {
		s.coarsen()
		i = ns / int64(s.Width)
	}
	if i >= int64(len(s.Slots)) {
		s.grow(int(i) + 1)
	}
	return &s.Slots[i]
}

func (s *Series) grow(n int) {
	if n <= cap(s.Slots) {
		s.Slots = s.Slots[:n]
		return
	}
	c := max(2*cap(s.Slots), n, 16)
	if s.max > 0 {
		c = min(c, s.max)
	}
	ns := make([]Slot, n, max(c, n))
	copy(ns, s.Slots)
	s.Slots = ns
}

// coarsen doubles the width, merging neighbouring slots.
func (s *Series) coarsen() {
	s.Slots = coarsen(s.Slots, position, nil, (*Slot).merge)
	s.Width *= 2
}

// Merge adds o into s, aligning both on the wall clock. The result has the coarser width.
func (s *Series) Merge(o *Series) {
	if len(o.Slots) == 0 {
		return
	}
	if len(s.Slots) == 0 && s.Width == 0 {
		s.Start = o.Start
		s.Width = o.Width
		s.max = o.max
		s.Slots = append([]Slot(nil), o.Slots...)
		return
	}
	if s.Width == 0 {
		s.Width = o.Width
		s.Start = o.Start
	}
	src := Series{Start: o.Start, Width: o.Width, Slots: append([]Slot(nil), o.Slots...)}
	for src.Width < s.Width {
		src.coarsen()
	}
	for s.Width < src.Width {
		s.coarsen()
	}
	if src.Start.Before(s.Start) {
		// Shift s right so that slot 0 is at src.Start.
		shift := int(s.Start.Sub(src.Start) / s.Width)
		if s.Start.Sub(src.Start)%s.Width != 0 {
			shift++
		}
		if shift > 0 {
			ns := make([]Slot, len(s.Slots)+shift)
			copy(ns[shift:], s.Slots)
			s.Slots = ns
			s.Start = s.Start.Add(-time.Duration(shift) * s.Width)
		}
	}
	off := int(src.Start.Sub(s.Start) / s.Width)
	if off+len(src.Slots) > len(s.Slots) {
		s.grow(off + len(src.Slots))
	}
	for i := range src.Slots {
		s.Slots[off+i].merge(&src.Slots[i])
	}
	for s.max > 0 && len(s.Slots) > s.max {
		s.coarsen()
	}
}
