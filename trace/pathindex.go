package trace

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// pathIndex interns (parent, name) pairs as path ids. A hit, the common case (every
// request that names a file by its directory and name: create, unlink, a negative lookup),
// takes no lock and writes nothing shared: it hashes the pair twice and reads the table's
// header and one slot. A map behind an RWMutex took the lock word (written by every
// caller, on every CPU) and three to four lines of the map; comparing a stored name would
// read one more cold line per hit (the name's bytes).
//
// A slot identifies its pair by 96 bits of two independent hashes (seeded per process), not
// by the name: two pairs of a trace are mistaken for each other with a probability of about
// n²/2⁹⁷ for n pairs, 10⁻¹³ for a hundred million. The names themselves go to the encoder
// (pend), once.
//
// Inserts are serialized by mu. A slot's second hash is written before its id is published
// in the slot's word (an atomic store), so a reader that finds the id reads the whole slot.
// The table (16 bytes a slot) doubles when three quarters full: the new table is filled,
// then published; readers of the old one see every id published before the switch, and a
// miss is re-checked under mu.
type pathIndex struct {
	seed, seed2 maphash.Seed
	tab         atomic.Pointer[pathTable]

	mu   sync.Mutex // serializes inserts; guards next and pend
	next uint32
	pend []PathRecord // records not yet taken by the encoder
}

// pathTable is open-addressed with linear probing, from the second hash's low bits.
type pathTable struct {
	mask  uint64
	used  int // guarded by pathIndex.mu
	slots []pathSlot
}

// pathSlot holds one pair: word = tag<<32 | id, where tag is the top half of the pair's
// first hash (0 = empty: ids start at RootPath), and h2 its second hash, written before word.
type pathSlot struct {
	word atomic.Uint64
	h2   uint64
}

func newPathIndex() *pathIndex {
	x := &pathIndex{seed: maphash.MakeSeed(), seed2: maphash.MakeSeed(), next: RootPath}
	x.tab.Store(&pathTable{mask: 1<<10 - 1, slots: make([]pathSlot, 1<<10)})
	x.mu.Lock()
	h1, h2 := x.hash(0, "")
	x.insert(h1, h2, 0, "") // the root: RootPath
	x.mu.Unlock()
	return x
}

// hash returns the pair's two hashes.
func (x *pathIndex) hash(parent uint32, name string) (h1, h2 uint64) {
	p := uint64(parent) * 0x9E3779B97F4A7C15
	h1 = maphash.String(x.seed, name) ^ p
	h2 = maphash.String(x.seed2, name) ^ p>>7 ^ p<<41
	return h1 ^ h1>>29, h2 ^ h2>>31
}

// id returns the id of (parent, name), interning it on first sight. A new pair's record
// is queued for the encoder, and is written before any event appended after id returns.
func (x *pathIndex) id(parent uint32, name string) uint32 {
	h1, h2 := x.hash(parent, name)
	if id, ok := find(x.tab.Load(), h1, h2); ok {
		return id
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if id, ok := find(x.tab.Load(), h1, h2); ok {
		return id
	}
	return x.insert(h1, h2, parent, strings.Clone(name))
}

func find(t *pathTable, h1, h2 uint64) (uint32, bool) {
	tag := h1 >> 32
	for i := h2 & t.mask; ; i = (i + 1) & t.mask {
		s := &t.slots[i]
		v := s.word.Load()
		if v == 0 {
			return 0, false
		}
		if v>>32 == tag && s.h2 == h2 {
			return uint32(v), true
		}
	}
}

// insert adds a pair that is not in the index. The caller holds mu and owns name.
func (x *pathIndex) insert(h1, h2 uint64, parent uint32, name string) uint32 {
	id := x.next
	x.next++
	t := x.tab.Load()
	if 4*(t.used+1) > 3*len(t.slots) {
		t = x.grow(t)
	}
	put(t, h1>>32<<32|uint64(id), h2)
	x.pend = append(x.pend, PathRecord{ID: id, Parent: parent, Name: name})
	return id
}

// put publishes a slot's word and second hash in t's first free slot from h2.
func put(t *pathTable, word, h2 uint64) {
	i := h2 & t.mask
	for t.slots[i].word.Load() != 0 {
		i = (i + 1) & t.mask
	}
	s := &t.slots[i]
	s.h2 = h2
	s.word.Store(word)
	t.used++
}

// grow publishes a table twice the size of t holding t's pairs.
func (x *pathIndex) grow(t *pathTable) *pathTable {
	n := &pathTable{mask: uint64(2*len(t.slots)) - 1, slots: make([]pathSlot, 2*len(t.slots))}
	for i := range t.slots {
		s := &t.slots[i]
		if v := s.word.Load(); v != 0 {
			put(n, v, s.h2)
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
