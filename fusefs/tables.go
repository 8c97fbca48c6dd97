package fusefs

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/iotap/iotap/trace"
)

// nodeRef is what the tracer knows about a node id the kernel holds.
type nodeRef struct {
	path   uint32 // path id (0 = unknown, e.g. an O_TMPFILE node)
	gen    uint32 // nodeTable.gen when path was computed
	refs   uint64 // kernel lookup count: +1 per entry reply, -nlookup per FORGET
	parent uint64 // node id of the directory it was last seen in
	hash   uint64 // nameHash(name)
	name   string // its name there
	isDir  bool
}

// nodeTable maps FUSE node ids to path ids and back (the reverse map serves RENAME, which
// names the moved object by parent and name only). Each node also remembers its parent node
// and name: when a directory is renamed the table's generation moves on, and the path of a
// node computed in an older generation is recomputed (parent's path + name) on its next use,
// so the children of a renamed directory get their new paths without a new LOOKUP.
type nodeTable struct {
	byNode *nodeMap
	byPath pathNodes
	gen    atomic.Uint32
	seed   maphash.Seed
	intern func(parent uint32, name string) uint32 // Recorder.Path (+ filter learning)
	cache  [nodeCacheSize]nodeSlot                 // node → path, in front of byNode
	// past keeps, when set, the paths nodes had before a rename moved them or the kernel
	// forgot them (kernel passthrough: the reads and writes the kernel served on a node reach
	// the layer some milliseconds after they ended, when the node may have moved or gone).
	past *pastPaths
}

// pastSlots is how many earlier paths are kept: at tens of thousands of renames or
// forgotten files a second, more than the time the kernel's records of calls take to reach
// the layer.
const pastSlots = 1 << 14

// pastPath is a path a node had until a time (trace.Now's clock; forever for a forgotten
// node), and the index of the node's previous entry (-1: none).
type pastPath struct {
	node  uint64
	until int64
	path  uint32
	prev  int32
}

// pastPaths is a bounded memory of the paths nodes had before they moved or were
// forgotten: the oldest entry goes as a new one comes. go-fuse never gives a forgotten node's
// id to another object.
type pastPaths struct {
	mu   sync.Mutex // guards all
	last map[uint64]int32
	ring [pastSlots]pastPath
	next int32
}

func newPastPaths() *pastPaths {
	return &pastPaths{last: make(map[uint64]int32, pastSlots)}
}

// put remembers that node had path until the time until.
func (f *pastPaths) put(node uint64, path uint32, until int64) {
	f.mu.Lock()
	e := &f.ring[f.next]
	if e.node != 0 && f.last[e.node] == f.next {
		delete(f.last, e.node)
	}
	prev, ok := f.last[node]
	if !ok {
		prev = -1
	}
	*e = pastPath{node: node, until: until, path: path, prev: prev}
	f.last[node] = f.next
	f.next = (f.next + 1) % pastSlots
	f.mu.Unlock()
}

// at returns the path node had at the time at if it has changed since, or 0. A node's
// entries go from the newest back, each until an earlier time: the path at the time at is
// that of the earliest change after it.
func (f *pastPaths) at(node uint64, at int64) uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.last[node]
	if !ok {
		return 0
	}
	var path uint32
	later := int64(math.MaxInt64)
	for n := 0; i >= 0 && n < pastSlots; n++ {
		e := &f.ring[i]
		// An entry taken over by another node, or by a newer one of this node's, ends the
		// chain.
		if e.node != node || e.until > later || e.until <= at {
			break
		}
		path, later, i = e.path, e.until, e.prev
	}
	return path
}

// pathAt returns the path id node had at the time at (trace.Now's clock): its path now,
// unless a rename moved it since or the kernel forgot it.
func (t *nodeTable) pathAt(node uint64, at int64) uint32 {
	if t.past != nil {
		if p := t.past.at(node, at); p != 0 {
			return p
		}
	}
	return t.path(node)
}

