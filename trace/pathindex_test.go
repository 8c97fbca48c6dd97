package trace

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
)

// TestPathIndexConcurrent: goroutines intern overlapping pairs while the table grows from
// its first size through several doublings; each pair gets one id whoever asks first, ids
// are dense, and every id is queued for the encoder exactly once with its pair.
func TestPathIndexConcurrent(t *testing.T) {
	x := newPathIndex()
	const pairs, workers = 20000, 4
	got := make([][]uint32, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint32, pairs)
			stride := []int{7919, 7927, 7933, 7937}[w] // primes: each a permutation
			for k := range pairs {
				i := (k*stride + w*977) % pairs // each worker in its own order
				ids[i] = x.id(uint32(i%50), fmt.Sprint("n", i/50))
			}
			got[w] = ids
		}()
	}
	// The encoder takes queued records meanwhile.
	var recs []PathRecord
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			recs = append(recs, x.take()...)
		}
	}()
	wg.Wait()
	<-done
	recs = append(recs, x.take()...)
	for w := 1; w < workers; w++ {
		for i := range pairs {
			if got[w][i] != got[0][i] {
				t.Fatalf("pair %d: worker %d got id %d, worker 0 got %d", i, w, got[w][i], got[0][i])
			}
		}
	}
	if len(recs) != pairs+1 { // and the root
		t.Fatalf("%d records queued for %d pairs and the root", len(recs), pairs)
	}
	seen := make(map[uint32]PathRecord, len(recs))
	for _, r := range recs {
		if _, dup := seen[r.ID]; dup {
			t.Fatalf("id %d queued twice", r.ID)
		}
		seen[r.ID] = r
	}
	for id := RootPath; id <= pairs+1; id++ {
		if _, ok := seen[uint32(id)]; !ok {
			t.Fatalf("id %d missing: ids are not dense", id)
		}
	}
	for i, id := range got[0] {
		if r := seen[id]; r.Parent != uint32(i%50) || r.Name != fmt.Sprint("n", i/50) {
			t.Fatalf("pair %d has id %d, whose record is %+v", i, id, r)
		}
	}
	if r := seen[RootPath]; r.Parent != 0 || r.Name != "" {
		t.Errorf("root record %+v", r)
	}
	if x.id(0, "") != RootPath {
		t.Errorf("the root pair is not RootPath")
	}
	// A hit does not allocate.
	if a := testing.AllocsPerRun(100, func() { x.id(7, "n3") }); a != 0 {
		t.Errorf("a hit allocates %v times", a)
	}
}

