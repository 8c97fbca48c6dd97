package fusefs

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/trace"
)

func TestPathFilter(t *testing.T) {
	tests := []struct {
		name             string
		include, exclude []string
		path             string
		want             bool
	}{
		{"no include, no exclude", nil, []string{"x"}, "a/b", true},
		{"include full path", []string{"data/*.csv"}, nil, "data/x.csv", true},
		{"include misses", []string{"data/*.csv"}, nil, "data/x.txt", false},
		{"include directory covers subtree", []string{"data"}, nil, "data/sub/x", true},
		{"include element", []string{"*.h5"}, nil, "run/1/out.h5", true},
		{"exclude element", nil, []string{".git"}, "repo/.git/objects/ab", false},
		{"exclude wins over include", []string{"repo"}, []string{"*.lock"}, "repo/index.lock", false},
		{"root with include", []string{"data"}, nil, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newPathFilter(tc.include, tc.exclude)
			id, parent := uint32(1), uint32(1)
			if tc.path != "" {
				for i, el := range splitPath(tc.path) {
					id = uint32(100 + i)
					f.learn(id, parent, el)
					parent = id
				}
			}
			if got := f.ok(id); got != tc.want {
				t.Errorf("ok(%q) = %v, want %v", tc.path, got, tc.want)
			}
			if got := f.ok(id); got != tc.want { // cached decision
				t.Errorf("cached ok(%q) = %v", tc.path, got)
			}
		})
	}
}

// TestPathFilterForget: ids the path index forgot are dropped from the filter one
// compaction later (a request may still hold one just forgotten), unless a node holds them.
func TestPathFilterForget(t *testing.T) {
	f := newPathFilter(nil, []string{"tmp"})
	f.learn(2, 1, "tmp")
	f.learn(3, 1, "keep")
	for id := uint32(10); id < 1010; id++ {
		f.learn(id, 2, fmt.Sprint("f", id))
		f.ok(id)
	}
	f.learn(5, 3, "held")
	count := func(m *shardedMap[uint32, string]) (n int) {
		for i := range m.shards {
			n += len(m.shards[i].m)
		}
		return n
	}
	live := func(id uint32) bool { return id == 5 }
	first := []uint32{5}
	for id := uint32(10); id < 1010; id++ {
		first = append(first, id)
	}
	f.forget(first, live)
	if n := count(f.names); n != 1004 {
		t.Fatalf("forgotten ids dropped at once: %d names left, want all 1004", n)
	}
	if f.ok(500) || !f.ok(5) {
		t.Errorf("decisions changed before the drop: ok(500) %v ok(5) %v", f.ok(500), f.ok(5))
	}
	f.forget(nil, live)
	if n := count(f.names); n != 4 { // the root, tmp, keep, held
		t.Errorf("%d names left after the drop, want 4", n)
	}
	if name, _ := f.names.get(5); name != "keep/held" || !f.ok(5) {
		t.Errorf("the held id lost its name %q or decision", name)
	}
	f.learn(2000, 2, "new") // a child of a kept directory still gets its full name
	if f.ok(2000) {
		t.Errorf("tmp/new is recorded despite the exclude")
	}
}

func splitPath(p string) []string {
	var r []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			r = append(r, p[start:i])
			start = i + 1
		}
	}
	return r
}

// TestCostCountersScale: the sampled sums are extended to all requests; the /proc time is
// measured on every request and added whole.
func TestCostCountersScale(t *testing.T) {
	var s costCounters
	for i := range 1000 {
		s.count(uint32(i))
		if i%10 == 0 { // 100 sampled requests, 3 µs in the layer, 1 µs of it own work
			s.timed(uint32(i), 3000, 1000)
		}
	}
	s.resolve.Add(5e6)
	s.threads.Add(2)
	ls := s.snapshot()
	want := CostCounters{Ops: 1000, Sampled: 100, InLayer: 3*time.Millisecond + 5*time.Millisecond,
		Self: time.Millisecond + 5*time.Millisecond, Threads: 2, Resolve: 5 * time.Millisecond}
	if ls != want {
		t.Errorf("snapshot %+v\nwant     %+v", ls, want)
	}
	if d := scale(1<<62, 1<<10, 1<<10); d != 1<<62 {
		t.Errorf("scale of a large sum: %d", d)
	}
	if d := scale(1<<62, 1<<40, 1); d != 1<<63-1 {
		t.Errorf("scale beyond the range: %d, want the maximum", d)
	}
	if d := scale(5, 10, 0); d != 0 {
		t.Errorf("nothing sampled: %d", d)
	}
	var few costCounters // a few requests, none timed, one thread looked up
	few.count(1)
	few.resolve.Add(80e3)
	few.threads.Add(1)
	if ls := few.snapshot(); ls.InLayer != 0 || ls.Self != 0 || ls.Resolve != 80*time.Microsecond {
		t.Errorf("no request timed: %+v; want no time in the layer, the lookup kept apart", ls)
	}
}

