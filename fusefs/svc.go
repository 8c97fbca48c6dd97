package fusefs

import (
	"context"
	"sync/atomic"
	"unsafe"
)

// Service time.
//
// A request's time in the daemon is more than the backend's: go-fuse's bridge looks up
// the inode and handle, and some FUSE replies need backend work that the application's
// own system call would not cause on a kernel file system (CREATE and SETATTR reply with
// fresh attributes, so the loopback follows the call with an fstat, and a create by root
// for another user needs a chown). Where the layer performs the operation itself (read,
// write, open, create, setattr on an open file) it times the one backend system call that
// carries out what the application asked for, and the event's Start and Dur are that
// call's; elsewhere they are the handler's. Replay then compares like with like: its own
// measurement is the application-level system call on the target.
//
// The figure travels from the node or file method to the tracer in a slot keyed by the
// request's cancel channel, which the tracer receives and the method sees as ctx.Done().
// The tracer claims the slot before calling the bridge and releases it after.

// svcSlot holds the service time measured during one request. The request's goroutine is
// the only user of start and dur while the slot is claimed.
type svcSlot struct {
	key        atomic.Uintptr // the request's cancel channel; 0: free
	start, dur int64          // monotonic ns; dur < 0: not measured
	_          [40]byte       // one slot per cache line
}

// svcWays slots form a bucket; a request's channel hashes to one bucket and takes any free
// slot of it. 256 buckets of 8 hold far more requests than are ever in flight (go-fuse's
// readers plus the kernel's background requests); a request that finds its bucket full is
// recorded with the handler's time.
const (
	svcBuckets = 256
	svcWays    = 8
)

// svcTable maps the cancel channels of requests in flight to slots. It is a fixed array:
// go-fuse makes a new channel whenever it allocates a request or one was interrupted, so
// a map keyed by channel would grow for as long as the mount lives.
type svcTable struct {
	slots [svcBuckets * svcWays]svcSlot
	probe func(start, dur int64) // tests: sees every measurement
}

// chanKey is the identity of a channel (its address; the slot does not keep it alive,
// and the request holds it while its slot is claimed).
func chanKey(c <-chan struct{}) uintptr { return *(*uintptr)(unsafe.Pointer(&c)) }

func (s *svcTable) bucket(k uintptr) []svcSlot {
	b := int((uint64(k) * 0x9E3779B97F4A7C15) >> 56) // top 8 bits
	return s.slots[b*svcWays : (b+1)*svcWays]
}

// begin claims the request's slot, cleared, or returns nil (no table, no channel, bucket
// full).
func (s *svcTable) begin(cancel <-chan struct{}) *svcSlot {
	if s == nil || cancel == nil {
		return nil
	}
	k := chanKey(cancel)
	b := s.bucket(k)
	for i := range b {
		if b[i].key.Load() == k { // still claimed: a request that returned without finish
			b[i].dur = -1
			return &b[i]
		}
	}
	for i := range b {
		if b[i].key.CompareAndSwap(0, k) {
			b[i].dur = -1
			return &b[i]
		}
	}
	return nil
}

// clock is now() when service times are recorded, else 0 (an untraced mount reads no
// clock for them).
func (s *svcTable) clock() int64 {
	if s == nil {
		return 0
	}
	return now()
}

// measured records the backend call that served the request of ctx: it started at start
// (from clock, just before the call) and ended now.
func (s *svcTable) measured(ctx context.Context, start int64) {
	if s == nil || ctx == nil {
		return
	}
	end := now()
	c := ctx.Done()
	if c == nil {
		return
	}
	k := chanKey(c)
	b := s.bucket(k)
	for i := range b {
		if b[i].key.Load() == k {
			b[i].start, b[i].dur = start, end-start
			if s.probe != nil {
				s.probe(start, end-start)
			}
			return
		}
	}
}

// finish releases the slot and returns the times to record: the measured backend call if
// there was one, else the handler's t0 and t1.
func (s *svcTable) finish(sl *svcSlot, t0, t1 int64) (int64, int64) {
	if sl == nil {
		return t0, t1
	}
	start, dur := sl.start, sl.dur
	sl.key.Store(0)
	if dur < 0 || start < t0 || start+dur > t1 {
		return t0, t1
	}
	return start, start + dur
}
