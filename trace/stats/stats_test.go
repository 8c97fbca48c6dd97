package stats

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/iotap/iotap/trace"
)

// genEvents returns a deterministic mixed workload: n events over about secs seconds.
func genEvents(n int, seed uint64) []trace.Event {
	rng := rand.New(rand.NewPCG(seed, 1))
	evs := make([]trace.Event, 0, n)
	var t int64
	h := uint64(0)
	for len(evs) < n {
		h++
		path := uint32(2 + rng.IntN(50))
		pid := uint32(100 + rng.IntN(4))
		t += int64(rng.IntN(50_000))
		evs = append(evs, trace.Event{Op: trace.OpLookup, Start: t, Dur: int64(2_000 + rng.IntN(20_000)), Path: path, Pid: pid, Tid: pid})
		t += 1000
		evs = append(evs, trace.Event{Op: trace.OpOpen, Start: t, Dur: int64(5_000 + rng.IntN(50_000)), Path: path, Handle: h, Pid: pid, Tid: pid})
		off := int64(0)
		reads := rng.IntN(8)
		for i := 0; i < reads && len(evs) < n; i++ {
			t += 500
			size := uint32(4096 << rng.IntN(6))
			if rng.IntN(4) == 0 {
				off = int64(rng.IntN(1<<20)) &^ 4095
			}
			d := int64(10_000 + rng.ExpFloat64()*200_000)
			errno := uint16(0)
			ret := int64(size)
			if rng.IntN(100) == 0 {
				errno, ret = 5, 0
			}
			evs = append(evs, trace.Event{Op: trace.OpRead, Start: t, Dur: d, Path: path, Handle: h, Offset: off, Size: size, Ret: ret, Errno: errno, Pid: pid, Tid: pid})
			off += ret
		}
		t += 500
		evs = append(evs, trace.Event{Op: trace.OpRelease, Start: t, Dur: 3_000, Path: path, Handle: h, Pid: pid, Tid: pid})
	}
	return evs[:n]
}