// nodeCacheSize is the number of slots of the direct-mapped cache of node paths (1 MiB).
// go-fuse numbers nodes from a counter (in steps of 2 in a create/stat/unlink loop), so
// the nodes a job uses at one time rarely share a slot: 8192 to 16384 of them fit.
const (
	nodeCacheBits = 14
	nodeCacheSize = 1 << nodeCacheBits
)

// nodeBusy marks a cache slot being written.
const nodeBusy = ^uint64(0)

// nodeSlot caches the path of one node: nearly every request names a node, and a hit reads
// this one cache line without a lock, where byNode costs its shard's lock and the map's
// buckets, three to four cold lines in a mount.
//
// Slots are written only by a holder of the node's byNode shard lock (read or write), so a
// filled value is the map's value at that moment; fills of different nodes sharing a slot
// exclude each other by swapping node to nodeBusy, and readers check node before and after
// reading the other fields. A change to a node's path replaces or drops its slot under the
// write lock.
//
// A repeated LOOKUP of a node (every stat with 0 s entry timeouts) only adds a kernel
// reference, which refKnown counts in the slot's refs word without a lock: tag<<refBits |
// count, where tag is the node id less the slot's index bits. An increment is a CAS on the
// word holding the node's tag, so it cannot land on another node. The count is moved into
// byNode under the node's shard lock (by its FORGET, or a locked lookup); a slot whose count
// is not zero is not given to another node, and a dying node's word is set to deadRefs,
// which no node's tag matches.
type nodeSlot struct {
	node   atomic.Uint64 // 0: empty
	val    atomic.Uint64 // path<<32 | the table's generation when path was computed
	parent atomic.Uint64 // the directory node the path is in
	name   atomic.Uint64 // nameHash of the name there
	refs   atomic.Uint64 // tag<<refBits | references not yet counted in byNode
	seq    atomic.Uint64 // odd while a fill writes val, parent and name
	_      [16]byte
}

const (
	refBits  = 20
	refMask  = 1<<refBits - 1
	maxTag   = 1<<(64-refBits) - 2 // nodes with larger tags take the locked path
	deadRefs = (maxTag + 1) << refBits
)

// refTag is the tag of node in its slot's refs word.
func refTag(node uint64) uint64 { return node >> nodeCacheBits }

// nameHash identifies a name in a directory for refKnown's lock-free check (a 64-bit
// hash: two names of one node in one directory, hard links, collide once in 2^64).
func (t *nodeTable) nameHash(name string) uint64 { return maphash.String(t.seed, name) }

// cached returns the path of node if its slot holds it for the current generation.
func (t *nodeTable) cached(node uint64) (uint32, bool) {
	s := &t.cache[node%nodeCacheSize]
	if s.node.Load() != node || node == 0 {
		return 0, false
	}
	v := s.val.Load()
	if s.node.Load() != node || uint32(v) != t.gen.Load() {
		return 0, false
	}
	return uint32(v >> 32), true
}

// fill caches r, node's current entry, in node's slot as of generation gen. The caller
// holds node's shard lock. It gives up if another fill is writing the slot, or if the slot
// holds another node with references not yet moved to byNode: the cache may miss, never lie.
func (t *nodeTable) fill(node uint64, r *nodeRef, gen uint32) {
	s := &t.cache[node%nodeCacheSize]
	old := s.node.Load()
	if old == nodeBusy || !s.node.CompareAndSwap(old, nodeBusy) {
		return
	}
	if old != node {
		w := s.refs.Load()
		if w&refMask != 0 || refTag(node) > maxTag || !s.refs.CompareAndSwap(w, refTag(node)<<refBits) {
			s.node.Store(old) // unchanged
			return
		}
	}
	s.seq.Add(1)
	s.val.Store(uint64(r.path)<<32 | uint64(gen))
	s.parent.Store(r.parent)
	s.name.Store(r.hash)
	s.seq.Add(1)
	s.node.Store(node)
}

