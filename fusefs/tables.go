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
	byPath *shardedMap[uint32, uint64]
	gen    atomic.Uint32
	intern func(parent uint32, name string) uint32 // Recorder.Path (+ filter learning)
}

func newNodeTable(intern func(uint32, string) uint32) *nodeTable {
	return &nodeTable{
		byNode: newShardedMap[uint64, nodeRef](),
		byPath: newShardedMap[uint32, uint64](),
		intern: intern,
	}
}

// path returns the path id of a node (the root is trace.RootPath).
func (t *nodeTable) path(node uint64) uint32 {
	if node == 1 {
		return trace.RootPath
	}
	r, ok := t.byNode.get(node)
	if !ok || r.gen == t.gen.Load() || r.parent == 0 {
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
	sh.mu.Unlock()
	if path != 0 && moved {
		// A repeated lookup of a node (every stat with 0 s entry timeouts) changes nothing.
		t.byPath.set(path, node)
	}
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
			gone = true
		} else {
			r.refs -= n
			sh.m[node] = r
		}
	}
	sh.mu.Unlock()
	if gone && r.path != 0 {
		ps := t.byPath.shard(r.path)
		ps.mu.Lock()
		if ps.m[r.path] == node {
			delete(ps.m, r.path)
		}
		ps.mu.Unlock()
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
	record             bool
}
