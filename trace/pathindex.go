package trace

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// pathIndex interns (parent, name) pairs as path ids. A hit, the common case (every
// request that names a file by its directory and name: create, unlink, a negative lookup),
// takes no lock and writes nothing shared: it hashes the name and reads the table's
// header, a slot (which holds the pair) and the name's bytes. A map behind an RWMutex took
// the lock word (written by every caller, on every CPU) and three to four lines of the map.
//
// Inserts are serialized by mu. A slot's pair is written before its id is published in the
// slot's word (an atomic store), so a reader that finds the id reads the whole pair. The
// table (32 bytes a slot, 43 to 85 a pair) doubles when three quarters full: the new table
// is filled, then published; readers of the old one see every id published before the
// switch, and a miss is re-checked under mu.
type pathIndex struct {
	seed maphash.Seed
	tab  atomic.Pointer[pathTable]

	mu   sync.Mutex // serializes inserts; guards next and pend
	next uint32
	pend []PathRecord // records not yet taken by the encoder
}

// pathTable is open-addressed with linear probing.
type pathTable struct {
	mask  uint64
	used  int // guarded by pathIndex.mu
	slots []pathSlot
}

// pathSlot holds one pair; word = tag<<32 | id, where tag is the top half of the pair's
// hash (0 = empty; ids start at RootPath). parent and name are written before word.
type pathSlot struct {
	word   atomic.Uint64
	parent uint32
	name   string
}

func newPathIndex() *pathIndex {
	x := &pathIndex{seed: maphash.MakeSeed(), next: RootPath}
	x.tab.Store(&pathTable{mask: 1<<10 - 1, slots: make([]pathSlot, 1<<10)})
	x.mu.Lock()
	x.insert(x.hash(0, ""), 0, "") // the root: RootPath
	x.mu.Unlock()
	return x
}

func (x *pathIndex) hash(parent uint32, name string) uint64 {
	h := maphash.String(x.seed, name) ^ uint64(parent)*0x9E3779B97F4A7C15
	return h ^ h>>29
}

// id returns the id of (parent, name), interning it on first sight. A new pair's record
// is queued for the encoder, and is written before any event appended after id returns.
func (x *pathIndex) id(parent uint32, name string) uint32 {
	h := x.hash(parent, name)
	if id, ok := find(x.tab.Load(), h, parent, name); ok {
		return id
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if id, ok := find(x.tab.Load(), h, parent, name); ok {
		return id
	}
	return x.insert(h, parent, strings.Clone(name))
}

func find(t *pathTable, h uint64, parent uint32, name string) (uint32, bool) {
	tag := h >> 32
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		v := s.word.Load()
		if v == 0 {
			return 0, false
		}
		if v>>32 == tag && s.parent == parent && s.name == name {
			return uint32(v), true
		}
	}
}

// insert adds a pair that is not in the index. The caller holds mu and owns name.
func (x *pathIndex) insert(h uint64, parent uint32, name string) uint32 {
	id := x.next
	x.next++
	t := x.tab.Load()
	if 4*(t.used+1) > 3*len(t.slots) {
		t = x.grow(t)
	}
	put(t, h, id, parent, name)
	x.pend = append(x.pend, PathRecord{ID: id, Parent: parent, Name: name})
	return id
}

// put publishes the pair in t's first free slot from h.
func put(t *pathTable, h uint64, id, parent uint32, name string) {
	i := h & t.mask
	for t.slots[i].word.Load() != 0 {
		i = (i + 1) & t.mask
	}
	s := &t.slots[i]
	s.parent, s.name = parent, name
	s.word.Store(h>>32<<32 | uint64(id))
	t.used++
}

// grow publishes a table twice the size of t holding t's pairs.
func (x *pathIndex) grow(t *pathTable) *pathTable {
	n := &pathTable{mask: uint64(2*len(t.slots)) - 1, slots: make([]pathSlot, 2*len(t.slots))}
	for i := range t.slots {
		s := &t.slots[i]
		if v := s.word.Load(); v != 0 {
			put(n, x.hash(s.parent, s.name), uint32(v), s.parent, s.name)
		}
	}
	x.tab.Store(n)
	return n
}

// take returns the records queued since the last take.
func (x *pathIndex) take() []PathRecord {
	x.mu.Lock()
	p := x.pend
	x.pend = nil
	x.mu.Unlock()
	return p
}