func accumulate(name string, evs []trace.Event, o Options) *Stats {
	h := &trace.Header{Hostname: "h1", WallStart: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	a := NewAccumulator(name, h, o)
	for i := range evs {
		a.Add(&evs[i])
	}
	return a.Finish(nil, nil, nil)
}

// exactPercentile is the percentile of sorted values by the rank the report documents,
// ⌈p/100 · n⌉ and at least 1, with p in thousandths of a percent (99900 = 99.9 %),
// computed with integers only.
func exactPercentile(sorted []int64, pMilli int64) int64 {
	n := int64(len(sorted))
	rank := (pMilli*n + 99_999) / 100_000 // ⌈p/100 · n⌉, SQL's percentile_disc
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func TestPercentilesMatchSortedDurations(t *testing.T) {
	evs := genEvents(200_000, 7)
	s := accumulate("t", evs, Options{})
	byOp := map[trace.Op][]int64{}
	for _, e := range evs {
		byOp[e.Op] = append(byOp[e.Op], e.Dur)
	}
	for op, durs := range byOp {
		slices.Sort(durs)
		st := &s.Ops[op]
		if st.Count != uint64(len(durs)) {
			t.Fatalf("%v: count %d, want %d", op, st.Count, len(durs))
		}
		var sum int64
		for _, d := range durs {
			sum += d
		}
		if st.TotalNs != sum || st.MaxNs != durs[len(durs)-1] {
			t.Errorf("%v: total %d max %d, want %d %d", op, st.TotalNs, st.MaxNs, sum, durs[len(durs)-1])
		}
		for _, p := range []struct {
			name  string
			milli int64
		}{{"p50", 50_000}, {"p90", 90_000}, {"p99", 99_000}, {"p99.9", 99_900}, {"max", 100_000}} {
			t.Run(op.String()+"/"+p.name, func(t *testing.T) {
				want := exactPercentile(durs, p.milli)
				got := st.Percentile(float64(p.milli) / 1000)
				// HDR with 3 significant digits from 1 ns reports the highest value
				// equivalent to the order statistic: never below it, less than 1/1024 of it
				// above (exact below 2048 ns).
				slack := want / 1024
				if got < want || got > want+slack {
					t.Errorf("%s = %d ns, exact %d ns (slack %d)", p.name, got, want, slack)
				}
			})
		}
	}
}

// TestPercentilesResolution: latencies of a few microseconds and less keep three
// significant digits (a 2,345 ns read is not reported as 2,560 ns), and the histogram's
// memory stays bounded.
func TestPercentilesResolution(t *testing.T) {
	for _, d := range []int64{1, 7, 850, 2_049, 2_345, 4_100, 9_999, 123_456, 1_234_567} {
		evs := []trace.Event{{Op: trace.OpRead, Start: 1, Dur: d}}
		s := accumulate("t", evs, Options{})
		h := s.Ops[trace.OpRead].Hist
		for _, p := range []float64{50, 99} {
			if got := h.ValueAtPercentile(p); got < d || got > d+d/1024 {
				t.Errorf("%d ns: p%v = %d ns", d, p, got)
			}
		}
	}
	// One histogram covers 1 ns to 1 h at 3 significant digits in a fixed array.
	if b := NewHist().ByteSize(); b > 320<<10 {
		t.Errorf("a histogram takes %d bytes", b)
	}
}

func TestMergeIsExact(t *testing.T) {
	evs := genEvents(50_000, 3)
	whole := accumulate("all", evs, Options{})
	a := accumulate("a", evs[:20_000], Options{})
	b := accumulate("b", evs[20_000:], Options{})
	m := New()
	m.Merge(a)
	m.Merge(b)
	for op := range trace.NumOps {
		w, g := &whole.Ops[op], &m.Ops[op]
		if w.Count != g.Count || w.TotalNs != g.TotalNs || w.Bytes != g.Bytes || w.Errors != g.Errors {
			t.Fatalf("%v: merged %+v, whole %+v", trace.Op(op), g, w)
		}
		for _, p := range []float64{50, 90, 99, 99.9, 100} {
			if w.Percentile(p) != g.Percentile(p) {
				t.Errorf("%v p%v: merged %d, whole %d", trace.Op(op), p, g.Percentile(p), w.Percentile(p))
			}
		}
	}
	if len(m.Sources) != 2 || m.Events != whole.Events {
		t.Errorf("sources %d events %d", len(m.Sources), m.Events)
	}
	// Merge must not alias: adding more to m leaves a unchanged.
	before := a.Ops[trace.OpRead].Hist.TotalCount()
	m.Merge(a)
	if a.Ops[trace.OpRead].Hist.TotalCount() != before {
		t.Error("merge modified its source")
	}
}

func TestAccessPatterns(t *testing.T) {
	ev := func(op trace.Op, h uint64, off int64, n int64) trace.Event {
		return trace.Event{Op: op, Path: 2, Handle: h, Offset: off, Size: uint32(n), Ret: n, Start: 1000, Dur: 1000}
	}
	evs := []trace.Event{
		{Op: trace.OpOpen, Path: 2, Handle: 1, Start: 0, Dur: 500},
		ev(trace.OpRead, 1, 0, 4096),    // seq (first at 0)
		ev(trace.OpRead, 1, 4096, 4096), // seq
		ev(trace.OpRead, 1, 0, 4096),    // random, re-read 4096
		ev(trace.OpRead, 1, 2048, 4096), // random, re-read 4096 (0..8192 already read)
		ev(trace.OpRead, 1, 6144, 4096), // seq, re-read 2048
		{Op: trace.OpRelease, Path: 2, Handle: 1},
		{Op: trace.OpOpen, Path: 3, Handle: 2, Start: 0, Dur: 500},
		{Op: trace.OpRelease, Path: 3, Handle: 2},
		{Op: trace.OpOpen, Path: 4, Handle: 3, Start: 0, Dur: 500},
		{Op: trace.OpWrite, Path: 4, Handle: 3, Offset: 100, Size: 10, Ret: 10},
		{Op: trace.OpRelease, Path: 4, Handle: 3},
	}
	for i := range evs {
		evs[i].Start = int64(i) * 2000 // one after the other
	}
	s := accumulate("p", evs, Options{})
	f := s.Files["?2"]
	if f == nil {
		t.Fatalf("no file ?2 in %v", s.Files)
	}
	if f.SeqReads != 3 || f.RandReads != 2 {
		t.Errorf("seq %d rand %d, want 3 2", f.SeqReads, f.RandReads)
	}
	if f.RereadBytes != 4096+4096+2048 {
		t.Errorf("reread %d, want %d", f.RereadBytes, 4096+4096+2048)
	}
	if f.MaxEnd != 10240 {
		t.Errorf("max end %d", f.MaxEnd)
	}
	if got := s.UnusedFiles(); !slices.Equal(got, []string{"?3"}) {
		t.Errorf("unused %v", got)
	}
	if s.Files["?4"].RandWrites != 1 {
		t.Errorf("write at 100 should be random: %+v", s.Files["?4"].Patterns)
	}
	if s.TTFB == nil || s.TTFB.TotalCount() != 1 {
		t.Fatalf("ttfb missing")
	}
	// The first read's own latency, not the gap from the open (which ended at 500).
	if v := s.TTFB.ValueAtPercentile(50); v < 1000 || v > 1024 || !f.FirstByte || f.FirstByteNs != 1000 {
		t.Errorf("ttfb %d, file's first byte %d (%v), want 1000", v, f.FirstByteNs, f.FirstByte)
	}
	// Reads 1, 2 and 5 return bytes never read before (5 in part), 3 and 4 only bytes read
	// before.
	if f.FirstReads != 3 || f.FirstReadBytes != 3*4096 || f.Rereads != 2 || f.RereadOnlyBytes != 2*4096 || f.FirstReadNs != 3000 || f.RereadNs != 2000 {
		t.Errorf("file: first %d (%d B, %d ns), re %d (%d B, %d ns)", f.FirstReads, f.FirstReadBytes, f.FirstReadNs, f.Rereads, f.RereadOnlyBytes, f.RereadNs)
	}
	if s.FirstReads.Count != 3 || s.Rereads.Count != 2 || s.FirstReads.Bytes != 3*4096 || s.Rereads.Hist.TotalCount() != 2 {
		t.Errorf("job: first %+v, re %+v", s.FirstReads, s.Rereads)
	}
}

// TestBusy: the I/O-active time is the union of the events' intervals, whatever order
// they come in.
func TestBusy(t *testing.T) {
	tests := []struct {
		name string
		iv   [][2]int64
		want int64
	}{
		{"disjoint", [][2]int64{{0, 10}, {20, 30}}, 20},
		{"overlapping in end order", [][2]int64{{5, 10}, {0, 12}, {11, 20}}, 20},
		{"touching", [][2]int64{{0, 10}, {10, 20}}, 20},
		{"late and inside a gap", [][2]int64{{0, 10}, {40, 50}, {20, 30}, {25, 45}}, 40},
		{"zero length", [][2]int64{{0, 0}, {5, 5}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b busySet
			for _, x := range tt.iv {
				b.add(x[0], x[1])
			}
			if got := b.total(); got != tt.want {
				t.Errorf("busy %d, want %d", got, tt.want)
			}
		})
	}
	// Many disjoint intervals spread beyond the window and the cap: exact when in order.
	var b busySet
	for i := int64(0); i < 10*busyCap; i++ {
		b.add(i*int64(time.Millisecond), i*int64(time.Millisecond)+1000)
	}
	if got := b.total(); got != 10*busyCap*1000 || b.late != 0 {
		t.Errorf("busy %d (late %d), want %d", got, b.late, 10*busyCap*1000)
	}
	if n := testing.AllocsPerRun(1000, func() { b.add(b.maxEnd+10, b.maxEnd+20) }); n != 0 {
		t.Errorf("add allocates %.1f times", n)
	}
}

func TestRangeSet(t *testing.T) {
	tests := []struct {
		name   string
		ranges [][2]int64
		want   []uint64
		final  [][2]int64
	}{
		{"sequential", [][2]int64{{0, 10}, {10, 20}, {20, 30}}, []uint64{0, 0, 0}, [][2]int64{{0, 30}}},
		{"reread", [][2]int64{{0, 10}, {0, 10}, {5, 15}}, []uint64{0, 10, 5}, [][2]int64{{0, 15}}},
		{"gap filled", [][2]int64{{0, 10}, {20, 30}, {5, 25}}, []uint64{0, 0, 10}, [][2]int64{{0, 30}}},
		{"backwards", [][2]int64{{20, 30}, {10, 20}, {0, 10}}, []uint64{0, 0, 0}, [][2]int64{{0, 30}}},
		{"disjoint", [][2]int64{{50, 60}, {0, 10}, {30, 40}}, []uint64{0, 0, 0}, [][2]int64{{0, 10}, {30, 40}, {50, 60}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs rangeSet
			for i, r := range tt.ranges {
				if got := rs.add(r[0], r[1]); got != tt.want[i] {
					t.Errorf("add %v = %d, want %d", r, got, tt.want[i])
				}
			}
			if got := rs.ranges(); !slices.Equal(got, tt.final) {
				t.Errorf("ranges %v, want %v", got, tt.final)
			}
		})
	}
	var rs rangeSet
	for i := range 100 {
		rs.add(int64(i)*100, int64(i)*100+10)
	}
	if n := len(rs.ranges()); n != MaxRanges || !rs.overflowed {
		t.Errorf("bounded set: %d ranges, overflowed %v", n, rs.overflowed)
	}
}

func TestLogHist(t *testing.T) {
	var h LogHist
	for i := range 1000 {
		h.Add(int64(i+1) * 1000) // 1..1000 µs
	}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := int64(q*1000) * 1000
		got := h.Quantile(q)
		if got < exact || float64(got) > float64(exact)*1.13 {
			t.Errorf("q%v = %d, exact %d", q, got, exact)
		}
	}
	for i := range NumLogBuckets - 1 {
		if logBucketUpper(i) >= logBucketUpper(i+1) {
			t.Fatalf("bucket bounds not increasing at %d", i)
		}
		if logBucket(logBucketUpper(i)) != i+1 || logBucket(logBucketUpper(i)-1) != i {
			t.Fatalf("bucket %d: upper %d maps to %d", i, logBucketUpper(i), logBucket(logBucketUpper(i)))
		}
	}
}

func TestSeriesCoarsensAndMerges(t *testing.T) {
	var evs []trace.Event
	for i := range 100 {
		evs = append(evs, trace.Event{Op: trace.OpGetattr, Start: int64(i) * int64(time.Second), Dur: 1000})
	}
	s := accumulate("s", evs, Options{MaxIntervals: 16})
	if s.Series.Width != 8*time.Second || len(s.Series.Slots) != 13 {
		t.Errorf("width %v slots %d, want 8s 13", s.Series.Width, len(s.Series.Slots))
	}
	var n uint64
	for _, sl := range s.Series.Slots {
		n += sl.Ops
	}
	if n != 100 {
		t.Errorf("ops in series %d", n)
	}
	// A trace starting 10 s later lands 10 s later in the merged series.
	a := accumulate("a", evs[:5], Options{Interval: time.Second})
	b := accumulate("b", evs[:5], Options{Interval: time.Second})
	b.Series.Start = b.Series.Start.Add(10 * time.Second)
	m := New()
	m.Merge(a)
	m.Merge(b)
	if len(m.Series.Slots) != 15 || m.Series.Slots[10].Ops != 1 || m.Series.Slots[4].Ops != 1 || m.Series.Slots[7].Ops != 0 {
		t.Errorf("merged series %d slots", len(m.Series.Slots))
	}
	// Merging a trace that started earlier shifts the series.
	m2 := New()
	m2.Merge(b)
	m2.Merge(a)
	if !m2.Series.Start.Equal(a.Series.Start) || len(m2.Series.Slots) != 15 || m2.Series.Slots[10].Ops != 1 {
		t.Errorf("merged (earlier second) start %v slots %d", m2.Series.Start, len(m2.Series.Slots))
	}
}

func TestAutoInterval(t *testing.T) {
	tests := []struct {
		name  string
		span  time.Duration
		width time.Duration
	}{
		{"half a second", 500 * time.Millisecond, FineInterval},
		{"three seconds", 3200 * time.Millisecond, 2 * FineInterval},
		{"ten seconds", 10 * time.Second, 8 * FineInterval},
		{"a minute", time.Minute, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evs []trace.Event
			for ts := time.Duration(0); ts < tt.span; ts += tt.span / 100 {
				evs = append(evs, trace.Event{Op: trace.OpRead, Start: int64(ts), Dur: 1000, Ret: 10})
			}
			s := accumulate("a", evs, Options{})
			if s.Series.Width != tt.width {
				t.Fatalf("width %v, want %v", s.Series.Width, tt.width)
			}
			var n, by uint64
			for _, sl := range s.Series.Slots {
				n += sl.Ops
				by += sl.ReadBytes
			}
			if n != uint64(len(evs)) || by != 10*uint64(len(evs)) {
				t.Errorf("series holds %d ops %d bytes, want %d %d", n, by, len(evs), 10*len(evs))
			}
		})
	}
}

