package stats

import "time"

// OffsetPoint is one sampled data op of a busy file.
type OffsetPoint struct {
	T     int64 // op start, ns since the trace's origin
	Off   int64
	Len   uint32
	Write bool
}

// OffsetTrack holds sampled offsets of one of the busiest files, for offset-vs-time plots.
// When more than Options.MaxPoints ops were seen, every Stride-th op was kept.
type OffsetTrack struct {
	Host   string
	Path   string
	Bytes  uint64    // bytes read and written on the file (all ops, not just sampled)
	Start  time.Time // wall clock of the trace's origin: T values count from here
	From   int64     // ns since origin when sampling of this file began
	Stride int       // 0 or 1: every op; n: every n-th op
	Points []OffsetPoint

	pathID  uint32
	seen    int
	retired bool // the path's life that this track sampled has ended (Bytes is final)
}

func (t *OffsetTrack) add(p OffsetPoint, maxPoints int) {
	t.seen++
	if t.Stride > 1 && t.seen%t.Stride != 0 {
		return
	}
	if len(t.Points) >= maxPoints {
		// Keep every other point and halve the sampling rate.
		n := 0
		for i := 0; i < len(t.Points); i += 2 {
			t.Points[n] = t.Points[i]
			n++
		}
		t.Points = t.Points[:n]
		t.Stride = max(t.Stride, 1) * 2
		if t.seen%t.Stride != 0 {
			return
		}
	}
	t.Points = append(t.Points, p)
}
