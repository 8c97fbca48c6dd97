package stats

// coarsen merges the cells of a series into cells twice as wide, in place: cell k of the
// result holds the cells of index 2k and 2k+1. cells are in increasing order of their
// index, which index gives: its position in a dense series (every interval has a cell), a
// field of the cell in a sparse one (only intervals that hold something have a cell),
// where reindex stores the new index (nil for a dense series). merge adds from into into.
// The cells past the result's end are cleared, so that they hold no memory.
func coarsen[T any](cells []T, index func(i int, c *T) int64, reindex func(c *T, k int64), merge func(into, from *T)) []T {
	n := 0 // cells[:n] is the result so far: never past the cell read, so no copy is needed
	last := int64(-1)
	for i := range cells {
		k := index(i, &cells[i]) / 2
		if n > 0 && k == last {
			merge(&cells[n-1], &cells[i])
			continue
		}
		if n != i {
			cells[n] = cells[i]
		}
		if reindex != nil {
			reindex(&cells[n], k)
		}
		n++
		last = k
	}
	clear(cells[n:])
	return cells[:n]
}

// position is the index of a cell of a dense series: its position.
func position[T any](i int, _ *T) int64 { return int64(i) }
