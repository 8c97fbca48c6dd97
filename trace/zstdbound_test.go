package trace

import (
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestZstdBound: for what the writer's encoder makes of any payload (random, repetitive,
// empty, larger than a block), the bound holds the payload and the declared size is its
// length (or 0: small frames may leave it out).
func TestZstdBound(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = enc.Close() }()
	rng := rand.New(rand.NewPCG(1, 2))
	for i, n := range []int{0, 1, 100, 4096, 128 << 10, 1 << 20, 3<<20 + 7} {
		p := make([]byte, n)
		switch i % 3 {
		case 0:
			for j := range p {
				p[j] = byte(rng.IntN(256))
			}
		case 1:
			for j := range p {
				p[j] = byte(j / 1000)
			}
		}
		stored := enc.EncodeAll(p, nil)
		bound, declared, ok := zstdBound(stored)
		if !ok || bound < uint64(n) || (declared != uint64(n) && declared != 0) {
			t.Errorf("%d bytes (%d stored): bound %d, declared %d, ok %v", n, len(stored), bound, declared, ok)
		}
		if n > 0 {
			if _, _, ok := zstdBound(stored[:len(stored)-1]); ok {
				t.Errorf("%d bytes: a frame cut short reads as whole", n)
			}
		}
	}
}