func TestCorruptPathIDStaysSmall(t *testing.T) {
	a := NewAccumulator("c", &trace.Header{}, Options{})
	a.Add(&trace.Event{Op: trace.OpRead, Path: 0xfffffff0, Handle: 1, Size: 10, Ret: 10})
	a.Add(&trace.Event{Op: trace.OpRead, Path: 3, Handle: 2, Size: 10, Ret: 10})
	if len(a.files.dense) > 1024 {
		t.Errorf("a corrupt path id grew the file table to %d entries", len(a.files.dense))
	}
	s := a.Finish(&Names{}, nil, nil)
	if s.Files["?4294967280"] == nil || s.Files["?3"] == nil {
		t.Errorf("files %v", s.Files)
	}
}

func TestClampOutOfRange(t *testing.T) {
	evs := []trace.Event{
		{Op: trace.OpRead, Dur: -5},
		{Op: trace.OpRead, Dur: 2 * HistHighest},
	}
	s := accumulate("c", evs, Options{})
	if s.Ops[trace.OpRead].Hist.TotalCount() != 2 {
		t.Fatal("out-of-range values were not recorded")
	}
	if got := s.Ops[trace.OpRead].Percentile(100); got < HistHighest {
		t.Errorf("max percentile %d", got)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	evs := genEvents(100_000, 11)
	a := NewAccumulator("x", &trace.Header{}, Options{})
	for i := range evs {
		a.Add(&evs[i]) // warm up: histograms, file table, handle table
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		a.Add(&evs[i%len(evs)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Add allocates %.3f times per event", allocs)
	}
}

func BenchmarkStatsAdd(b *testing.B) {
	evs := genEvents(1<<16, 5)
	a := NewAccumulator("bench", &trace.Header{}, Options{})
	for i := range evs {
		a.Add(&evs[i])
	}
	benchAdd(b, a, evs)
}

// TestRangeSetModel checks re-read bytes against a byte map, for random reads that stay
// within MaxRanges ranges.
func TestRangeSetModel(t *testing.T) {
	checked := 0
	defer func() {
		if checked < 10 {
			t.Errorf("only %d of 50 runs stayed within MaxRanges", checked)
		}
	}()
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 9))
		var rs rangeSet
		seen := make([]bool, 4096)
		for range 200 {
			s := int64(rng.IntN(4000))
			e := s + int64(1+rng.IntN(96))
			if rng.IntN(3) == 0 && rs.has() { // a sequential continuation
				s = rs.cur[1]
				e = min(s+int64(1+rng.IntN(64)), 4096)
				if e <= s {
					continue
				}
			}
			var want uint64
			for x := s; x < e; x++ {
				if seen[x] {
					want++
				}
				seen[x] = true
			}
			if got := rs.add(s, e); got != want && !rs.overflowed {
				t.Fatalf("seed %d: add [%d,%d) = %d, want %d", seed, s, e, got, want)
			}
		}
		if rs.overflowed {
			continue
		}
		checked++
		var model [][2]int64
		for x := 0; x < len(seen); x++ {
			if seen[x] {
				y := x
				for y < len(seen) && seen[y] {
					y++
				}
				model = append(model, [2]int64{int64(x), int64(y)})
				x = y
			}
		}
		if got := rs.ranges(); !slices.Equal(got, model) {
			t.Fatalf("seed %d: ranges %v, want %v", seed, got, model)
		}
	}
}

