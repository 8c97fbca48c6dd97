package trace

import (
	"math/rand/v2"
	"strconv"
	"syscall"
)

// mixWorkload produces a realistic event mix through a Writer-like interner: sequential
// 1 MiB reads of large files, small-file create/write/stat/read, and readdir. Times come
// from a seeded random source so runs are reproducible.
type mixWorkload struct {
	rng    *rand.Rand
	now    int64
	node   uint64
	handle uint64
	path   func(parent uint32, name string) uint32
	emit   func(*Event)
}

func newMix(seed uint64, path func(uint32, string) uint32, emit func(*Event)) *mixWorkload {
	return &mixWorkload{rng: rand.New(rand.NewPCG(seed, 1)), now: 1_000_000, node: 1, handle: 0, path: path, emit: emit}
}

func (m *mixWorkload) ev(op Op, dur int64, e Event) {
	m.now += 2_000 + m.rng.Int64N(20_000)
	e.Op = op
	e.Start = m.now
	e.Dur = dur
	if e.Tid == 0 {
		e.Tid, e.Pid = 4242, 4240
	}
	e.Uid, e.Gid = 1000, 1000
	m.now += dur
	m.emit(&e)
}

// largeFile emits lookup/open/N×1 MiB read/flush/release on one large file.
func (m *mixWorkload) largeFile(dir uint32, name string, mib int, tid uint32) {
	p := m.path(dir, name)
	m.node++
	node := m.node
	m.ev(OpLookup, 20_000+m.rng.Int64N(10_000), Event{Path: p, Node: 1, Node2: node, Ret: int64(mib) << 20, Mode: 0o100644, Tid: tid})
	m.handle++
	h := m.handle
	m.ev(OpOpen, 15_000+m.rng.Int64N(5_000), Event{Path: p, Node: node, Handle: h, Flags: syscall.O_RDONLY, Tid: tid})
	for i := range mib {
		m.ev(OpRead, 250_000+m.rng.Int64N(200_000), Event{Path: p, Node: node, Handle: h, Offset: int64(i) << 20, Size: 1 << 20, Ret: 1 << 20, Tid: tid})
	}
	m.ev(OpFlush, 3_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Tid: tid})
	m.ev(OpRelease, 5_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Tid: tid})
}

// smallFiles emits create/write/release, then getattr, then open/read/release for n small
// files in dir, then a readdir of dir.
func (m *mixWorkload) smallFiles(dir uint32, n int, tid uint32) {
	for i := range n {
		name := "f" + strconv.Itoa(i) + ".dat"
		p := m.path(dir, name)
		m.node++
		node := m.node
		size := int64(1024 + m.rng.IntN(8192))
		m.handle++
		h := m.handle
		m.ev(OpLookup, 10_000+m.rng.Int64N(10_000), Event{Path: p, Node: 2, Errno: uint16(syscall.ENOENT), Tid: tid})
		m.ev(OpCreate, 40_000+m.rng.Int64N(20_000), Event{Path: p, Node: 2, Node2: node, Handle: h, Flags: syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC, Mode: 0o100644, Tid: tid})
		m.ev(OpWrite, 20_000+m.rng.Int64N(10_000), Event{Path: p, Node: node, Handle: h, Size: uint32(size), Ret: size, Tid: tid})
		m.ev(OpFlush, 3_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Tid: tid})
		m.ev(OpRelease, 5_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Tid: tid})
		m.ev(OpGetattr, 4_000+m.rng.Int64N(3_000), Event{Path: p, Node: node, Ret: size, Mode: 0o100644, Tid: tid})
		m.handle++
		h = m.handle
		m.ev(OpOpen, 12_000+m.rng.Int64N(5_000), Event{Path: p, Node: node, Handle: h, Flags: syscall.O_RDONLY, Tid: tid})
		m.ev(OpRead, 15_000+m.rng.Int64N(10_000), Event{Path: p, Node: node, Handle: h, Size: 131072, Ret: size, Tid: tid})
		m.ev(OpRead, 3_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Offset: size, Size: 131072, Ret: 0, Tid: tid})
		m.ev(OpRelease, 5_000+m.rng.Int64N(2_000), Event{Path: p, Node: node, Handle: h, Tid: tid})
	}
	m.handle++
	h := m.handle
	m.ev(OpOpendir, 8_000, Event{Path: dir, Node: 2, Handle: h, Tid: tid})
	entries := n + 2
	for off := 0; off < entries; off += 100 {
		k := min(100, entries-off)
		m.ev(OpReaddirplus, 50_000+m.rng.Int64N(50_000), Event{Path: dir, Node: 2, Handle: h, Offset: int64(off), Size: 4096, Ret: int64(k * 40), Tid: tid})
	}
	m.ev(OpReaddirplus, 2_000, Event{Path: dir, Node: 2, Handle: h, Offset: int64(entries), Size: 4096, Tid: tid})
	m.ev(OpReleasedir, 2_000, Event{Path: dir, Node: 2, Handle: h, Tid: tid})
}

// run emits about n events of the mix: per round, one 64 MiB file read sequentially, 100
// small files, and a directory listing.
func (m *mixWorkload) run(n int) {
	round := 0
	count := 0
	emit := m.emit
	m.emit = func(e *Event) { count++; emit(e) }
	for count < n {
		dir := m.path(RootPath, "dir"+strconv.Itoa(round))
		m.largeFile(dir, "big.bin", 64, 4242)
		m.smallFiles(dir, 100, 4243)
		round++
	}
	m.emit = emit
}
