package fusefs

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestNodeMapModel runs random stores, removes and lookups against a Go map: sequential
// node ids as go-fuse hands them out, bursts of removals (forgets) and reuse of the freed
// entries, through growth and probe chains that wrap around a shard's table.
func TestNodeMapModel(t *testing.T) {
	m := newNodeMap()
	model := map[uint64]nodeRef{}
	rng := rand.New(rand.NewPCG(1, 2))
	next := uint64(2)
	live := []uint64{}
	check := func(node uint64) {
		t.Helper()
		want, wok := model[node]
		got, ok := m.get(node)
		if ok != wok || got != want {
			t.Fatalf("node %d: got %+v, %v; want %+v, %v", node, got, ok, want, wok)
		}
	}
	for step := range 200000 {
		switch op := rng.IntN(10); {
		case op < 5 || len(live) == 0: // a new node
			n := next
			next += uint64(1 + rng.IntN(2))
			r := nodeRef{path: uint32(step), refs: 1, name: "x"}
			sh := m.shard(n)
			sh.mu.Lock()
			sh.store(n, r)
			sh.mu.Unlock()
			model[n] = r
			live = append(live, n)
		case op < 8: // forget one, oldest first more often
			k := rng.IntN(len(live))
			if rng.IntN(2) == 0 {
				k = rng.IntN(min(len(live), 8))
			}
			n := live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			sh := m.shard(n)
			sh.mu.Lock()
			sh.remove(n)
			sh.remove(n) // twice: the second finds nothing
			sh.mu.Unlock()
			delete(model, n)
			check(n)
		default: // update one
			n := live[rng.IntN(len(live))]
			r := model[n]
			r.refs++
			sh := m.shard(n)
			sh.mu.Lock()
			sh.store(n, r)
			sh.mu.Unlock()
			model[n] = r
		}
		if step%1000 == 0 {
			for _, n := range live {
				check(n)
			}
			check(next + 100) // never stored
		}
	}
	total := 0
	for i := range m.shards {
		sh := &m.shards[i]
		n := 0
		for _, e := range sh.slots {
			if e.node != 0 {
				n++
			}
		}
		if n != sh.used {
			t.Errorf("shard %d: %d entries, counted %d", i, n, sh.used)
		}
		total += n
	}
	if total != len(model) {
		t.Errorf("%d entries, the model has %d", total, len(model))
	}
}

// TestNodeMapLayout: an entry and a shard are one cache line each.
func TestNodeMapLayout(t *testing.T) {
	if n := unsafe.Sizeof(nodeEntry{}); n != 64 {
		t.Errorf("entry: %d bytes", n)
	}
	if n := unsafe.Sizeof(nodeShard{}); n != 64 {
		t.Errorf("shard: %d bytes", n)
	}
}

// store sets node's entry (node > 0).
func (s *nodeShard) store(node uint64, r nodeRef) {
	p, _ := s.entry(node)
	*p = r
}
