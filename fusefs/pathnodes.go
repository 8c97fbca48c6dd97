package fusefs

import (
	"sync"
	"sync/atomic"
)

// pathNodes maps a path id to the node id the kernel knows under that path (RENAME names
// its source by directory and name only). Path ids are dense (the recorder assigns them
// from 1), so it is an array in pages of nodePageSize entries (as a sharded map it cost a
// forget 0.8 µs in a mount, measured). A page is allocated on first use and freed when its
// last entry is deleted: ids only grow, and a job that names new files without end leaves
// its old pages empty, so memory follows the nodes the kernel holds, not every path seen.
// The ids it holds are also the ones the recorder's path index must keep (liveSet).
//
// Entries are atomics; the read lock is held across an entry's update, so that a page
// being freed (under the write lock, once its count is 0) cannot take an update with it.
type pathNodes struct {
	mu    sync.RWMutex
	pages []*nodePage
}

type nodePage struct {
	used  atomic.Int32 // entries not 0
	nodes [nodePageSize]atomic.Uint64
}

const nodePageSize = 1024

// page returns the page of id, nil if it has none. The caller holds mu.
func (p *pathNodes) page(id uint32) *nodePage {
	if i := int(id / nodePageSize); i < len(p.pages) {
		return p.pages[i]
	}
	return nil
}

// set records node (not 0) under id.
func (p *pathNodes) set(id uint32, node uint64) {
	p.mu.RLock()
	if pg := p.page(id); pg != nil {
		pg.store(id, node)
		p.mu.RUnlock()
		return
	}
	p.mu.RUnlock()
	p.mu.Lock()
	i := int(id / nodePageSize)
	for len(p.pages) <= i {
		p.pages = append(p.pages, nil)
	}
	if p.pages[i] == nil {
		p.pages[i] = new(nodePage)
	}
	p.pages[i].store(id, node)
	p.mu.Unlock()
}

// store records node (not 0) under id, counting a new entry. The caller holds the map's lock.
func (pg *nodePage) store(id uint32, node uint64) {
	if pg.nodes[id%nodePageSize].Swap(node) == 0 {
		pg.used.Add(1)
	}
}

// del removes id and returns the node it had, if any.
func (p *pathNodes) del(id uint32) (uint64, bool) {
	p.mu.RLock()
	pg := p.page(id)
	var n uint64
	if pg != nil {
		n = pg.nodes[id%nodePageSize].Swap(0)
	}
	p.mu.RUnlock()
	if n != 0 {
		p.dropOne(pg, id)
	}
	return n, n != 0
}

// delIf removes id if it still names node.
func (p *pathNodes) delIf(id uint32, node uint64) {
	p.mu.RLock()
	pg := p.page(id)
	done := pg != nil && pg.nodes[id%nodePageSize].CompareAndSwap(node, 0)
	p.mu.RUnlock()
	if done {
		p.dropOne(pg, id)
	}
}

// dropOne counts an entry of pg (id's page) gone, and frees the page if it was the last.
func (p *pathNodes) dropOne(pg *nodePage, id uint32) {
	if pg.used.Add(-1) != 0 {
		return
	}
	p.mu.Lock()
	if i := int(id / nodePageSize); p.pages[i] == pg && pg.used.Load() == 0 {
		p.pages[i] = nil
	}
	p.mu.Unlock()
}

// liveSet returns a snapshot of the ids that name a node, as a predicate: a bitmap of the
// pages in use, built by one pass over them. The path index asks it about most of its ids
// at a compaction, in hash order: live on each would read a random page per id, a cache
// miss each (50 ms for 650,000 ids, measured), where the bitmap is 128 bytes a page.
func (p *pathNodes) liveSet() func(id uint32) bool {
	p.mu.RLock()
	bm := make([]*[nodePageSize / 64]uint64, len(p.pages))
	for i, pg := range p.pages {
		if pg == nil {
			continue
		}
		b := new([nodePageSize / 64]uint64)
		for j := range pg.nodes {
			if pg.nodes[j].Load() != 0 {
				b[j/64] |= 1 << (j % 64)
			}
		}
		bm[i] = b
	}
	p.mu.RUnlock()
	return func(id uint32) bool {
		i := int(id / nodePageSize)
		if i >= len(bm) || bm[i] == nil {
			return false
		}
		j := id % nodePageSize
		return bm[i][j/64]&(1<<(j%64)) != 0
	}
}

// handleTable maps an open handle to its opener. go-fuse's handles are small integers,
// reused after release, so they index a paged array; a larger one (another bridge) goes
// to a map.
type handleTable struct {
	small paged[handleSlot]
	big   *shardedMap[uint64, opener]
}

// maxSmallHandle bounds the paged part: 1 Mi handles, a directory of 256 pages at most.
const maxSmallHandle = 1 << 20

// handleSlot is an opener packed in two words: tid<<32 | 1<<31 (in use) | pid, uid<<32 | gid.
// Its handle has one opener at a time (the kernel sends nothing for a handle after its
// release), so a reader never sees the two words of different openers.
type handleSlot struct{ a, b atomic.Uint64 }

const handleInUse = 1 << 31

func newHandleTable() *handleTable {
	return &handleTable{big: newShardedMap[uint64, opener]()}
}

func (h *handleTable) set(fh uint64, o opener) {
	if fh >= maxSmallHandle {
		h.big.set(fh, o)
		return
	}
	s := h.small.at(fh, true)
	s.b.Store(uint64(o.uid)<<32 | uint64(o.gid))
	s.a.Store(uint64(o.tid)<<32 | handleInUse | uint64(o.pid&^handleInUse))
}

func (h *handleTable) get(fh uint64) (opener, bool) {
	if fh >= maxSmallHandle {
		return h.big.get(fh)
	}
	s := h.small.at(fh, false)
	if s == nil {
		return opener{}, false
	}
	return s.opener()
}

// opener unpacks the slot's opener, if the slot is in use.
func (s *handleSlot) opener() (opener, bool) {
	a := s.a.Load()
	if a&handleInUse == 0 {
		return opener{}, false
	}
	b := s.b.Load()
	return opener{tid: uint32(a >> 32), pid: uint32(a) &^ handleInUse, uid: uint32(b >> 32), gid: uint32(b)}, true
}

func (h *handleTable) del(fh uint64) (opener, bool) {
	if fh >= maxSmallHandle {
		return h.big.del(fh)
	}
	s := h.small.at(fh, false)
	if s == nil {
		return opener{}, false
	}
	o, ok := s.opener()
	if ok {
		s.a.Store(0)
	}
	return o, ok
}