// TestSampled: about one request id in 8 is timed, whatever the kernel's id step; a shift
// of 0 times every request.
func TestSampled(t *testing.T) {
	for _, step := range []uint64{1, 2} {
		n := 0
		for u := range uint64(80000) {
			if sampled(u*step, costSampleShift) {
				n++
			}
		}
		if n < 9000 || n > 11000 {
			t.Errorf("step %d: %d of 80000 sampled, want about 10000", step, n)
		}
	}
	for u := range uint64(100) {
		if !sampled(u, 0) {
			t.Fatalf("shift 0: request %d not sampled", u)
		}
	}
}

type procRecorder struct {
	nopRecorder
	procs []trace.Process
}

func (r *procRecorder) AddProcess(p trace.Process) { r.procs = append(r.procs, p) }

func TestProcResolve(t *testing.T) {
	rec := &procRecorder{}
	tr := newTracer(fuse.NewDefaultRawFileSystem(), rec, Options{Comms: []string{"nomatch"}})
	tid := uint32(syscall.Gettid())
	c := span{s1: now()}
	p := tr.proc(tid, &c)
	if p.pid != uint32(os.Getpid()) || p.record {
		t.Errorf("proc %+v, want pid %d and filtered out by comm", p, os.Getpid())
	}
	if c.slow <= 0 {
		t.Errorf("the /proc lookup took %d ns of the request", c.slow)
	}
	c2 := span{s1: now()}
	tr.proc(tid, &c2)
	if c2.slow != 0 {
		t.Errorf("a cached thread took %d ns of /proc lookups", c2.slow)
	}
	if len(rec.procs) != 1 || rec.procs[0].Comm == "" || rec.procs[0].Exe == "" || rec.procs[0].PPid != uint32(os.Getppid()) ||
		!slices.Equal(rec.procs[0].Cmdline, os.Args) {
		t.Errorf("process records %+v, want this process's, command line %q", rec.procs, os.Args)
	}
}

func TestNodeTable(t *testing.T) {
	names := map[[2]any]uint32{}
	intern := func(parent uint32, name string) uint32 {
		k := [2]any{parent, name}
		if id, ok := names[k]; ok {
			return id
		}
		names[k] = uint32(100 + len(names))
		return names[k]
	}
	nt := newNodeTable(intern)
	d := intern(1, "d")
	nt.ref(5, d, 1, "d", true)
	f := intern(d, "f")
	nt.ref(6, f, 5, "f", false)
	nt.ref(6, f, 5, "f", false)
	if nt.path(6) != f || nt.path(6+nodeCacheSize) != 0 {
		t.Errorf("before rename: %d, and %d for a node sharing its cache slot", nt.path(6), nt.path(6+nodeCacheSize))
	}
	if p, ok := nt.refKnown(6, 5, "f"); !ok || p != f {
		t.Errorf("refKnown(d/f) = %d, %v", p, ok)
	}
	if _, ok := nt.refKnown(6, 5, "other"); ok {
		t.Errorf("refKnown under another name (a hard link) must miss")
	}
	nt.forget(6, 1)
	z := intern(1, "z")
	nt.rename(d, z, 1, "d", 1, "z", false, 0)
	if nt.path(5) != z {
		t.Errorf("renamed dir: %d, want %d", nt.path(5), z)
	}
	if got, want := nt.path(6), intern(z, "f"); got != want {
		t.Errorf("child of renamed dir: %d, want %d (z/f)", got, want)
	}
	g := intern(z, "g")
	nt.rename(intern(z, "f"), g, 5, "f", 5, "g", false, 0)
	if nt.path(6) != g {
		t.Errorf("renamed file: %d", nt.path(6))
	}
	nt.forget(6, 1)
	if nt.path(6) != g {
		t.Errorf("forgotten too early")
	}
	nt.forget(6, 1)
	if nt.path(6) != 0 {
		t.Errorf("not forgotten")
	}
	if nt.path(1) != trace.RootPath {
		t.Errorf("root")
	}
	if _, ok := nt.refKnown(6, 5, "g"); ok {
		t.Errorf("refKnown of a forgotten node")
	}
}

