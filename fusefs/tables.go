package fusefs

import (
	"strings"
	"sync/atomic"

	"github.com/iotap/iotap/trace"
)

// nodeRef is what the tracer knows about a node id the kernel holds.
type nodeRef struct {
	path   uint32 // path id (0 = unknown, e.g. an O_TMPFILE node)
	gen    uint32 // nodeTable.gen when path was computed
	refs   uint64 // kernel lookup count: +1 per entry reply, -nlookup per FORGET
	parent uint64 // node id of the directory it was last seen in
	name   string // its name there
	isDir  bool
}

// nodeTable maps FUSE node ids to path ids and back (the reverse map serves RENAME, which
// names the moved object by parent and name only). Each node also remembers its parent node
// and name: when a directory is renamed the table's generation moves on, and the path of a
// node computed in an older generation is recomputed (parent's path + name) on its next use,
// so the children of a renamed directory get their new paths without a new LOOKUP.
type nodeTable struct {
	byNode *shardedMap[uint64, nodeRef]
	byPath pathNodes
	gen    atomic.Uint32
	intern func(parent uint32, name string) uint32 // Recorder.Path (+ filter learning)
	cache  [nodeCacheSize]nodeSlot                 // node → path, in front of byNode
}

// nodeCacheSize is the number of slots of the direct-mapped cache of node paths.
const nodeCacheSize = 4096

// nodeBusy marks a cache slot being written.
const nodeBusy = ^uint64(0)

// nodeSlot caches the path of one node: nearly every request names a node, and a hit reads
// this one cache line without a lock, where byNode costs its shard's lock and the map's
// buckets, three to four cold lines in a mount.
//
// Slots are written only by a holder of the node's byNode shard lock (read or write), so a
// filled value is the map's value at that moment; fills of different nodes sharing a slot
// exclude each other by swapping node to nodeBusy, and readers check node before and after
// reading val. A change to a node's path replaces or drops its slot under the write lock.
type nodeSlot struct {
	node atomic.Uint64 // 0: empty
	val  atomic.Uint64 // path<<32 | the table's generation when path was computed
}

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

// fill caches path for node, computed in generation gen. The caller holds node's shard
// lock. It gives up if another fill is writing the slot: the cache may miss, never lie.
func (t *nodeTable) fill(node uint64, path, gen uint32) {
	s := &t.cache[node%nodeCacheSize]
	old := s.node.Load()
	if old == nodeBusy || !s.node.CompareAndSwap(old, nodeBusy) {
		return
	}
	s.val.Store(uint64(path)<<32 | uint64(gen))
	s.node.Store(node)
}

// drop empties node's slot if it holds node. The caller holds node's shard write lock, so
// no fill of node is in progress.
func (t *nodeTable) drop(node uint64) {
	t.cache[node%nodeCacheSize].node.CompareAndSwap(node, 0)
}

func newNodeTable(intern func(uint32, string) uint32) *nodeTable {
	return &nodeTable{
		byNode: newShardedMap[uint64, nodeRef](),
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
	r, ok := sh.m[node]
	gen := t.gen.Load()
	current := ok && (r.gen == gen || r.parent == 0) // a node without a parent keeps its path
	if current {
		t.fill(node, r.path, gen)
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
	if cur, ok := sh.m[node]; ok && cur.parent == r.parent && cur.name == r.name {
		cur.path, cur.gen = id, gen
		sh.m[node] = cur
		t.fill(node, id, gen)
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
	r, known := sh.m[node]
	moved := !known || r.path != path
	r.refs++
	r.path, r.gen, r.parent, r.isDir = path, t.gen.Load(), parent, isDir
	if r.name != name {
		r.name = strings.Clone(name)
	}
	sh.m[node] = r
	t.fill(node, r.path, r.gen)
	sh.mu.Unlock()
	if path != 0 && moved {
		// A repeated lookup of a node (every stat with 0 s entry timeouts) changes nothing.
		t.byPath.set(path, node)
	}
}

// refKnown counts one more kernel reference to node if the table already knows it as
// dir/name with a current path, and returns that path. A repeated LOOKUP of a known name
// (every stat with 0 s entry timeouts) then costs one shard of this table instead of the
// parent's path, the path interning and the shard: the request's cold cache lines are the
// layer's main cost in a mount.
func (t *nodeTable) refKnown(node, dir uint64, name string) (uint32, bool) {
	if node <= 1 {
		return 0, false
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r, ok := sh.m[node]
	ok = ok && r.path != 0 && r.parent == dir && r.name == name && r.gen == t.gen.Load()
	if ok {
		r.refs++
		sh.m[node] = r
	}
	sh.mu.Unlock()
	return r.path, ok
}

// forget drops n kernel references to node; the mapping goes when none is left.
func (t *nodeTable) forget(node, n uint64) {
	if node == 1 {
		return
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r, ok := sh.m[node]
	gone := false
	if ok {
		if r.refs <= n {
			delete(sh.m, node)
			t.drop(node)
			gone = true
		} else {
			r.refs -= n
			sh.m[node] = r
		}
	}
	sh.mu.Unlock()
	if gone && r.path != 0 {
		t.byPath.delIf(r.path, node)
	}
}

// rename records a successful RENAME of from (oldDir/oldName) to to (newDir/newName). With
// exchange, the object at to moves to from as well.
func (t *nodeTable) rename(from, to uint32, oldDir uint64, oldName string, newDir uint64, newName string, exchange bool) {
	a, aok := t.byPath.del(from)
	var b uint64
	var bok bool
	if exchange {
		b, bok = t.byPath.del(to)
	} else {
		t.byPath.del(to) // whatever was there is now unlinked
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
	r, ok := sh.m[node]
	if ok {
		r.path, r.parent, r.name = path, dir, strings.Clone(name)
		sh.m[node] = r
		t.fill(node, path, r.gen)
	}
	sh.mu.Unlock()
	if ok {
		t.byPath.set(path, node)
	}
	return ok && r.isDir
}

// opener is who opened a handle: RELEASE and RELEASEDIR (pid 0) are attributed to it.
type opener struct {
	tid, pid, uid, gid uint32
}
