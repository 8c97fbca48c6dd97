package trace

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSorterOrder: events come out of a Sorter in (start, file order), whatever the mix
// of in-order and late events (few runs, more runs than the Sorter keeps, a heap) and of
// pushes and pops, across the chunks its runs hold events in, with a window of one too.
func TestSorterOrder(t *testing.T) {
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var s Sorter
		var pending []Event // what the Sorter holds, as a plain list
		var clock int64
		lateEvery := 2 + int(seed%6) // a late event one time in lateEvery
		hold := int(seed)*40 + 1
		if seed%4 == 1 {
			// A window of one, as a folder fed in order has, with now and then a second
			// and a third event pushed before a pop.
			s.Window, hold = 1, 1+int(seed%3)
		}
		// Every third seed interleaves more threads than the Sorter keeps runs, each
		// later in the batch starting earlier: the heap takes what no run does.
		threads := 0
		if seed%3 == 2 {
			threads = maxRuns + 1 + int(seed)
		}
		for i := range 8000 {
			clock += int64(rng.IntN(100))
			start := clock
			switch {
			case threads > 0:
				start = clock - int64(i%threads)*1000
			case rng.IntN(lateEvery) == 0:
				start -= int64(rng.IntN(20000)) // a request that ran long or overlapped
			}
			ev := Event{Start: start, Unique: uint64(i + 1), Offset: rng.Int64()}
			s.Push(&ev)
			pending = append(pending, ev)
			for s.Len() > hold || (rng.IntN(3) == 0 && s.Len() > 0) {
				want := slices.MinFunc(pending, func(a, b Event) int {
					return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Unique, b.Unique))
				})
				if got := s.Pop(); *got != want {
					t.Fatalf("seed %d: popped event %d (start %d), want %d (start %d)", seed, got.Unique, got.Start, want.Unique, want.Start)
				}
				pending = slices.DeleteFunc(pending, func(x Event) bool { return x.Unique == want.Unique })
			}
			if s.Len() != len(pending) {
				t.Fatalf("seed %d: Sorter holds %d, want %d", seed, s.Len(), len(pending))
			}
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

// TestSorterDoesNotAllocate: once its window has filled, a Sorter reuses its chunks, runs
// and heap slots: pushing and popping allocates nothing, with runs that end and begin and
// events that go to the heap.
func TestSorterDoesNotAllocate(t *testing.T) {
	s := Sorter{Window: 4096}
	rng := rand.New(rand.NewPCG(7, 7))
	var clocks [maxRuns + 8]int64
	next := func() Event {
		k := rng.IntN(len(clocks))
		clocks[k] += int64(rng.IntN(1000))
		return Event{Start: clocks[k]}
	}
	step := func() {
		ev := next()
		s.Push(&ev)
		for s.Full() {
			s.Pop()
		}
	}
	for range 200_000 {
		step()
	}
	if allocs := testing.AllocsPerRun(20, func() {
		for range 10_000 {
			step()
		}
	}); allocs != 0 {
		t.Errorf("%.1f allocations per 10,000 events", allocs)
	}
}