// TestNodeCacheConcurrent: path lookups racing with renames, re-references and forgets of
// nodes that share cache slots never return a path the node did not have (run with -race).
func TestNodeCacheConcurrent(t *testing.T) {
	var mu sync.Mutex
	names := map[string]uint32{}
	intern := func(parent uint32, name string) uint32 {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprint(parent, "/", name)
		if id, ok := names[k]; ok {
			return id
		}
		names[k] = uint32(100 + len(names))
		return names[k]
	}
	nt := newNodeTable(intern)
	const nodes = 8
	node := func(i int) uint64 { return uint64(2 + i*nodeCacheSize) } // all in one slot
	// Node i is only ever named "a<i>" or "b<i>" in the root.
	valid := func(i int, p uint32) bool {
		return p == intern(1, fmt.Sprint("a", i)) || p == intern(1, fmt.Sprint("b", i)) || p == 0
	}
	for i := range nodes {
		nt.ref(node(i), intern(1, fmt.Sprint("a", i)), 1, fmt.Sprint("a", i), false)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range nodes {
		wg.Add(2)
		go func() { // renames a<i> <-> b<i> and re-references it
			defer wg.Done()
			names := [2]string{fmt.Sprint("a", i), fmt.Sprint("b", i)}
			for k := 0; k < 2000; k++ {
				from, to := names[k%2], names[(k+1)%2]
				nt.rename(intern(1, from), intern(1, to), 1, from, 1, to, false, 0)
				nt.ref(node(i), intern(1, to), 1, to, false)
				nt.forget(node(i), 1)
			}
		}()
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if p := nt.path(node(i)); !valid(i, p) {
					t.Errorf("node %d: path %d is not one of its names", i, p)
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
}

// TestNodeRefsConcurrent: repeated lookups counted without a lock (refFast) and forgets
// of the same nodes, racing, with nodes sharing one cache slot (their fills evict each
// other): no reference is lost or invented. The test holds one reference to each node,
// so every lookup must find it and the node must outlive the goroutines, then go with
// the test's own forget.
func TestNodeRefsConcurrent(t *testing.T) {
	nt := newNodeTable(func(parent uint32, name string) uint32 { return uint32(100 + len(name)) })
	const nodes = 4
	node := func(i int) uint64 { return uint64(2 + i*nodeCacheSize) } // all in one slot
	name := func(i int) string { return strings.Repeat("n", i+1) }
	for i := range nodes {
		nt.ref(node(i), uint32(101+i), 1, name(i), false)
	}
	var wg sync.WaitGroup
	for i := range nodes {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 3000 {
					burst := 1 + k%5
					for range burst {
						if p, ok := nt.refKnown(node(i), 1, name(i)); !ok || p != uint32(101+i) {
							t.Errorf("node %d: lookup %d, %v while referenced", i, p, ok)
							return
						}
					}
					nt.forget(node(i), uint64(burst))
				}
			}()
		}
	}
	wg.Wait()
	for i := range nodes {
		if _, ok := nt.byNode.get(node(i)); !ok {
			t.Fatalf("node %d gone while the test holds a reference: a lock-free reference was lost", i)
		}
		nt.forget(node(i), 1)
		if r, ok := nt.byNode.get(node(i)); ok {
			t.Errorf("node %d still known after its last forget (%d references left): one was counted twice", i, r.refs)
		}
		if _, ok := nt.refKnown(node(i), 1, name(i)); ok {
			t.Errorf("node %d: lookup of a forgotten node hit", i)
		}
	}
	// The fast path was taken (a slot holds one of the nodes with a zero count).
	if s := &nt.cache[2]; s.refs.Load()&refMask != 0 {
		t.Errorf("slot count %d left after all forgets", s.refs.Load()&refMask)
	}
}

// TestNodeRefsDying: lookups race with the forget that drops a node's last references, as
// when the kernel evicts an inode while another lookup of its name is answered. The lookup
// is done as the tracer does it (refKnown, else ref); after it returns, the node must be in
// the table, and once everything is forgotten it must be gone.
func TestNodeRefsDying(t *testing.T) {
	nt := newNodeTable(func(parent uint32, name string) uint32 { return 7 })
	const n = 5
	var outstanding atomic.Uint64 // references the "kernel" holds and may forget
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the forgets
		defer wg.Done()
		for {
			if k := outstanding.Swap(0); k > 0 {
				nt.forget(n, k)
				continue
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for range 200000 {
		if _, ok := nt.refKnown(n, 1, "f"); !ok {
			nt.ref(n, 7, 1, "f", false)
		}
		if _, ok := nt.byNode.get(n); !ok {
			t.Fatal("a node just looked up is not in the table: its reference was lost")
		}
		outstanding.Add(1)
	}
	close(done)
	wg.Wait()
	if k := outstanding.Swap(0); k > 0 {
		nt.forget(n, k)
	}
	if r, ok := nt.byNode.get(n); ok {
		t.Errorf("node still known with %d references after all were forgotten", r.refs)
	}
}

// slowFS is a file system whose GetAttr takes 1 ms.
type slowFS struct{ fuse.RawFileSystem }

func (slowFS) GetAttr(<-chan struct{}, *fuse.GetAttrIn, *fuse.AttrOut) fuse.Status {
	time.Sleep(time.Millisecond)
	return fuse.OK
}

// TestLayerCost: the layer counts every request, the time it spent in the layer, and its
// own part of that, which excludes the time of the bridge underneath.
func TestLayerCost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shift uint8
		n     int
	}{{"every request", 0, 20}, {"sampled", costSampleShift, 240}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracer(slowFS{fuse.NewDefaultRawFileSystem()}, &nopRecorder{}, Options{CostByOp: true})
			if tr.costShift != 0 {
				t.Errorf("CostByOp times one request in %d, want every request", 1<<tr.costShift)
			}
			tr.costShift = tc.shift
			in := fuse.GetAttrIn{InHeader: fuse.InHeader{NodeId: 1, Caller: fuse.Caller{Pid: uint32(syscall.Gettid())}}}
			var out fuse.AttrOut
			n := tc.n
			for i := range n {
				in.Unique = uint64(2 * i) // the kernel's ids step by 2
				tr.GetAttr(nil, &in, &out)
			}
			tr.Forget(1, 1)
			ls := tr.counters.snapshot()
			c := ls.LayerCost()
			if c.Requests != uint64(n+1) {
				t.Errorf("requests %d, want %d", c.Requests, n+1)
			}
			if lo, hi := uint64(n+1)>>tc.shift/2, uint64(n+1)>>tc.shift*2; ls.Sampled < max(lo, 1) || ls.Sampled > hi {
				t.Errorf("%d of %d requests timed, want about 1 in %d", ls.Sampled, n+1, 1<<tc.shift)
			}
			ms := time.Duration(n) * time.Millisecond
			if c.InLayer < ms {
				t.Errorf("in layer %v for %d requests of 1 ms", c.InLayer, n)
			}
			if c.Self <= 0 || c.Self > c.InLayer-ms {
				t.Errorf("own work %v of %v in the layer: must be positive and exclude the bridge's %v", c.Self, c.InLayer, ms)
			}
			// Per operation (Options.CostByOp): every request counted, the same sampled own
			// work (without the /proc lookup, which is counted apart).
			g, f := &tr.byOp[trace.OpGetattr], &tr.byOp[trace.OpForget]
			if g.n.Load() != uint64(n) || f.n.Load() != 1 || g.sampled.Load()+f.sampled.Load() != ls.Sampled {
				t.Errorf("by op: getattr %d (%d timed), forget %d (%d timed); %d timed in all",
					g.n.Load(), g.sampled.Load(), f.n.Load(), f.sampled.Load(), ls.Sampled)
			}
			if tc.shift == 0 && time.Duration(g.self.Load()+f.self.Load()) != c.Self-c.Resolve {
				t.Errorf("by op: %d + %d ns of own work; total %v less /proc %v", g.self.Load(), f.self.Load(), c.Self, c.Resolve)
			}
			if c.Threads != 1 || c.Resolve <= 0 || c.Resolve > c.Self {
				t.Errorf("one caller thread: looked up %d, in %v of the own %v", c.Threads, c.Resolve, c.Self)
			}
			t.Logf("%+v: %v per request", ls, c.Self/time.Duration(c.Requests))
		})
	}
}

