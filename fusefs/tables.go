package fusefs

import (
	"github.com/iotap/iotap/trace"
)

// nodeRef is what the tracer knows about a node id the kernel holds.
type nodeRef struct {
	path uint32 // current path id (0 = unknown, e.g. an O_TMPFILE node)
	refs uint64 // kernel lookup count: +1 per entry reply, -nlookup per FORGET
}

// nodeTable maps FUSE node ids to path ids and back (the reverse map serves RENAME, which
// names the moved object by parent and name only).
type nodeTable struct {
	byNode *shardedMap[uint64, nodeRef]
	byPath *shardedMap[uint32, uint64]
}

func newNodeTable() nodeTable {
	return nodeTable{byNode: newShardedMap[uint64, nodeRef](), byPath: newShardedMap[uint32, uint64]()}
}

// path returns the path id of a node (the root is trace.RootPath).
func (t *nodeTable) path(node uint64) uint32 {
	if node == 1 {
		return trace.RootPath
	}
	r, _ := t.byNode.get(node)
	return r.path
}

// ref counts one more kernel reference to node, now known as path.
func (t *nodeTable) ref(node uint64, path uint32) {
	if node == 0 || node == 1 {
		return
	}
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r := sh.m[node]
	r.refs++
	r.path = path
	sh.m[node] = r
	sh.mu.Unlock()
	if path != 0 {
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

// move records that the object at path from is now at path to (RENAME). With exchange, the
// object at to moves to from as well.
func (t *nodeTable) move(from, to uint32, exchange bool) {
	a, aok := t.byPath.del(from)
	var b uint64
	var bok bool
	if exchange {
		b, bok = t.byPath.del(to)
	} else {
		t.byPath.del(to) // whatever was there is now unlinked
	}
	if aok {
		t.repath(a, to)
	}
	if bok {
		t.repath(b, from)
	}
}

func (t *nodeTable) repath(node uint64, path uint32) {
	sh := t.byNode.shard(node)
	sh.mu.Lock()
	r, ok := sh.m[node]
	if ok {
		r.path = path
		sh.m[node] = r
	}
	sh.mu.Unlock()
	if ok {
		t.byPath.set(path, node)
	}
}

// opener is who opened a handle: RELEASE and RELEASEDIR (pid 0) are attributed to it.
type opener struct {
	tid, pid, uid, gid uint32
	record             bool
}
