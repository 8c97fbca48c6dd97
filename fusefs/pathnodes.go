package fusefs

import "sync/atomic"

// pathNodes maps a path id to the node id the kernel knows under that path (RENAME names
// its source by directory and name only). Path ids are dense (the recorder assigns them
// from 1): 8 bytes per path id up to the largest, next to the recorder's own record of
// every path. As a sharded map it cost a forget 0.8 µs in a mount (measured).
type pathNodes struct{ p paged[atomic.Uint64] }

// set records node under id.
func (p *pathNodes) set(id uint32, node uint64) { p.p.at(uint64(id), true).Store(node) }

// del removes id and returns the node it had, if any.
func (p *pathNodes) del(id uint32) (uint64, bool) {
	e := p.p.at(uint64(id), false)
	if e == nil {
		return 0, false
	}
	n := e.Swap(0)
	return n, n != 0
}

// delIf removes id if it still names node.
func (p *pathNodes) delIf(id uint32, node uint64) {
	if e := p.p.at(uint64(id), false); e != nil {
		e.CompareAndSwap(node, 0)
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
