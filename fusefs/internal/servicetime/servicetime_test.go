package servicetime

import (
	"testing"
	"unsafe"
)

// TestSvcBucket: a request whose bucket is full gets no slot and is recorded with the
// handler's times; a channel still holding a slot (a request that returned without
// take) gets the same slot back, cleared.
func TestSvcBucket(t *testing.T) {
	s := new(Table)
	c := make(chan struct{})
	b := &s.buckets[s.bucket(chanKey(c))]
	for i := range b.keys {
		b.keys[i].Store(uintptr(0x1000 + i))
	}
	if r := s.Begin(c); r != None {
		t.Fatalf("full bucket: got slot %d", r)
	}
	if _, _, ok := s.Take(None, 10); ok {
		t.Errorf("take(None) found a measurement")
	}
	b.keys[1].Store(chanKey(c))
	b.slots[1] = slot{start: 1, dur: 2}
	r := s.Begin(c)
	if r%numWays != 1 || b.slots[1].dur != -1 {
		t.Fatalf("claimed again: slot %d, dur %d; want way 1 cleared", r, b.slots[1].dur)
	}
	b.slots[1] = slot{start: 12, dur: 3}
	if s0, s1, ok := s.Take(r, 10); !ok || s0 != 12 || s1 != 15 || b.keys[1].Load() != 0 {
		t.Errorf("take = %d, %d, %v (key %#x); want the measured 12, 15 and the slot freed", s0, s1, ok, b.keys[1].Load())
	}
	// A measurement from before the slot was claimed is not this request's.
	r = s.Begin(c)
	b.slots[r%numWays] = slot{start: 5, dur: 3}
	if _, _, ok := s.Take(r, 10); ok || b.keys[r%numWays].Load() != 0 {
		t.Errorf("take of a call that started before the request: ok %v", ok)
	}
	b.keys[0].Store(0)
	if r := s.Begin(c); r%numWays != 0 {
		t.Errorf("a free way: got slot %d, want way 0", r)
	}
	if sz := unsafe.Sizeof(bucket{}); sz != 64 {
		t.Errorf("a bucket is %d bytes, want one 64-byte cache line", sz)
	}
}
