package stats

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/fold"
)

// pathNames names path ids 2.. as f2, f3, ...
type pathNames struct{}

func (pathNames) PathName(id uint32) string {
	if id == trace.RootPath {
		return ""
	}
	return fmt.Sprintf("f%d", id)
}

// TestCallView: a recording's lookups fold into the opens after them and releases are
// closes, with the requests each call stands for; the per-operation figures do not change.
func TestCallView(t *testing.T) {
	evs := genEvents(20_000, 3)
	s := accumulate("t", evs, Options{Names: pathNames{}})
	plain := accumulate("t", evs, Options{})
	var opens, reads, releases, readErrs, alone uint64
	var openNs int64 // an open's time is its lookup's and its own
	for i, e := range evs {
		switch e.Op {
		case trace.OpLookup:
			if i+1 < len(evs) && evs[i+1].Op == trace.OpOpen {
				openNs += e.Dur
			} else {
				alone++ // the workload was cut after it
			}
		case trace.OpOpen:
			opens++
			openNs += e.Dur
		case trace.OpRead:
			reads++
			if e.Errno != 0 {
				readErrs++
			}
		case trace.OpRelease:
			releases++
		}
	}
	c := &s.Calls
	if c[fold.SysOpen].Count != opens || c[fold.SysRead].Count != reads || c[fold.SysClose].Count != releases ||
		c[fold.SysRead].Errors != readErrs || c[fold.SysStat].Count != alone {
		t.Errorf("open %d read %d close %d stat %d, want %d %d %d %d", c[fold.SysOpen].Count, c[fold.SysRead].Count,
			c[fold.SysClose].Count, c[fold.SysStat].Count, opens, reads, releases, alone)
	}
	var reqs uint64
	for i := range c {
		reqs += c[i].Requests
	}
	if reqs != uint64(len(evs)) || c[fold.SysOpen].Requests != 2*opens || c[fold.SysOpen].MaxRequests != 2 {
		t.Errorf("calls stand for %d requests of %d; opens %d (max %d per call)", reqs, len(evs), c[fold.SysOpen].Requests, c[fold.SysOpen].MaxRequests)
	}
	if c[fold.SysOpen].TotalNs != openNs {
		t.Errorf("open time %d, want %d", c[fold.SysOpen].TotalNs, openNs)
	}
	if s.Sources[0].Calls != CallsFolded || s.Sources[0].Fold.Events != uint64(len(evs)) || plain.HasCalls() {
		t.Errorf("sources: %q, %+v; without names: %v", s.Sources[0].Calls, s.Sources[0].Fold, plain.HasCalls())
	}
	for i := range s.Ops {
		if s.Ops[i].Count != plain.Ops[i].Count || s.Ops[i].TotalNs != plain.Ops[i].TotalNs {
			t.Fatalf("op %v changed with the call view", trace.Op(i))
		}
	}
	// Merging adds the calls up.
	m := New()
	m.Merge(s)
	m.Merge(s)
	if m.Calls[fold.SysRead].Count != 2*reads || m.Calls[fold.SysRead].Hist.TotalCount() != int64(2*reads) {
		t.Errorf("merged reads %d", m.Calls[fold.SysRead].Count)
	}
}

// TestCallViewOfReplay: a replay's events are its calls, one each, with no requests.
func TestCallViewOfReplay(t *testing.T) {
	h := &trace.Header{Kind: "replay"}
	a := NewAccumulator("r", h, Options{})
	for _, e := range []trace.Event{
		{Op: trace.OpLookup, Path: 2, Errno: 2, Dur: 10},
		{Op: trace.OpOpen, Path: 3, Handle: 1, Dur: 20},
		{Op: trace.OpFlush, Path: 3, Handle: 1, Dur: 30},
		{Op: trace.OpSetattr, Path: 3, Flags: trace.SetattrSize, Dur: 40},
		{Op: trace.OpFsync, Path: 3, Flags: trace.FsyncDatasync, Dur: 50},
	} {
		a.Add(&e)
	}
	s := a.Finish(nil, nil, nil)
	want := map[fold.Syscall]int64{fold.SysStat: 10, fold.SysOpen: 20, fold.SysClose: 30, fold.SysTruncate: 40, fold.SysFdatasync: 50}
	for k, ns := range want {
		if c := &s.Calls[k]; c.Count != 1 || c.TotalNs != ns || c.Requests != 0 {
			t.Errorf("%s: %d calls, %d ns, %d requests", k, c.Count, c.TotalNs, c.Requests)
		}
	}
	if s.Calls[fold.SysStat].Errors != 1 || s.Sources[0].Calls != CallsReplay {
		t.Errorf("stat errors %d, source %q", s.Calls[fold.SysStat].Errors, s.Sources[0].Calls)
	}
}

