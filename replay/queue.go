package replay

import (
	"context"
	"sync"
)

// opQueue hands a traced thread's planned ops from the dispatcher to the member of the
// thread's team that holds the baton (overlap.go): a ring of Options.QueueDepth ops, filled
// in the thread's program order.
//
// The planner runs far ahead of the replay, so the queues are full most of the time and
// the dispatcher waits for room. A dispatcher woken each time one op leaves would be
// woken, and switched to, once per op (two thread switches per op on a machine with few
// CPUs, as much as the calls being replayed cost); it is woken instead once an eighth of
// the queue has drained, so that it plans and hands over ops in batches.
type opQueue struct {
	mu     sync.Mutex // guards the fields below
	ring   []replayOp
	head   int
	n      int
	closed bool
	// putWaits: the dispatcher waits for room (on room); takeWaits: the baton holder waits
	// for an op (on ready). Each channel holds one token, sent by the side that clears the
	// flag.
	putWaits, takeWaits bool
	room, ready         chan struct{}
	waits               int // times put waited for room
}

func newOpQueue(depth int) *opQueue {
	return &opQueue{ring: make([]replayOp, depth), room: make(chan struct{}, 1), ready: make(chan struct{}, 1)}
}

// put copies op into the queue, waiting while the queue is full; false when ctx is done
// first (op was not queued).
func (q *opQueue) put(ctx context.Context, op *replayOp) bool {
	for {
		q.mu.Lock()
		if q.n < len(q.ring) {
			q.ring[(q.head+q.n)%len(q.ring)] = *op
			q.n++
			wake := q.takeWaits
			q.takeWaits = false
			q.mu.Unlock()
			if wake {
				q.ready <- struct{}{}
			}
			return true
		}
		q.putWaits = true
		q.waits++
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-ctx.Done():
			return false
		}
	}
}

// close says no op follows those queued.
func (q *opQueue) close() {
	q.mu.Lock()
	q.closed = true
	wake := q.takeWaits
	q.takeWaits = false
	q.mu.Unlock()
	if wake {
		q.ready <- struct{}{}
	}
}

// take copies the next op into op, waiting for one; false when the queue is closed and
// empty.
func (q *opQueue) take(op *replayOp) bool {
	for {
		got, closed := q.tryTake(op, true)
		if got || closed {
			return got
		}
		<-q.ready
	}
}

// tryTake copies the next op into op if there is one (got); closed reports that none will
// come. With wait set and neither, the caller must wait on q.ready before trying again.
func (q *opQueue) tryTake(op *replayOp, wait bool) (got, closed bool) {
	q.mu.Lock()
	if q.n == 0 {
		closed = q.closed
		if !closed && wait {
			q.takeWaits = true
		}
		q.mu.Unlock()
		return false, closed
	}
	*op = q.ring[q.head]
	q.head = (q.head + 1) % len(q.ring)
	q.n--
	wake := q.putWaits && q.n <= len(q.ring)-max(len(q.ring)/8, 1)
	if wake {
		q.putWaits = false
	}
	q.mu.Unlock()
	if wake {
		q.room <- struct{}{}
	}
	return true, false
}
