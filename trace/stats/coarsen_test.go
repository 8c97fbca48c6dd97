package stats

import (
	"slices"
	"testing"
)

// TestCoarsen: a dense series of n cells becomes ⌈n/2⌉ cells each holding a pair; a sparse
// one merges the cells whose index halves to the same, and renumbers them.
func TestCoarsen(t *testing.T) {
	add := func(into, from *int64) { *into += *from }
	for _, tc := range []struct {
		name string
		in   []int64
		want []int64
	}{
		{name: "empty", in: nil, want: []int64{}},
		{name: "one", in: []int64{5}, want: []int64{5}},
		{name: "even", in: []int64{1, 2, 3, 4}, want: []int64{3, 7}},
		{name: "odd", in: []int64{1, 2, 3, 4, 5}, want: []int64{3, 7, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := coarsen(in, position, nil, add)
			if !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("%v → %v, want %v", tc.in, got, tc.want)
			}
			if tail := in[len(got):]; slices.ContainsFunc(tail, func(v int64) bool { return v != 0 }) {
				t.Errorf("cells past the result not cleared: %v", tail)
			}
		})
	}
	t.Run("sparse", func(t *testing.T) {
		cells := []heatCell{{slot: 1, ns: 1}, {slot: 2, ns: 2}, {slot: 3, ns: 3}, {slot: 8, ns: 8}, {slot: 11, ns: 11}}
		got := coarsen(cells, func(_ int, c *heatCell) int64 { return c.slot },
			func(c *heatCell, k int64) { c.slot = k },
			func(into, from *heatCell) { into.ns += from.ns })
		want := []heatCell{{slot: 0, ns: 1}, {slot: 1, ns: 5}, {slot: 4, ns: 8}, {slot: 5, ns: 11}}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}