// TestCallViewBoundedMemory adds two million events with the per-system-call view and
// checks the heap does not grow with the number of events.
func TestCallViewBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	evs := genEvents(1<<16, 9)
	a := NewAccumulator("m", &trace.Header{}, Options{Names: pathNames{}})
	var ms runtime.MemStats
	var peak, at500k uint64
	var clock int64
	for n := 0; n < 2_000_000; n++ {
		e := evs[n%len(evs)]
		if n%len(evs) == 0 && n > 0 {
			clock = evs[len(evs)-1].Start * int64(n/len(evs))
		}
		e.Start += clock
		e.Handle += uint64(n/len(evs)) << 32 // new handles on each pass
		a.Add(&e)
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
	if peak > at500k*3/2 || peak > 128<<20 {
		t.Fatalf("heap grows with the trace: %d KiB at 500k events, peak %d KiB", at500k>>10, peak>>10)
	}
	if s := a.Finish(nil, nil, nil); s.Calls[fold.SysRead].Count == 0 {
		t.Fatal("no calls")
	}
}

// TestAddWithCallsDoesNotAllocate: with the per-system-call view, an event costs no
// allocation once the paths, handles and histograms are known (handle and thread states
// are reused).
func TestAddWithCallsDoesNotAllocate(t *testing.T) {
	evs := genEvents(100_000, 11)
	a := NewAccumulator("x", &trace.Header{}, Options{Names: pathNames{}})
	for i := range evs {
		a.Add(&evs[i]) // warm up
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const n = 500_000
	for i := range n {
		a.Add(&evs[i%len(evs)])
	}
	runtime.ReadMemStats(&m1)
	if per := float64(m1.Mallocs-m0.Mallocs) / n; per > 0.001 {
		t.Errorf("Add with the call view allocates %.4f times per event", per)
	}
}

// BenchmarkStatsAddCalls is BenchmarkStatsAdd with the per-system-call view: the cost of
// folding is the difference.
func BenchmarkStatsAddCalls(b *testing.B) {
	evs := genEvents(1<<16, 5)
	a := NewAccumulator("bench", &trace.Header{}, Options{Names: pathNames{}})
	for i := range evs {
		a.Add(&evs[i])
	}
	benchAdd(b, a, evs)
}

// TestCallViewPerPath: the calls' time per kind and path, and the first-read split per
// path, match a plain map of the calls, for path ids in the dense table and above it
// (a corrupt trace's).
func TestCallViewPerPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ids := []uint32{0, 1, 2, 70, 300, maxDensePath - 1, maxDensePath, maxDensePath + 5, 1<<32 - 1}
	// More kinds than a path holds itself (pathKinds).
	ops := []trace.Op{trace.OpRead, trace.OpWrite, trace.OpOpen, trace.OpGetattr, trace.OpFlush, trace.OpUnlink, trace.OpMkdir,
		trace.OpReadlink, trace.OpFsync}
	v := newCallView(nil, &trace.Header{Kind: "replay"})
	want := map[CallPath]int64{}
	read := map[uint32]map[int64]bool{} // per path, the 100-byte blocks read
	var first, re uint64
	for i := range 20_000 {
		ev := trace.Event{Op: ops[rng.IntN(len(ops))], Path: ids[rng.IntN(len(ids))], Start: int64(i) * 10, Dur: 1 + rng.Int64N(1000)}
		if ev.Op == trace.OpRead {
			ev.Offset, ev.Ret = 100*rng.Int64N(50), 100
			if rng.IntN(20) == 0 {
				ev.Errno = 5
			}
		}
		v.add(&ev)
		s, _ := fold.SyscallOf(ev.Op, ev.Flags)
		want[CallPath{Call: s, Path: pathName(nil, ev.Path)}] += ev.Dur
		if ev.Op == trace.OpRead && ev.Errno == 0 {
			if read[ev.Path] == nil {
				read[ev.Path] = map[int64]bool{}
			}
			if read[ev.Path][ev.Offset] {
				re++
			} else {
				first++
			}
			read[ev.Path][ev.Offset] = true
		}
	}
	if got := v.callPaths(nil); !maps.Equal(got, want) {
		t.Errorf("time per call and path: %d entries, want %d\n got %v\nwant %v", len(got), len(want), got, want)
	}
	if v.first.Count != first || v.re.Count != re {
		t.Errorf("first reads %d, re-reads %d; want %d, %d", v.first.Count, v.re.Count, first, re)
	}
}

// pathCalls takes one cache line (no more than 64 bytes).
var _ [64 - unsafe.Sizeof(pathCalls{})]byte