// refFast is refKnown's lock-free path: if node's slot holds it as dir/name (by hash) with
// a current path, it counts the reference in the slot and returns the path.
func (t *nodeTable) refFast(node, dir, hash uint64) (uint32, bool) {
	s := &t.cache[node%nodeCacheSize]
	q := s.seq.Load()
	if q&1 != 0 || s.node.Load() != node {
		return 0, false
	}
	v := s.val.Load()
	same := s.parent.Load() == dir && s.name.Load() == hash
	if s.seq.Load() != q || s.node.Load() != node || !same || uint32(v) != t.gen.Load() || v>>32 == 0 {
		return 0, false
	}
	tag := refTag(node)
	for {
		w := s.refs.Load()
		if w>>refBits != tag || w&refMask == refMask {
			return 0, false // the slot moved on, or the count is full (the locked path takes it)
		}
		if s.refs.CompareAndSwap(w, w+1) {
			return uint32(v >> 32), true
		}
	}
}

// takeRefs moves the references counted in node's slot into r. The caller holds node's
// shard write lock.
func (t *nodeTable) takeRefs(node uint64, r *nodeRef) {
	s := &t.cache[node%nodeCacheSize]
	for {
		w := s.refs.Load()
		if w>>refBits != refTag(node) || w&refMask == 0 {
			return // not node's word, or nothing pending
		}
		if s.refs.CompareAndSwap(w, w&^refMask) {
			r.refs += w & refMask
			return
		}
	}
}

// kill marks node's slot word dead before node leaves byNode, so that no lock-free
// increment can be lost. It reports false if one came after the last takeRefs: the caller
// takes it and decides again.
func (t *nodeTable) kill(node uint64) bool {
	s := &t.cache[node%nodeCacheSize]
	w := s.refs.Load()
	if w>>refBits != refTag(node) {
		return true
	}
	return w&refMask == 0 && s.refs.CompareAndSwap(w, deadRefs)
}

// drop empties node's slot if it holds node. The caller holds node's shard write lock, so
// no fill of node is in progress.
func (t *nodeTable) drop(node uint64) {
	t.cache[node%nodeCacheSize].node.CompareAndSwap(node, 0)
}

func newNodeTable(intern func(uint32, string) uint32) *nodeTable {
	return &nodeTable{
		byNode: newNodeMap(),
		seed:   maphash.MakeSeed(),
		intern: intern,
	}
}

// path returns the path id of a node (the root is trace.RootPath).
func (t *nodeTable) path(node uint64) uint32 {
	if node == 1 {
		return trace.RootPath
	}
	if p, ok := t.cached(node); ok {
		return p
	}
	sh := t.byNode.shard(node)
	sh.mu.RLock()
	r, ok := sh.lookup(node)
	gen := t.gen.Load()
	current := ok && (r.gen == gen || r.parent == 0) // a node without a parent keeps its path
	if current {
		t.fill(node, &r, gen)
	}
	sh.mu.RUnlock()
	if !ok || current {
		return r.path
	}
	return t.refresh(node, r, 0)
}

// refresh recomputes the path of node after a directory rename.
func (t *nodeTable) refresh(node uint64, r nodeRef, depth int) uint32 {
	gen := t.gen.Load()
	if depth > 4096 { // a cycle can only come from a bug; do not recurse forever
		return r.path
	}
	parent := trace.RootPath
	if r.parent != 1 {
		pr, ok := t.byNode.get(r.parent)
		if !ok {
			return r.path // parent forgotten: keep the last known path
		}
		parent = pr.path
		if pr.gen != gen && pr.parent != 0 {
			parent = t.refresh(r.parent, pr, depth+1)
		}
	}
	id := t.intern(parent, r.name)
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	if cur := sh.at(node); cur != nil && cur.parent == r.parent && cur.name == r.name {
		cur.path, cur.gen = id, gen
		t.fill(node, cur, gen)
	}
	sh.mu.Unlock()
	if id != r.path {
		t.byPath.set(id, node)
	}
	return id
}

