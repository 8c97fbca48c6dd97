package stats

import "sort"

// MaxRanges bounds the interval set kept per file for re-read detection.
const MaxRanges = 32

// rangeSet is a small sorted set of disjoint half-open ranges [start, end).
type rangeSet struct {
	r          [][2]int64
	last       int // index of the range touched last (fast path for sequential reads)
	overflowed bool
}

// add inserts [s, e) and returns how many of its bytes were already in the set.
func (rs *rangeSet) add(s, e int64) uint64 {
	if e <= s {
		return 0
	}
	// Fast path: extends the range touched last, without overlapping anything.
	if l := rs.last; l < len(rs.r) && rs.r[l][1] == s && (l+1 == len(rs.r) || rs.r[l+1][0] >= e) {
		rs.r[l][1] = e
		if l+1 < len(rs.r) && rs.r[l+1][0] == e {
			rs.r[l][1] = rs.r[l+1][1]
			rs.r = append(rs.r[:l+1], rs.r[l+2:]...)
		}
		return 0
	}
	// First range whose end is >= s (ranges touching or overlapping [s, e)).
	i := sort.Search(len(rs.r), func(i int) bool { return rs.r[i][1] >= s })
	j := i
	var overlap int64
	ns, ne := s, e
	for j < len(rs.r) && rs.r[j][0] <= e {
		a, b := max(rs.r[j][0], s), min(rs.r[j][1], e)
		if b > a {
			overlap += b - a
		}
		ns, ne = min(ns, rs.r[j][0]), max(ne, rs.r[j][1])
		j++
	}
	if j > i {
		rs.r[i] = [2]int64{ns, ne}
		rs.r = append(rs.r[:i+1], rs.r[j:]...)
	} else {
		rs.r = append(rs.r, [2]int64{})
		copy(rs.r[i+1:], rs.r[i:])
		rs.r[i] = [2]int64{ns, ne}
	}
	rs.last = i
	if len(rs.r) > MaxRanges {
		// Forget the smallest range other than the one just added.
		mi := -1
		for k := range rs.r {
			if k == i {
				continue
			}
			if mi < 0 || rs.r[k][1]-rs.r[k][0] < rs.r[mi][1]-rs.r[mi][0] {
				mi = k
			}
		}
		rs.r = append(rs.r[:mi], rs.r[mi+1:]...)
		if mi < i {
			rs.last = i - 1
		}
		rs.overflowed = true
	}
	return uint64(overlap)
}
