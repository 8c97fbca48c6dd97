package fusefs

import (
	"sync"
	"sync/atomic"
)

// pathNodes maps a path id to the node id the kernel knows under that path (RENAME names
// its source by directory and name only). Path ids are dense (the recorder assigns them
// from 1), so it is an array indexed by id, in pages allocated on first use; an entry is
// read and written with atomics. A create's insert and a forget's delete each touch the
// page directory and one entry, where a sharded map took a shard lock, the map's header
// and a bucket: in a mount, 0.8 µs per forget (measured) went to that map. Memory: 8
// bytes per path id up to the largest, next to the recorder's own record of every path.
type pathNodes struct {
	mu    sync.RWMutex // guards the pages slice (not the entries)
	pages []*[pathNodesPage]atomic.Uint64
}

const pathNodesPage = 4096 // ids per page: 32 KiB

// entry returns the slot of id, allocating its page if grow is set (nil otherwise).
func (p *pathNodes) entry(id uint32, grow bool) *atomic.Uint64 {
	pg, i := int(id/pathNodesPage), id%pathNodesPage
	p.mu.RLock()
	var page *[pathNodesPage]atomic.Uint64
	if pg < len(p.pages) {
		page = p.pages[pg]
	}
	p.mu.RUnlock()
	if page == nil {
		if !grow {
			return nil
		}
		p.mu.Lock()
		for len(p.pages) <= pg {
			p.pages = append(p.pages, nil)
		}
		if p.pages[pg] == nil {
			p.pages[pg] = new([pathNodesPage]atomic.Uint64)
		}
		page = p.pages[pg]
		p.mu.Unlock()
	}
	return &page[i]
}

// set records node under id.
func (p *pathNodes) set(id uint32, node uint64) { p.entry(id, true).Store(node) }

// del removes id and returns the node it had, if any.
func (p *pathNodes) del(id uint32) (uint64, bool) {
	e := p.entry(id, false)
	if e == nil {
		return 0, false
	}
	n := e.Swap(0)
	return n, n != 0
}

// delIf removes id if it still names node.
func (p *pathNodes) delIf(id uint32, node uint64) {
	if e := p.entry(id, false); e != nil {
		e.CompareAndSwap(node, 0)
	}
}