// TestPathIndexCompaction: with a limit and a keep function, a job that names new paths
// without end keeps the table at the limit. Kept ids (the keep set, the recent ones, the
// root) are found again under the same id; a forgotten pair named again gets a new id and a
// new record; and when the kept ids fill the table it doubles past the limit.
func TestPathIndexCompaction(t *testing.T) {
	x := newPathIndex()
	var live sync.Map // id → true: "objects the kernel holds"
	var forgotten []uint32
	x.setLimit(1000, func() func(uint32) bool {
		return func(id uint32) bool { _, ok := live.Load(id); return ok }
	},
		func(ids []uint32) { forgotten = append(forgotten, ids...) })
	if x.limit != 1024 {
		t.Fatalf("limit %d, want 1000 rounded up to 1024", x.limit)
	}
	pinned := map[string]uint32{}
	for i := range 20 { // long-lived objects, named first
		name := fmt.Sprint("keep", i)
		id := x.id(RootPath, name)
		pinned[name] = id
		live.Store(id, true)
	}
	first := x.id(RootPath, "gone") // named once, never again until the end
	for i := range 20000 {
		x.id(RootPath, fmt.Sprint("tmp", i))
		if s := len(x.tab.Load().slots); s > 1024 {
			t.Fatalf("after %d new names the table has %d slots (limit 1024)", i+1, s)
		}
	}
	comp, evicted, slots := x.counts()
	if comp == 0 || evicted == 0 || slots != 1024 {
		t.Fatalf("compactions %d, forgotten %d, slots %d: want some, some, 1024", comp, evicted, slots)
	}
	if uint64(len(forgotten)) != evicted || !slices.Contains(forgotten, first) {
		t.Errorf("told of %d forgotten ids (first's %d among them: %v), counted %d",
			len(forgotten), first, slices.Contains(forgotten, first), evicted)
	}
	for _, id := range forgotten {
		if _, held := live.Load(id); held {
			t.Fatalf("held id %d forgotten", id)
		}
	}
	x.take()
	for name, id := range pinned {
		if got := x.id(RootPath, name); got != id {
			t.Errorf("kept %s: id %d, was %d", name, got, id)
		}
	}
	if got := x.id(RootPath, "tmp19999"); x.next-got > 10 {
		t.Errorf("the last name's id %d is not a recent one (next %d): recent ids must be kept", got, x.next)
	}
	if x.id(0, "") != RootPath {
		t.Errorf("the root was forgotten")
	}
	if recs := x.take(); len(recs) != 0 {
		t.Errorf("names still held got new records: %+v", recs)
	}
	again := x.id(RootPath, "gone")
	if again == first {
		t.Fatalf("a forgotten pair kept its id %d", first)
	}
	recs := x.take()
	if len(recs) != 1 || recs[0] != (PathRecord{ID: again, Parent: RootPath, Name: "gone"}) {
		t.Fatalf("naming a forgotten pair queued %+v, want its new record", recs)
	}

	// Everything in use: the table must grow past the limit rather than compact for nothing.
	for i := range 2000 {
		live.Store(x.id(RootPath, fmt.Sprint("held", i)), true)
	}
	if _, _, slots := x.counts(); slots < 4096 {
		t.Errorf("2000 held names in %d slots: the table did not grow past its limit", slots)
	}
	x.take()
	for i := range 2000 {
		name := fmt.Sprint("held", i)
		if id := x.id(RootPath, name); x.take() != nil {
			t.Fatalf("held name %s (id %d) was forgotten", name, id)
		}
	}
}

