package stats

import (
	"math"
	"sort"
)

// MaxRanges bounds the ranges kept per file for re-read detection.
const MaxRanges = 32

// rangeSet is a small set of disjoint, non-touching half-open ranges [start, end) of a
// file that were read. The range touched last (cur) is kept apart from the others so that
// a sequential read, the common case, only touches the set's own fields.
type rangeSet struct {
	cur        [2]int64   // empty (cur[1] <= cur[0]) until the first add
	nextStart  int64      // start of the first range of r after cur (MaxInt64 if none)
	r          [][2]int64 // the other ranges, sorted
	overflowed bool       // ranges were forgotten: re-reads are a lower bound
}

// has reports whether cur holds a range.
func (rs *rangeSet) has() bool { return rs.cur[1] > rs.cur[0] }

// add inserts [s, e) and returns how many of its bytes were already in the set.
func (rs *rangeSet) add(s, e int64) uint64 {
	if e <= s {
		return 0
	}
	if !rs.has() {
		rs.cur, rs.nextStart = [2]int64{s, e}, math.MaxInt64
		return 0
	}
	if s == rs.cur[1] && e < rs.nextStart {
		rs.cur[1] = e
		return 0
	}
	return rs.slow(s, e)
}

func (rs *rangeSet) slow(s, e int64) uint64 {
	// Put cur back among the others; it neither overlaps nor touches them.
	i := sort.Search(len(rs.r), func(i int) bool { return rs.r[i][0] > rs.cur[0] })
	rs.r = append(rs.r, [2]int64{})
	copy(rs.r[i+1:], rs.r[i:])
	rs.r[i] = rs.cur

	// Merge [s, e) with every range it overlaps or touches.
	i = sort.Search(len(rs.r), func(i int) bool { return rs.r[i][1] >= s })
	j := i
	var overlap int64
	ns, ne := s, e
	for j < len(rs.r) && rs.r[j][0] <= e {
		lo, hi := max(rs.r[j][0], s), min(rs.r[j][1], e)
		if hi > lo {
			overlap += hi - lo
		}
		ns, ne = min(ns, rs.r[j][0]), max(ne, rs.r[j][1])
		j++
	}
	// The merged range becomes cur; r keeps the others.
	rs.cur = [2]int64{ns, ne}
	rs.r = append(rs.r[:i], rs.r[j:]...)
	if len(rs.r)+1 > MaxRanges {
		// Forget the smallest other range.
		mi := 0
		for k := range rs.r {
			if rs.r[k][1]-rs.r[k][0] < rs.r[mi][1]-rs.r[mi][0] {
				mi = k
			}
		}
		rs.r = append(rs.r[:mi], rs.r[mi+1:]...)
		if mi < i {
			i--
		}
		rs.overflowed = true
	}
	rs.nextStart = math.MaxInt64
	if i < len(rs.r) {
		rs.nextStart = rs.r[i][0]
	}
	return uint64(overlap)
}

// ranges returns all ranges in order (for tests).
func (rs *rangeSet) ranges() [][2]int64 {
	if !rs.has() {
		return nil
	}
	out := append([][2]int64(nil), rs.r...)
	i := sort.Search(len(out), func(i int) bool { return out[i][0] > rs.cur[0] })
	out = append(out, [2]int64{})
	copy(out[i+1:], out[i:])
	out[i] = rs.cur
	return out
}
