package fusefs

import (
	"sync"
	"sync/atomic"
)

// bitset is a growable set of small integers (path ids, which the recorder assigns densely
// from 1): 10 million paths cost 1.25 MB. testAndSet is lock-free once the chunk exists.
type bitset struct {
	mu     sync.RWMutex // guards the chunks slice (not the words)
	chunks []*[bitsetChunkWords]atomic.Uint64
}

const bitsetChunkWords = 1024 // 65536 ids per chunk

// testAndSet sets bit i and reports whether it was clear before.
func (b *bitset) testAndSet(i uint32) bool {
	c, w, bit := int(i/(64*bitsetChunkWords)), (i/64)%bitsetChunkWords, uint64(1)<<(i%64)
	b.mu.RLock()
	var chunk *[bitsetChunkWords]atomic.Uint64
	if c < len(b.chunks) {
		chunk = b.chunks[c]
	}
	b.mu.RUnlock()
	if chunk == nil {
		b.mu.Lock()
		for len(b.chunks) <= c {
			b.chunks = append(b.chunks, nil)
		}
		if b.chunks[c] == nil {
			b.chunks[c] = new([bitsetChunkWords]atomic.Uint64)
		}
		chunk = b.chunks[c]
		b.mu.Unlock()
	}
	return chunk[w].Or(bit)&bit == 0
}
