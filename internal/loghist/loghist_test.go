package loghist

import (
	"math"
	"testing"
)

// TestBuckets checks, for each resolution in use, that the buckets tile the values
// without gaps or overlaps, that every value falls in the bucket whose range holds it,
// and that a bucket is at most 1/2^k of its values wide.
func TestBuckets(t *testing.T) {
	for _, k := range []uint{2, 3, 4} {
		n := Buckets(k)
		for i := 0; i < n; i++ {
			lo, hi := Low(i, k), High(i, k)
			if i > 0 && lo != High(i-1, k)+1 {
				t.Fatalf("k=%d: bucket %d starts at %d, previous ended at %d", k, i, lo, High(i-1, k))
			}
			if Bucket(lo, k) != i || Bucket(hi, k) != i {
				t.Fatalf("k=%d: bucket %d: [%d,%d] maps to %d,%d", k, i, lo, hi, Bucket(lo, k), Bucket(hi, k))
			}
			if lo >= 1<<k && float64(hi-lo+1) > float64(lo)/float64(uint64(1)<<k) {
				t.Fatalf("k=%d: bucket %d [%d,%d] is wider than 1/%d of its values", k, i, lo, hi, 1<<k)
			}
		}
		if b := Bucket(math.MaxUint64, k); b != n-1 || High(b, k) != math.MaxUint64 {
			t.Fatalf("k=%d: the largest value is in bucket %d (up to %d) of %d", k, b, High(b, k), n)
		}
	}
}