// genManyFiles interleaves data and metadata ops over nfiles files at random: the worst
// case for cache locality (every event touches a different file's state).
func genManyFiles(n, nfiles int) []trace.Event {
	rng := rand.New(rand.NewPCG(1, 2))
	offs := make([]int64, nfiles)
	evs := make([]trace.Event, n)
	var ts int64
	for i := range evs {
		f := rng.IntN(nfiles)
		ts += int64(rng.IntN(20_000))
		ev := trace.Event{Start: ts, Dur: int64(5_000 + rng.ExpFloat64()*100_000), Path: uint32(2 + f), Handle: uint64(f + 1), Tid: uint32(1 + f%8), Pid: uint32(1 + f%8)}
		switch r := rng.IntN(10); {
		case r < 6:
			ev.Op, ev.Offset, ev.Size, ev.Ret = trace.OpRead, offs[f], 65536, 65536
			offs[f] += 65536
		case r < 7:
			ev.Op, ev.Offset, ev.Size, ev.Ret = trace.OpWrite, offs[f], 4096, 4096
		case r < 9:
			ev.Op = trace.OpGetattr
		default:
			ev.Op = trace.OpLookup
		}
		evs[i] = ev
	}
	return evs
}

func BenchmarkStatsAddManyFiles(b *testing.B) {
	evs := genManyFiles(1<<20, 100_000)
	a := NewAccumulator("bench", &trace.Header{}, Options{})
	for i := range evs {
		a.Add(&evs[i])
	}
	benchAdd(b, a, evs)
}