// TestPathIndexCompactionConcurrent: compactions while other goroutines intern and look up
// (run with -race). Ids of held names never change; every id any goroutine got has a record.
func TestPathIndexCompactionConcurrent(t *testing.T) {
	x := newPathIndex()
	var live sync.Map
	x.setLimit(1024, func() func(uint32) bool {
		return func(id uint32) bool { _, ok := live.Load(id); return ok }
	}, nil)
	held := make([]uint32, 50)
	for i := range held {
		held[i] = x.id(RootPath, fmt.Sprint("held", i))
		live.Store(held[i], true)
	}
	var recs []PathRecord
	var mu sync.Mutex
	var wg sync.WaitGroup
	got := make([][]uint32, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10000 {
				got[w] = append(got[w], x.id(uint32(w+2), fmt.Sprint("n", i)))
				if i%100 == 0 {
					for j, id := range held {
						if g := x.id(RootPath, fmt.Sprint("held", j)); g != id {
							t.Errorf("held%d: id %d, was %d", j, g, id)
							return
						}
					}
					mu.Lock()
					recs = append(recs, x.take()...)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	recs = append(recs, x.take()...)
	byID := map[uint32]bool{}
	for _, r := range recs {
		byID[r.ID] = true
	}
	for w := range got {
		for _, id := range got[w] {
			if !byID[id] {
				t.Fatalf("id %d was returned but never queued", id)
			}
		}
	}
	if c, _, _ := x.counts(); c == 0 {
		t.Fatalf("no compaction happened")
	}
}

// TestReaderResolvesRepeatedPaths: a writer with a bounded path index records some pairs
// under a second id; the reader reports events, path records and file records under the
// first id, with the parent of a re-named directory's children resolved too, and keeps a
// file record of a repeated pair only when the first id had neither a record nor an event.
func TestReaderResolvesRepeatedPaths(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testHeader(), WriterOptions{PathIndexSlots: 1024, ChunkEvents: 256})
	if err != nil {
		t.Fatal(err)
	}
	w.KeepPaths(func() func(uint32) bool { return func(uint32) bool { return false } }, nil)
	ev := func(op Op, path uint32) { w.Append(&Event{Op: op, Tid: 1, Path: path}) }

	dir := w.Path(RootPath, "dir")
	file := w.Path(dir, "file") // named by an event
	ev(OpCreate, file)
	filed := w.Path(RootPath, "filed") // described by a file record, no event
	w.AddFile(File{Path: filed, Type: TypeFile, Size: 1})
	quiet := w.Path(RootPath, "quiet") // only interned (a negative lookup's path, say)
	for i := range 5000 {              // forget them all: a job naming new paths, one request each
		ev(OpLookup, w.Path(RootPath, fmt.Sprint("tmp", i)))
	}
	dir2 := w.Path(RootPath, "dir")
	file2 := w.Path(dir2, "file")
	filed2, quiet2 := w.Path(RootPath, "filed"), w.Path(RootPath, "quiet")
	if dir2 == dir || file2 == file || filed2 == filed || quiet2 == quiet {
		t.Fatalf("ids not renewed: %d→%d %d→%d %d→%d %d→%d", dir, dir2, file, file2, filed, filed2, quiet, quiet2)
	}
	w.AddFile(File{Path: file2, Type: TypeFile, Size: 2})  // the job made it: dropped
	w.AddFile(File{Path: filed2, Type: TypeFile, Size: 3}) // described before: dropped
	w.AddFile(File{Path: quiet2, Type: TypeFile, Size: 4}) // first sighting: kept, as quiet
	ev(OpRename, file2)
	w.Append(&Event{Op: OpRename, Tid: 1, Path: file2, Path2: filed2})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.PathCompactions == 0 || st.PathsForgotten < 4 {
		t.Fatalf("writer stats %+v: no compaction", st)
	}

	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, r)
	if len(evs) != 5003 {
		t.Fatalf("%d events, want 5003", len(evs))
	}
	evs = append(evs[:1], evs[5001:]...)
	if evs[0].Path != file || evs[1].Path != file || evs[2].Path != file || evs[2].Path2 != filed {
		t.Fatalf("events %+v: want paths %d, %d, %d→%d", evs, file, file, file, filed)
	}
	if got := r.PathName(file2); got != "dir/file" {
		t.Errorf("PathName of the second id: %q", got)
	}
	if rec, _ := r.Path(file2); rec.Parent != dir {
		t.Errorf("second record of dir/file has parent %d, want dir's first id %d", rec.Parent, dir)
	}
	files := r.Files()
	want := []File{{Path: filed, Type: TypeFile, Size: 1}, {Path: quiet, Type: TypeFile, Size: 4}}
	if len(files) != len(want) {
		t.Fatalf("files %+v, want %+v", files, want)
	}
	for i := range want {
		if files[i].Path != want[i].Path || files[i].Size != want[i].Size {
			t.Errorf("file %d: %+v, want %+v", i, files[i], want[i])
		}
	}
}

// BenchmarkCompact: one compaction of a full index at the default limit, keeping the recent
// eighth and one id in 100 (the predicate itself is free here).
func BenchmarkCompact(b *testing.B) {
	x := newPathIndex()
	x.setLimit(DefaultPathIndexSlots, func() func(uint32) bool {
		return func(id uint32) bool { return id%100 == 0 }
	}, nil)
	x.keep = nil // fill without compacting
	for i := range 3 * DefaultPathIndexSlots / 4 {
		x.id(RootPath, strconv.Itoa(i))
	}
	x.take()
	x.keep = func() func(uint32) bool { return func(id uint32) bool { return id%100 == 0 } }
	full := x.tab.Load()
	for b.Loop() {
		x.compact(full)
	}
}