// live (for tests) reports whether id names a node.
func (p *pathNodes) live(id uint32) bool {
	p.mu.RLock()
	pg := p.page(id)
	ok := pg != nil && pg.nodes[id%nodePageSize].Load() != 0
	p.mu.RUnlock()
	return ok
}

// pagesInUse (for tests) returns the number of pages allocated.
func (p *pathNodes) pagesInUse() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, pg := range p.pages {
		if pg != nil {
			n++
		}
	}
	return n
}

// TestPathNodes: ids on several pages, delete only if still the same node, absent ids,
// live, and pages freed when their last entry goes (memory follows the nodes held).
func TestPathNodes(t *testing.T) {
	var p pathNodes
	if n, ok := p.del(5); ok || n != 0 {
		t.Errorf("del of an absent id: %d, %v", n, ok)
	}
	p.delIf(3*nodePageSize+7, 9) // no page: nothing to do
	p.set(7, 100)
	p.set(8, 100) // a hard link's second name
	p.set(3*nodePageSize+7, 101)
	if p.page(nodePageSize+7) != nil {
		t.Errorf("a page between used ones was allocated")
	}
	if !p.live(7) || !p.live(3*nodePageSize+7) || p.live(9) || p.live(1<<31) {
		t.Errorf("live: 7 %v, 3*page+7 %v, 9 %v, 1<<31 %v; want true true false false",
			p.live(7), p.live(3*nodePageSize+7), p.live(9), p.live(1<<31))
	}
	snap := p.liveSet()
	for _, id := range []uint32{0, 7, 8, 9, nodePageSize + 7, 3*nodePageSize + 7, 3*nodePageSize + 8, 1 << 31} {
		if snap(id) != p.live(id) {
			t.Errorf("liveSet(%d) = %v, live = %v", id, snap(id), p.live(id))
		}
	}
	p.delIf(7, 555) // another node holds the id now: kept
	if n, ok := p.del(7); !ok || n != 100 {
		t.Errorf("del(7) = %d, %v; want 100", n, ok)
	}
	if p.pagesInUse() != 2 {
		t.Errorf("%d pages in use, want 2 (id 8 still holds the first)", p.pagesInUse())
	}
	p.delIf(3*nodePageSize+7, 101)
	if n, ok := p.del(3*nodePageSize + 7); ok {
		t.Errorf("deleted id still maps to %d", n)
	}
	p.del(8)
	if p.pagesInUse() != 0 || p.live(8) {
		t.Errorf("all entries deleted: %d pages in use, live(8) %v", p.pagesInUse(), p.live(8))
	}
	p.set(8, 102) // a freed page comes back
	if n, ok := p.del(8); !ok || n != 102 {
		t.Errorf("del(8) after the page's return = %d, %v; want 102", n, ok)
	}

	// A job naming new paths without end, a few held at a time: pages stay few.
	for id := uint32(1); id < 100*nodePageSize; id++ {
		p.set(id, uint64(id))
		if id > 16 {
			p.delIf(id-16, uint64(id-16))
		}
	}
	if n := p.pagesInUse(); n > 2 {
		t.Errorf("16 ids held, %d pages in use", n)
	}
}

