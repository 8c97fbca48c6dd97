package tally

import (
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/loghist"
	"github.com/iotap/iotap/trace"
)

func TestBuckets(t *testing.T) {
	if numBuckets != loghist.Buckets(subBits) {
		t.Fatalf("numBuckets %d, want loghist.Buckets(%d) = %d", numBuckets, subBits, loghist.Buckets(subBits))
	}
}

func TestQuantilesAndSub(t *testing.T) {
	var tl Tally
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= 1000; i++ {
				tl.Add(&trace.Event{Op: trace.OpRead, Dur: int64(i) * 1000, Ret: 4096})
			}
		}()
	}
	wg.Wait()
	s1 := tl.Snapshot()
	ops, errs, rd, wr := s1.Totals()
	if ops != 4000 || errs != 0 || rd != 4000*4096 || wr != 0 {
		t.Fatalf("totals %d %d %d %d", ops, errs, rd, wr)
	}
	p50 := s1.Ops[0].Quantile(0.5)
	if p50 < 440*time.Microsecond || p50 > 560*time.Microsecond {
		t.Errorf("p50 = %v, want about 500µs", p50)
	}
	p99 := s1.Quantile(0.99)
	if p99 < 870*time.Microsecond || p99 > 1120*time.Microsecond {
		t.Errorf("p99 = %v, want about 990µs", p99)
	}
	tl.Add(&trace.Event{Op: trace.OpWrite, Dur: 5e6, Ret: 10})
	tl.Add(&trace.Event{Op: trace.OpLookup, Dur: 1, Errno: 2})
	d := tl.Snapshot().Sub(s1)
	ops, errs, rd, wr = d.Totals()
	if ops != 2 || errs != 1 || rd != 0 || wr != 10 {
		t.Fatalf("diff totals %d %d %d %d", ops, errs, rd, wr)
	}
	if bt := tl.Snapshot().ByTime(); bt[0].Op != trace.OpRead {
		t.Errorf("by time: first %v", bt[0].Op)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	var tl Tally
	ev := &trace.Event{Op: trace.OpWrite, Dur: 12345, Ret: 4096}
	if n := testing.AllocsPerRun(1000, func() { tl.Add(ev) }); n != 0 {
		t.Fatalf("Add allocates %v times", n)
	}
}

// TestAddBatch checks that a batch accounts exactly as its events one by one.
func TestAddBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var evs []trace.Event
	for range 5000 {
		ev := trace.Event{Op: trace.Op(rng.IntN(int(trace.NumOps) + 2)), Dur: rng.Int64N(1e7) - 10, Ret: rng.Int64N(1 << 20)}
		if rng.IntN(10) == 0 {
			ev.Errno = 2
		}
		evs = append(evs, ev)
	}
	var one, batch Tally
	for i := range evs {
		one.Add(&evs[i])
	}
	batch.AddBatch(evs[:1234])
	batch.AddBatch(evs[1234:])
	a, b := one.Snapshot(), batch.Snapshot()
	a.At, b.At = time.Time{}, time.Time{}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("batch tally differs from the events' one by one:\n%+v\n%+v", a.Ops[:2], b.Ops[:2])
	}
	if len(a.Ops) < 10 {
		t.Fatalf("only %d ops seen: the test's events are not varied", len(a.Ops))
	}
	if n := testing.AllocsPerRun(100, func() { batch.AddBatch(evs[:100]) }); n != 0 {
		t.Fatalf("AddBatch allocates %v times", n)
	}
}

func BenchmarkAddBatch(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	evs := make([]trace.Event, 4096)
	for i := range evs {
		evs[i] = trace.Event{Op: trace.Op(1 + rng.IntN(12)), Dur: rng.Int64N(1e6), Ret: 4096}
	}
	var tl Tally
	for b.Loop() {
		tl.AddBatch(evs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
}
