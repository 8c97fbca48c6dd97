package trace

import (
	"fmt"
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
