package trace

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWindowOrder: entries come out of the window in (start, file order), whatever the
// mix of in-order and late entries and of pushes and pops; peek names the next one.
func TestWindowOrder(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var w window
		var pending []winEntry // what the window holds, as a plain list
		var clock int64
		for i := range 5000 {
			clock += int64(rng.IntN(100))
			start := clock
			if rng.IntN(4) == 0 {
				start -= int64(rng.IntN(2000)) // a request that ran long or overlapped
			}
			e := winEntry{start: start, seq: uint64(i + 1), slot: int32(i)}
			w.push(e)
			pending = append(pending, e)
			for w.len() > int(seed)*8+1 || (rng.IntN(3) == 0 && w.len() > 0) {
				want := slices.MinFunc(pending, func(a, b winEntry) int {
					return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.seq, b.seq))
				})
				if got, ok := w.peek(); !ok || got != want.slot {
					t.Fatalf("seed %d: peek gave slot %d (%v), want %d", seed, got, ok, want.slot)
				}
				if got := w.pop(); got != want.slot {
					t.Fatalf("seed %d: popped slot %d, want %d", seed, got, want.slot)
				}
				pending = slices.DeleteFunc(pending, func(x winEntry) bool { return x.slot == want.slot })
			}
		}
		if w.len() != len(pending) {
			t.Fatalf("seed %d: window holds %d, want %d", seed, w.len(), len(pending))
		}
	}
}

// TestSorterLate: a Sorter hands out events by start within its window, and counts the one
// that arrives after the window passed its start.
func TestSorterLate(t *testing.T) {
	s := Sorter{Window: 3}
	var got []int64
	for _, start := range []int64{20, 10, 30, 40, 50, 5, 60} {
		s.Push(&Event{Start: start})
		for s.Full() {
			got = append(got, s.Pop().Start)
		}
	}
	for s.Len() > 0 {
		got = append(got, s.Pop().Start)
	}
	if want := []int64{10, 20, 30, 5, 40, 50, 60}; !slices.Equal(got, want) || s.Late != 1 {
		t.Errorf("order %v late %d, want %v and 1", got, s.Late, want)
	}
}
