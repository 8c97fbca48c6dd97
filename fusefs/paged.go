package fusefs

import (
	"sync"
	"sync/atomic"
)

// paged is an array indexed by a dense id, in pages of pagedSize entries allocated on
// first use. Entries are atomics, read and written without a lock; the lock guards the
// page directory only. A lookup touches the directory and one entry, where a sharded map
// takes a shard lock, the map's header and a bucket (in a mount, each of those is a cold
// cache line and often a cold TLB entry).
type paged[T any] struct {
	mu    sync.RWMutex // guards pages (not the entries)
	pages []*[pagedSize]T
}

const pagedSize = 4096

// at returns the entry of id, allocating its page if grow is set (nil otherwise).
func (p *paged[T]) at(id uint64, grow bool) *T {
	pg, i := id/pagedSize, id%pagedSize
	p.mu.RLock()
	var page *[pagedSize]T
	if pg < uint64(len(p.pages)) {
		page = p.pages[pg]
	}
	p.mu.RUnlock()
	if page == nil {
		if !grow {
			return nil
		}
		p.mu.Lock()
		for uint64(len(p.pages)) <= pg {
			p.pages = append(p.pages, nil)
		}
		if p.pages[pg] == nil {
			p.pages[pg] = new([pagedSize]T)
		}
		page = p.pages[pg]
		p.mu.Unlock()
	}
	return &page[i]
}

// bitset is a growable set of small integers (path ids, which the recorder assigns densely
// from 1): 10 million paths cost 1.25 MB. testAndSet is lock-free once the page exists.
type bitset struct{ p paged[atomic.Uint64] }

// testAndSet sets bit i and reports whether it was clear before.
func (b *bitset) testAndSet(i uint32) bool {
	bit := uint64(1) << (i % 64)
	return b.p.at(uint64(i/64), true).Or(bit)&bit == 0
}