// ref counts one more kernel reference to node, known as path = parent/name. name may be a
// view into a request buffer: it is copied only when it changes.
func (t *nodeTable) ref(node uint64, path uint32, parent uint64, name string, isDir bool) {
	if node == 0 || node == 1 {
		return
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r, added := sh.entry(node)
	moved := added || r.path != path
	r.refs++
	r.path, r.gen, r.parent, r.isDir = path, t.gen.Load(), parent, isDir
	if r.name != name || added {
		r.name, r.hash = strings.Clone(name), t.nameHash(name)
	}
	t.fill(node, r, r.gen)
	sh.mu.Unlock()
	if path != 0 && moved {
		// A repeated lookup of a node (every stat with 0 s entry timeouts) changes nothing.
		t.byPath.set(path, node)
	}
}

// refKnown counts one more kernel reference to node if the table already knows it as
// dir/name with a current path, and returns that path. A repeated LOOKUP of a known name
// (every stat with 0 s entry timeouts) then costs one slot of the node cache (refFast)
// instead of the parent's path, the path interning and byNode's shard: the request's cold
// cache lines are the layer's main cost in a mount.
func (t *nodeTable) refKnown(node, dir uint64, name string) (uint32, bool) {
	if node <= 1 {
		return 0, false
	}
	hash := t.nameHash(name)
	if p, ok := t.refFast(node, dir, hash); ok {
		return p, true
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	var path uint32
	r := sh.at(node)
	ok := r != nil && r.path != 0 && r.parent == dir && r.name == name && r.gen == t.gen.Load()
	if ok {
		t.takeRefs(node, r)
		r.refs++
		t.fill(node, r, r.gen)
		path = r.path
	}
	sh.mu.Unlock()
	return path, ok
}

// forget drops n kernel references to node; the mapping goes when none is left.
func (t *nodeTable) forget(node, n uint64) {
	if node == 1 {
		return
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	i, ok := sh.find(node)
	var gone uint32 // the path of a node that went (0: none, or it had none)
	for ok {
		r := &sh.slots[i].ref
		t.takeRefs(node, r)
		if r.refs > n {
			r.refs -= n
			break
		}
		if t.kill(node) { // else a lock-free reference came in: take it, decide again
			gone = r.path
			sh.removeAt(i)
			t.drop(node)
			break
		}
	}
	sh.mu.Unlock()
	if gone != 0 {
		t.byPath.delIf(gone, node)
		if t.past != nil {
			t.past.put(node, gone, math.MaxInt64) // any call on it came before
		}
	}
}

// rename records a successful RENAME of from (oldDir/oldName) to to (newDir/newName), which
// entered the layer at the time at. With exchange, the object at to moves to from as well.
// With past set, the moved nodes' earlier paths are kept (the children of a moved directory
// are not: a call the kernel served on one of them is named by its new path).
func (t *nodeTable) rename(from, to uint32, oldDir uint64, oldName string, newDir uint64, newName string, exchange bool, at int64) {
	a, aok := t.byPath.del(from)
	var b uint64
	var bok bool
	if exchange {
		b, bok = t.byPath.del(to)
	} else {
		t.byPath.del(to) // whatever was there is now unlinked
	}
	if t.past != nil {
		if aok {
			t.past.put(a, from, at)
		}
		if bok {
			t.past.put(b, to, at)
		}
	}
	dirMoved := false
	if aok {
		dirMoved = t.repath(a, to, newDir, newName) || dirMoved
	}
	if bok {
		dirMoved = t.repath(b, from, oldDir, oldName) || dirMoved
	}
	if dirMoved {
		t.gen.Add(1) // paths below the moved directory are recomputed on use
	}
}

// repath moves node to path = dir/name and reports whether it is a directory.
func (t *nodeTable) repath(node uint64, path uint32, dir uint64, name string) bool {
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r := sh.at(node)
	isDir := r != nil && r.isDir
	if r != nil {
		r.path, r.parent, r.name, r.hash = path, dir, strings.Clone(name), t.nameHash(name)
		t.fill(node, r, r.gen)
	}
	sh.mu.Unlock()
	if r != nil {
		t.byPath.set(path, node)
	}
	return isDir
}

// opener is who opened a handle: RELEASE and RELEASEDIR (pid 0) are attributed to it.
type opener struct {
	tid, pid, uid, gid uint32
}
