package fusefs

import "testing"

// BenchmarkLiveSet: the snapshot of held path ids a compaction of the recorder's path index
// takes (trace's BenchmarkCompact is the compaction itself): 900 pages in use, 1 id in 100
// held, and a query of every id as the index makes them.
func BenchmarkLiveSet(b *testing.B) {
	var p pathNodes
	const ids = 900 * nodePageSize
	for id := uint32(1); id < ids; id += 100 {
		p.set(id, uint64(id)+1)
	}
	n := 0
	for b.Loop() {
		live := p.liveSet()
		for id := uint32(1); id < ids; id += 7 { // not in order, like hash order
			if live((id * 2654435761) % ids) {
				n++
			}
		}
	}
	if n == 0 {
		b.Fatal("no held id found")
	}
}
