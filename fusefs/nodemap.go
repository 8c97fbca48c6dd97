package fusefs

import "sync"

// nodeMap is byNode: node id → nodeRef, in numShards locked shards, each an open-addressed
// table of 64-byte entries (the id and its nodeRef in one cache line). Reaching a node is
// the shard's line (lock and table header) and the entry's: a Go map took three to four
// more (its header, directory, table, control word), each cold in a mount, which made a
// FORGET or the CREATE of a new node spend ~0.9 µs there.
type nodeMap struct {
	shards [numShards]nodeShard
}

// nodeShard is one shard. Its methods other than get expect the caller to hold mu.
type nodeShard struct {
	mu    sync.RWMutex
	slots []nodeEntry // nil or a power of two long; node 0 marks a free entry
	used  int
	_     [8]byte // with mu (24) and slots (24): one 64-byte line
}

type nodeEntry struct {
	node uint64
	ref  nodeRef
}

func newNodeMap() *nodeMap { return &nodeMap{} }

// hashNode mixes a node id: the top 6 bits pick the shard, the bits below the entry.
func hashNode(node uint64) uint64 { return node * 0x9E3779B97F4A7C15 }

func (m *nodeMap) shard(node uint64) *nodeShard {
	return &m.shards[hashNode(node)>>(64-6)]
}

// get returns node's entry, under the shard's read lock.
func (m *nodeMap) get(node uint64) (nodeRef, bool) {
	sh := m.shard(node)
	sh.mu.RLock()
	r, ok := sh.lookup(node)
	sh.mu.RUnlock()
	return r, ok
}

// find returns the index of node's entry (ok), or of the free entry that ends its probe
// (not ok; 0 in an empty table).
func (s *nodeShard) find(node uint64) (uint64, bool) {
	if len(s.slots) == 0 {
		return 0, false
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.start(node, mask); ; i = (i + 1) & mask {
		switch s.slots[i].node {
		case node:
			return i, true
		case 0:
			return i, false
		}
	}
}

// start is node's home entry in a table of mask+1 entries: the hash bits below the
// shard's.
func (s *nodeShard) start(node, mask uint64) uint64 {
	return hashNode(node) >> 26 & mask
}

func (s *nodeShard) lookup(node uint64) (nodeRef, bool) {
	if i, ok := s.find(node); ok {
		return s.slots[i].ref, true
	}
	return nodeRef{}, false
}

// at returns node's entry, or nil. The pointer is valid until the next change of the shard.
func (s *nodeShard) at(node uint64) *nodeRef {
	if i, ok := s.find(node); ok {
		return &s.slots[i].ref
	}
	return nil
}

// entry returns node's entry, adding a zero one if node has none (added): one probe, where
// a lookup followed by a store took two or three, each a cold line in a mount. The pointer
// is valid until the next change of the shard.
func (s *nodeShard) entry(node uint64) (r *nodeRef, added bool) {
	i, ok := s.find(node)
	if ok {
		return &s.slots[i].ref, false
	}
	if 4*(s.used+1) > 3*len(s.slots) {
		s.grow()
		i = s.put(node, nodeRef{})
	} else {
		s.slots[i] = nodeEntry{node: node}
	}
	s.used++
	return &s.slots[i].ref, true
}

// put writes an entry known to be absent into the first free entry of its probe, and
// returns its index.
func (s *nodeShard) put(node uint64, r nodeRef) uint64 {
	mask := uint64(len(s.slots) - 1)
	i := s.start(node, mask)
	for s.slots[i].node != 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = nodeEntry{node: node, ref: r}
	return i
}

func (s *nodeShard) grow() {
	old := s.slots
	s.slots = make([]nodeEntry, max(16, 2*len(old)))
	for i := range old {
		if old[i].node != 0 {
			s.put(old[i].node, old[i].ref)
		}
	}
}

// remove deletes node's entry.
func (s *nodeShard) remove(node uint64) {
	if i, ok := s.find(node); ok {
		s.removeAt(i)
	}
}

// removeAt deletes the entry at index i, moving later entries of the probe back into the
// hole (no tombstones: a table of nodes that come and go does not fill up with them).
func (s *nodeShard) removeAt(i uint64) {
	mask := uint64(len(s.slots) - 1)
	for {
		j := i
		for {
			j = (j + 1) & mask
			if s.slots[j].node == 0 {
				s.slots[i] = nodeEntry{}
				s.used--
				return
			}
			// Entry j can fill the hole at i unless its home lies in (i, j], cyclically.
			k := s.start(s.slots[j].node, mask)
			if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
				s.slots[i] = s.slots[j]
				i = j
				break
			}
		}
	}
}