// benchAdd feeds evs to a b.N times and reports events/s (wall clock) and events/cpu-s
// (process CPU time, robust against other load on the machine). Each pass over evs is
// moved later in time, as a trace goes on.
func benchAdd(b *testing.B, a *Accumulator, evs []trace.Event) {
	span := evs[len(evs)-1].End() + 1
	for i := range evs {
		span = max(span, evs[i].End()+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu := time.Now(), cpuTime()
	for i := 0; i < b.N; i++ {
		k := i & (len(evs) - 1)
		if k == 0 {
			for j := range evs {
				evs[j].Start += span
			}
		}
		a.Add(&evs[k])
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
	if c := cpuTime() - cpu; c > 0 {
		b.ReportMetric(float64(b.N)/c.Seconds(), "events/cpu-s")
	}
}

func TestDirectories(t *testing.T) {
	evs := []trace.Event{
		{Op: trace.OpLookup, Path: 2, Mode: 0o40755},           // d1 by its lookup reply
		{Op: trace.OpLookup, Path: 3, Mode: 0o100644},          // d1/f
		{Op: trace.OpRead, Path: 3, Size: 10, Ret: 10},         // d1/f
		{Op: trace.OpOpendir, Path: 4, Handle: 9},              // d2 by a dir op
		{Op: trace.OpLookup, Path: 5, Errno: 2, Mode: 0o40755}, // failed: says nothing
	}
	h := &trace.Header{}
	a := NewAccumulator("d", h, Options{})
	for i := range evs {
		a.Add(&evs[i])
	}
	s := a.Finish(&Names{Paths: map[uint32]string{2: "d1", 3: "d1/f", 4: "d2", 5: "d1/nope"}}, nil, nil)
	for p, want := range map[string]bool{"d1/": true, "d1/f": false, "d2/": true, "d1/nope": false} {
		if got := s.Files[p].IsDir; got != want {
			t.Errorf("%s: IsDir %v, want %v", p, got, want)
		}
	}
	if nd := s.NonDirs(); len(nd) != 2 || nd["d1/f"] == nil || nd["d1/nope"] == nil {
		t.Errorf("NonDirs %v", nd)
	}
	d := s.Dirs()
	if d["d1"] == nil || d["d1"].Ops != 4 || d["d1"].ReadBytes != 10 || d["d2"] == nil || d["d2"].Ops != 1 {
		t.Errorf("Dirs: %+v", d)
	}
}

// TestFileLives: a name that stood for a file and then for a directory keeps one entry per
// life, the file's with its writes, size and sampled offsets, the directory's with its own.
func TestFileLives(t *testing.T) {
	evs := []trace.Event{
		{Op: trace.OpCreate, Path: 2, Handle: 5, Mode: 0o100644},
		{Op: trace.OpWrite, Path: 2, Handle: 5, Size: 4096, Ret: 4096},
		{Op: trace.OpWrite, Path: 2, Handle: 5, Offset: 4096, Size: 4096, Ret: 4096},
		{Op: trace.OpSetattr, Path: 2, Flags: trace.SetattrSize, Offset: 10000},
		{Op: trace.OpRelease, Path: 2, Handle: 5},
		{Op: trace.OpUnlink, Path: 2},
		{Op: trace.OpLookup, Path: 2, Errno: 2},                 // says nothing: the file's life
		{Op: trace.OpMkdir, Path: 2, Mode: 0o40755},             // a directory from here on
		{Op: trace.OpLookup, Path: 2, Mode: 0o40755, Ret: 4096}, // its size is not a file's
		{Op: trace.OpOpendir, Path: 2, Handle: 6},
		{Op: trace.OpReaddirplus, Path: 2, Handle: 6, Size: 4096, Ret: 80},
		{Op: trace.OpReleasedir, Path: 2, Handle: 6},
	}
	for i := range evs {
		evs[i].Start, evs[i].Dur = int64(i)*1000, 100
	}
	a := NewAccumulator("lives", &trace.Header{}, Options{})
	for i := range evs {
		a.Add(&evs[i])
	}
	s := a.Finish(&Names{Paths: map[uint32]string{2: "B"}}, nil, nil)
	f, d := s.Files["B"], s.Files["B/"]
	if f == nil || d == nil || len(s.Files) != 2 {
		t.Fatalf("files %v", s.Files)
	}
	if f.IsDir || f.Ops != 7 || f.WriteBytes != 8192 || f.MaxEnd != 8192 || f.Size() != 10000 || f.Opens != 1 {
		t.Errorf("the file's life: %+v", f)
	}
	if !d.IsDir || d.Ops != 5 || d.WriteBytes != 0 || d.Path != "B" {
		t.Errorf("the directory's life: %+v", d)
	}
	if nd := s.NonDirs(); len(nd) != 1 || nd["B"] != f {
		t.Errorf("NonDirs %v", nd)
	}
	if dirs := s.Dirs(); dirs["B"] == nil || dirs["B"].Ops != 5 || dirs[""] == nil || dirs[""].WriteBytes != 8192 {
		t.Errorf("Dirs %v", dirs)
	}
	if len(s.Offsets) != 1 || s.Offsets[0].Path != "B" || s.Offsets[0].Bytes != 8192 || len(s.Offsets[0].Points) != 2 {
		t.Errorf("offsets %+v", s.Offsets)
	}
	// Merged with another trace of the same kinds, the lives stay apart.
	m := New()
	m.Merge(s)
	m.Merge(s)
	if m.Files["B"].WriteBytes != 16384 || m.Files["B"].IsDir || !m.Files["B/"].IsDir {
		t.Errorf("merged: %+v %+v", m.Files["B"], m.Files["B/"])
	}
}

// TestSucceeded: the figures of the ops that succeeded leave the failed ones out, their
// latency distribution too.
func TestSucceeded(t *testing.T) {
	evs := []trace.Event{
		{Op: trace.OpCreate, Path: 2, Dur: 1e6},
		{Op: trace.OpCreate, Path: 2, Dur: 2e6},
		{Op: trace.OpCreate, Path: 2, Dur: 3e6},
		{Op: trace.OpCreate, Path: 2, Dur: 10e6, Errno: 13},
	}
	s := accumulate("p", evs, Options{})
	o := &s.Ops[trace.OpCreate]
	ok := o.Succeeded()
	if ok.Count != 3 || ok.Errors != 0 || ok.TotalNs != 6e6 || ok.Hist.TotalCount() != 3 || ok.MaxNs < 3e6 || ok.MaxNs > 3003e3 {
		t.Errorf("succeeded: count %d, errors %d, total %d, hist %d, max %d", ok.Count, ok.Errors, ok.TotalNs, ok.Hist.TotalCount(), ok.MaxNs)
	}
	if p := ok.Percentile(50); p < 2e6 || p > 2003e3 {
		t.Errorf("p50 %d, want 2 ms", p)
	}
	if all := o.Percentile(100); all < 10e6 || o.Hist.TotalCount() != 4 {
		t.Errorf("the op's own figures changed: max %d, %d ops", all, o.Hist.TotalCount())
	}
}

// TestFirstAccessInStartOrder: the first access to a file is the read that started first,
// whatever order the trace lists events in. A trace lists events per group of threads
// (trace/doc.go), so here the second reader's events come first in the file, as they do
// in a recording of `dd bs=1M; dd bs=64k` of the same file.
func TestFirstAccessInStartOrder(t *testing.T) {
	const mib = 1 << 20
	var first, second []trace.Event
	tm := int64(1000)
	next := func(d int64) int64 { tm += d; return tm - d }
	first = append(first, trace.Event{Op: trace.OpOpen, Path: 2, Handle: 1, Start: next(2000), Dur: 1000, Tid: 10, Pid: 10})
	for i := range int64(4) {
		first = append(first, trace.Event{Op: trace.OpRead, Path: 2, Handle: 1, Offset: i * mib, Size: mib, Ret: mib,
			Start: next(500_000), Dur: 400_000, Tid: 10, Pid: 10})
	}
	first = append(first, trace.Event{Op: trace.OpRelease, Path: 2, Handle: 1, Start: next(2000), Dur: 1000, Tid: 10, Pid: 10})
	second = append(second, trace.Event{Op: trace.OpOpen, Path: 2, Handle: 2, Start: next(2000), Dur: 1000, Tid: 20, Pid: 20})
	for i := range int64(64) {
		second = append(second, trace.Event{Op: trace.OpRead, Path: 2, Handle: 2, Offset: i * mib / 16, Size: mib / 16, Ret: mib / 16,
			Start: next(10_000), Dur: 8_000, Tid: 20, Pid: 20})
	}
	second = append(second, trace.Event{Op: trace.OpRelease, Path: 2, Handle: 2, Start: next(2000), Dur: 1000, Tid: 20, Pid: 20})
	fileOrder := append(slices.Clone(second), first...)

	names := &Names{Paths: map[uint32]string{2: "f"}}
	for _, kind := range []string{"record", "replay"} {
		t.Run(kind, func(t *testing.T) {
			h := &trace.Header{Kind: kind}
			a := NewAccumulator(kind, h, Options{Names: names})
			for i := range fileOrder {
				a.Add(&fileOrder[i])
			}
			s := a.Finish(names, nil, nil)
			check := func(what string, firstN, reN uint64, firstNs, reNs int64) {
				t.Helper()
				if firstN != 4 || reN != 64 || firstNs != 4*400_000 || reNs != 64*8_000 {
					t.Errorf("%s: first access %d (%d ns), re-access %d (%d ns); want 4 (1600000 ns) and 64 (512000 ns)",
						what, firstN, firstNs, reN, reNs)
				}
			}
			check("requests", s.FirstReads.Count, s.Rereads.Count, s.FirstReads.TotalNs, s.Rereads.TotalNs)
			check("calls", s.CallFirstReads.Count, s.CallRereads.Count, s.CallFirstReads.TotalNs, s.CallRereads.TotalNs)
			f := s.Files["f"]
			if f == nil {
				t.Fatalf("no file f in %v", s.Files)
			}
			check("file", f.FirstReads, f.Rereads, f.FirstReadNs, f.RereadNs)
			if f.FirstByteNs != 400_000 || f.SeqReads != 68 || f.UnusedOpen != 0 {
				t.Errorf("file: first byte %d ns, sequential reads %d, unused opens %d; want 400000, 68, 0", f.FirstByteNs, f.SeqReads, f.UnusedOpen)
			}
		})
	}
}

// TestCopyFileRangeBytes: copy_file_range's bytes count as read by the process and from
// the input file, and as written by the process and to the output file, as the job's
// figures count them.
func TestCopyFileRangeBytes(t *testing.T) {
	const n = 64 << 20
	evs := []trace.Event{
		{Op: trace.OpOpen, Path: 2, Handle: 1, Start: 1000, Dur: 1000, Pid: 50, Tid: 50},
		{Op: trace.OpCreate, Path: 3, Handle: 2, Start: 3000, Dur: 1000, Pid: 50, Tid: 50},
		{Op: trace.OpCopyFileRange, Path: 2, Path2: 3, Handle: 1, Handle2: 2, Size: n, Ret: n, Start: 5000, Dur: 1e6, Pid: 50, Tid: 50},
		{Op: trace.OpCopyFileRange, Path: 2, Path2: 3, Handle: 1, Handle2: 2, Offset: n, Offset2: n, Size: n, Ret: 0, Start: 2e6, Dur: 1000, Pid: 50, Tid: 50},
	}
	s := accumulate("cp", evs, Options{})
	var p *ProcStats
	for _, ps := range s.Procs {
		p = ps
	}
	if p == nil || p.ReadBytes != n || p.WriteBytes != n {
		t.Errorf("process: %+v, want %d bytes read and written", p, n)
	}
	if in, out := s.Files["?2"], s.Files["?3"]; in == nil || out == nil || in.ReadBytes != n || in.WriteBytes != 0 || out.WriteBytes != n ||
		out.ReadBytes != 0 || in.UnusedOpen != 0 || out.UnusedOpen != 0 {
		t.Errorf("files: input %+v, output %+v", in, out)
	}
	if got := s.Ops[trace.OpCopyFileRange].Bytes; got != n {
		t.Errorf("copy_file_range bytes %d, want %d", got, n)
	}
}

// fileAgg is 512 bytes: in the table of files, the lines its comments name are cache lines.
var (
	_ [512 - unsafe.Sizeof(fileAgg{})]byte
	_ [unsafe.Sizeof(fileAgg{}) - 512]byte
)