// TestPathNodesConcurrent: sets and deletes on shared pages while pages are freed and
// allocated again (run with -race): no update is lost with a freed page.
func TestPathNodesConcurrent(t *testing.T) {
	var p pathNodes
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 200 {
				base := uint32(r%3) * nodePageSize // the workers share three pages
				for i := range uint32(64) {
					id := base + uint32(w)*64 + i + 1
					p.set(id, uint64(id))
					if !p.live(id) {
						t.Errorf("id %d set and not live", id)
						return
					}
					if n, ok := p.del(id); !ok || n != uint64(id) {
						t.Errorf("id %d: del %d, %v", id, n, ok)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := p.pagesInUse(); n != 0 {
		t.Errorf("everything deleted, %d pages in use", n)
	}
}

// TestHandleTable: an opener comes back whole from the paged part and from the map for
// handles beyond it; a released handle is gone; a reused one has its new opener.
func TestHandleTable(t *testing.T) {
	h := newHandleTable()
	for _, fh := range []uint64{0, 3, pagedSize + 1, maxSmallHandle + 5} {
		o := opener{tid: 1<<31 + uint32(fh), pid: 4194303, uid: 1000, gid: 1<<32 - 1}
		if _, ok := h.get(fh); ok {
			t.Errorf("fh %d: found before set", fh)
		}
		h.set(fh, o)
		if got, ok := h.get(fh); !ok || got != o {
			t.Errorf("fh %d: get %+v, %v; want %+v", fh, got, ok, o)
		}
		if got, ok := h.del(fh); !ok || got != o {
			t.Errorf("fh %d: del %+v, %v", fh, got, ok)
		}
		if _, ok := h.get(fh); ok {
			t.Errorf("fh %d: found after release", fh)
		}
		o2 := opener{tid: 7, pid: 8, uid: 9, gid: 10}
		h.set(fh, o2)
		if got, _ := h.get(fh); got != o2 {
			t.Errorf("fh %d reused: %+v, want %+v", fh, got, o2)
		}
	}
}

// TestBitset: each id is new exactly once, across words and pages.
func TestBitset(t *testing.T) {
	var b bitset
	ids := []uint32{0, 63, 64, pagedSize*64 - 1, pagedSize * 64, 10_000_000}
	for _, id := range ids {
		if !b.testAndSet(id) {
			t.Errorf("id %d: not new the first time", id)
		}
	}
	for _, id := range ids {
		if b.testAndSet(id) {
			t.Errorf("id %d: new twice", id)
		}
	}
	if b.testAndSet(65) != true {
		t.Errorf("a neighbour of set ids was already set")
	}
}

// TestCostBuckets: every value falls in the bucket whose range holds it, and the median
// of a set is within the bucket width of the true one, whatever its tail.
func TestCostBuckets(t *testing.T) {
	for _, v := range []uint64{0, 1, 3, 4, 5, 7, 8, 100, 1000, 1023, 1024, 123456, 1 << 40} {
		b := costBucket(v)
		mid := costBucketMid(b)
		if d := float64(mid) - float64(v); v >= 4 && (d > 0.13*float64(v) || d < -0.13*float64(v)) {
			t.Errorf("value %d: bucket %d, middle %d", v, b, mid)
		}
		if v < 4 && mid != v {
			t.Errorf("value %d: middle %d", v, mid)
		}
	}
	var c opCost
	for range 99 {
		c.add(500)
	}
	for range 40 {
		c.add(5_000_000) // preempted requests
	}
	if m := c.median(); m < 440 || m > 560 {
		t.Errorf("median %d, want about 500", m)
	}
}

// TestNodePathAt: with the paths of the past kept (kernel passthrough), a node is named as
// it was at a given time: before each rename its earlier name, after the last its current
// one, and once forgotten the name it had then. Entries taken over by newer ones are no
// longer answered.
func TestNodePathAt(t *testing.T) {
	ids := map[string]uint32{}
	intern := func(parent uint32, name string) uint32 {
		if id, ok := ids[name]; ok {
			return id
		}
		ids[name] = uint32(100 + len(ids))
		return ids[name]
	}
	nt := newNodeTable(intern)
	nt.past = newPastPaths()
	a, b, c := intern(1, "a"), intern(1, "b"), intern(1, "c")
	nt.ref(7, a, 1, "a", false)
	nt.rename(a, b, 1, "a", 1, "b", false, 100)
	nt.rename(b, c, 1, "b", 1, "c", false, 200)
	for _, tc := range []struct {
		at   int64
		want uint32
	}{{50, a}, {99, a}, {100, b}, {150, b}, {200, c}, {300, c}} {
		if got := nt.pathAt(7, tc.at); got != tc.want {
			t.Errorf("at %d: path %d, want %d (a %d, b %d, c %d)", tc.at, got, tc.want, a, b, c)
		}
	}
	nt.forget(7, 1)
	if got := nt.pathAt(7, 250); got != c {
		t.Errorf("forgotten node at 250: path %d, want c (%d)", got, c)
	}
	if got := nt.pathAt(7, 150); got != b {
		t.Errorf("forgotten node at 150: path %d, want b (%d)", got, b)
	}
	// Exchange: both nodes keep what they were.
	nt.ref(8, a, 1, "a", false)
	nt.ref(9, b, 1, "b", false)
	nt.rename(a, b, 1, "a", 1, "b", true, 400)
	if nt.pathAt(8, 399) != a || nt.pathAt(9, 399) != b || nt.pathAt(8, 401) != b || nt.pathAt(9, 401) != a {
		t.Errorf("exchange: 8 was %d now %d, 9 was %d now %d", nt.pathAt(8, 399), nt.pathAt(8, 401), nt.pathAt(9, 399), nt.pathAt(9, 401))
	}
	// A full ring of other nodes' entries takes node 8's over: its current path answers.
	for i := range pastSlots {
		nt.past.put(uint64(1000+i), c, 500)
	}
	if got := nt.pathAt(8, 399); got != b {
		t.Errorf("after the ring turned: node 8 at 399 is %d, want its current path %d", got, b)
	}
}
