package stats

// maxDensePath bounds the path ids kept in the dense slice. Writers assign ids densely
// from 1, so real traces stay far below; a corrupt id above it costs one map entry rather
// than a huge slice.
const maxDensePath = 1 << 22

// pathTable holds a state per path id: in a slice indexed by id, and in a map for ids of
// maxDensePath and above (corrupt traces).
type pathTable[T any] struct {
	dense  []T
	sparse map[uint32]*T
}

// at returns the state of path id, creating it. The pointer is valid until the next call
// that creates a path.
func (t *pathTable[T]) at(id uint32) *T {
	if int(id) < len(t.dense) {
		return &t.dense[id]
	}
	return t.add(id)
}

func (t *pathTable[T]) add(id uint32) *T {
	if id >= maxDensePath {
		s := t.sparse[id]
		if s == nil {
			if t.sparse == nil {
				t.sparse = make(map[uint32]*T)
			}
			s = new(T)
			t.sparse[id] = s
		}
		return s
	}
	n := min(max(int(id)+1, 2*len(t.dense), 64), maxDensePath)
	nd := make([]T, n)
	copy(nd, t.dense)
	t.dense = nd
	return &t.dense[id]
}

// each calls fn for every path's state: the slice's by id, then the map's.
func (t *pathTable[T]) each(fn func(id uint32, s *T)) {
	for id := range t.dense {
		fn(uint32(id), &t.dense[id])
	}
	for id, s := range t.sparse {
		fn(id, s)
	}
}
