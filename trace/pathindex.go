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
//
// Memory is bounded by the paths in use, not by every path a job ever named: once the table
// has limit slots and a keep function is set (the tracing layer's: ids that name an object
// the kernel still holds), a full table is compacted instead of doubled. The new table keeps
// the ids keep reports, the ids assigned last (a caller may hold one it has not registered
// yet) and the root, and forgets the rest. A forgotten pair named again gets a new id and a
// new PathRecord: a trace may hold one (parent, name) under several ids, and the Reader
// reports them all as the first. Only when the kept ids fill more than half the table does it
// double past limit.
type pathIndex struct {
	seed, seed2 maphash.Seed
	tab         atomic.Pointer[pathTable]

	mu          sync.Mutex // serializes inserts; guards the fields below
	next        uint32
	pend        []PathRecord // records not yet taken by the encoder
	limit       int          // slots from which a full table is compacted (0: never)
	keep        func() func(id uint32) bool
	forgot      func(ids []uint32) // may be nil
	compactions uint64             // tables compacted
	evicted     uint64             // ids forgotten by compactions
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
		t = x.makeRoom(t)
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

// makeRoom publishes a table with room for more pairs than t, a full table: t compacted
// once it has reached the limit and at most half of it is kept, else t doubled.
func (x *pathIndex) makeRoom(t *pathTable) *pathTable {
	if x.keep != nil && x.limit > 0 && len(t.slots) >= x.limit {
		t = x.compact(t)
		if 2*t.used <= len(t.slots) {
			return t
		}
	}
	return x.grow(t)
}

// compact publishes a table of t's size holding the pairs whose ids are kept: the root's,
// the last len(t.slots)/8 assigned, and those x.keep's predicate reports. The recent ones cover a caller
// that has interned a path and not yet registered its object where keep looks. Readers
// still on t keep finding its ids, which remain valid: a forgotten id is only never
// returned again.
func (x *pathIndex) compact(t *pathTable) *pathTable {
	recent := uint32(len(t.slots) / 8)
	low := uint32(RootPath + 1)
	if x.next > low+recent {
		low = x.next - recent
	}
	n := &pathTable{mask: t.mask, slots: make([]pathSlot, len(t.slots))}
	keep := x.keep()
	var gone []uint32
	for i := range t.slots {
		s := &t.slots[i]
		v := s.word.Load()
		if v == 0 {
			continue
		}
		if id := uint32(v); id == RootPath || id >= low || keep(id) {
			put(n, v, s.h2)
		} else {
			x.evicted++
			if x.forgot != nil {
				gone = append(gone, id)
			}
		}
	}
	x.compactions++
	x.tab.Store(n)
	if x.forgot != nil {
		x.forgot(gone)
	}
	return n
}

// setLimit makes the index compact its table from limit slots (rounded up to a power of
// two, at least 1024), keeping the ids for which the predicate keep returns (once per
// compaction) reports true; forgot, if not nil, is given the ids each compaction forgot.
// Both are called with the index's lock held: they must not intern paths.
func (x *pathIndex) setLimit(limit int, keep func() func(id uint32) bool, forgot func(ids []uint32)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.limit = 1 << 10
	for x.limit < limit {
		x.limit *= 2
	}
	x.keep, x.forgot = keep, forgot
}

// counts returns the number of compactions, the ids they forgot and the table's slots.
func (x *pathIndex) counts() (compactions, evicted uint64, slots int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.compactions, x.evicted, len(x.tab.Load().slots)
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
