package replay

import (
	"fmt"
	"io"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
)

// genSource generates an endless-looking trace on the fly (no storage): threads that open,
// read and close files of a fixed set, and stat them. It stands for a trace far larger
// than memory.
type genSource struct {
	n, limit int
	ev       trace.Event
	clock    int64
	hdr      trace.Header
}

func (g *genSource) Header() *trace.Header      { return &g.hdr }
func (g *genSource) Files() []trace.File        { return nil }
func (g *genSource) Processes() []trace.Process { return nil }
func (g *genSource) PathName(id uint32) string  { return fmt.Sprintf("d%d/f%d", id%7, id) }
func (g *genSource) Next() (*trace.Event, error) {
	if g.n >= g.limit {
		return nil, io.EOF
	}
	i := g.n
	g.n++
	g.clock += 1000
	tid := uint32(1 + i%8)
	step := (i / 8) % 4
	fh := uint64(tid)<<32 | uint64(i/32)
	path := uint32(2 + (i/32)%1000)
	g.ev = trace.Event{Start: g.clock, Dur: 500, Tid: tid, Pid: 1, Path: path, Handle: fh}
	switch step {
	case 0:
		g.ev.Op, g.ev.Flags = trace.OpOpen, unix.O_RDONLY
	case 1:
		g.ev.Op, g.ev.Size, g.ev.Ret = trace.OpRead, 4096, 4096
	case 2:
		g.ev.Op = trace.OpRelease
	case 3:
		g.ev.Op, g.ev.Handle, g.ev.Mode = trace.OpGetattr, 0, unix.S_IFREG|0o644
	}
	return &g.ev, nil
}

// TestPlannerBoundedMemory plans two million generated events and checks the heap does
// not grow with the number of events.
func TestPlannerBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	src := &genSource{limit: 2_000_000}
	p := newPlanner(src, PlanOptions{})
	var ms runtime.MemStats
	var peak, at500k uint64
	for n := 0; ; n++ {
		_, err := p.next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if n%250_000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			if n == 500_000 {
				at500k = ms.HeapAlloc
			}
		}
	}
	t.Logf("heap at 500k events %d KiB, peak %d KiB", at500k>>10, peak>>10)
	if peak > at500k*2 || peak > 256<<20 {
		t.Fatalf("heap grows with the trace: %d KiB at 500k events, peak %d KiB", at500k>>10, peak>>10)
	}
}
