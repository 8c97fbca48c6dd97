package replay

import (
	"context"
	"fmt"
	"testing"
)

// TestOpQueueBatchesWakeUps: a dispatcher that keeps a thread's queue full (its worker
// takes longer per op than the dispatcher puts) waits for room about once per eighth of
// the queue, not once per op, and the ops come out in order, every one of them.
func TestOpQueueBatchesWakeUps(t *testing.T) {
	const depth, n = 256, 10_000
	q := newOpQueue(depth)
	done := make(chan error, 1)
	go func() {
		var op replayOp
		for i := uint64(1); ; i++ {
			if !q.take(&op) {
				if i != n+1 {
					done <- fmt.Errorf("the queue closed after %d ops, want %d", i-1, n)
					return
				}
				done <- nil
				return
			}
			if op.Seq != i {
				done <- fmt.Errorf("op %d came out as the %dth", op.Seq, i)
				return
			}
			for t0 := now(); now()-t0 < 20_000; { // the op's call
			}
		}
	}()
	for i := uint64(1); i <= n; i++ {
		op := replayOp{Seq: i}
		if !q.put(context.Background(), &op) {
			t.Fatal("put failed")
		}
	}
	q.close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	waits := q.waits
	q.mu.Unlock()
	t.Logf("%d ops, the dispatcher waited for room %d times", n, waits)
	if waits > n/(depth/8)+1 {
		t.Errorf("the dispatcher waited %d times for %d ops: more than once per %d ops taken", waits, n, depth/8)
	}
}
