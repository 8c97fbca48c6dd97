// Package servicetime carries the service time of a request from the node code, which measures the
// backend call that serves it, to the tracer, which records it. It is where the two sides of
// the FUSE layer meet (package fusefs and its loopback file system), and all they share.
//
// # Service time
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
// The tracer claims the slot (Begin) before calling the bridge and releases it (Take) after;
// the node code reads the clock (Clock) before its backend call and reports the call
// (Measured) after it.
package servicetime

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/iotap/iotap/trace"
)

// slot holds the service time measured during one request. The request's goroutine is
// the only user of it while the slot's key is claimed.
type slot struct {
	start, dur int64 // monotonic ns; dur < 0: not measured
}

// numWays slots form a bucket; a request's channel hashes to one bucket and takes any free
// slot of it. 1024 buckets of 2 hold far more requests than are ever in flight (go-fuse's
// readers plus the kernel's background requests: with 20 in flight, a request finds its
// bucket full about once in 5000); a request that does is recorded with the handler's time.
const (
	numBuckets = 1024
	numWays    = 2
)

// bucket is the keys of one bucket (each a request's cancel channel, 0 when free) and
// their slots, in one cache line: a request touches that line and nothing else of the
// table (which is cold again by the next request: a FUSE round trip in between evicts it).
// Each bucket holds the tests' probe too, in the line's spare bytes: read from the end of
// the table, it would be one more line per measured request.
type bucket struct {
	keys  [numWays]atomic.Uintptr
	slots [numWays]slot
	probe func(start, dur int64) // tests: sees every measurement (SetProbe)
	_     [64 - numWays*24 - 8]byte
}

// Table maps the cancel channels of requests in flight to slots. It is a fixed array:
// go-fuse makes a new channel whenever it allocates a request or one was interrupted, so
// a map keyed by channel would grow for as long as the mount lives. Allocated with new, it
// is larger than 32 KiB and so page-aligned, and each 64-byte bucket is one cache line.
type Table struct {
	buckets [numBuckets]bucket
}

// SetProbe makes every measurement call probe (tests). It must be set before the table is
// in use.
func (s *Table) SetProbe(probe func(start, dur int64)) {
	for i := range s.buckets {
		s.buckets[i].probe = probe
	}
}

// Ref names a claimed slot (bucket*numWays + way).
type Ref int32

// None is no slot.
const None Ref = -1

// chanKey is the identity of a channel (its address; the slot does not keep it alive,
// and the request holds it while its slot is claimed).
func chanKey(c <-chan struct{}) uintptr { return *(*uintptr)(unsafe.Pointer(&c)) }

func (s *Table) bucket(k uintptr) int {
	return int((uint64(k) * 0x9E3779B97F4A7C15) >> 54) // top 10 bits: numBuckets
}

// Begin claims the slot of the request whose cancel channel is cancel, cleared, or returns
// None (no table, no channel, bucket full).
func (s *Table) Begin(cancel <-chan struct{}) Ref {
	if s == nil || cancel == nil {
		return None
	}
	k := chanKey(cancel)
	bi := s.bucket(k)
	b := &s.buckets[bi]
	free := -1
	for i := range b.keys {
		switch b.keys[i].Load() {
		case k: // still claimed: a request that returned without take
			b.slots[i].dur = -1
			return Ref(bi*numWays + i)
		case 0:
			if free < 0 {
				free = i
			}
		}
	}
	for i := max(free, 0); free >= 0 && i < numWays; i++ {
		if b.keys[i].CompareAndSwap(0, k) {
			b.slots[i].dur = -1
			return Ref(bi*numWays + i)
		}
	}
	return None
}

// Clock is the clock of trace events (trace.Now) when service times are recorded (s is not
// nil), else 0: an untraced mount reads no clock for them.
func (s *Table) Clock() int64 {
	if s == nil {
		return 0
	}
	return trace.Now()
}

// Measured records the backend call that served the request of ctx: it started at start
// (from Clock, just before the call) and ended now.
func (s *Table) Measured(ctx context.Context, start int64) {
	if s == nil || ctx == nil {
		return
	}
	end := trace.Now()
	c := ctx.Done()
	if c == nil {
		return
	}
	k := chanKey(c)
	b := &s.buckets[s.bucket(k)]
	for i := range b.keys {
		if b.keys[i].Load() == k {
			d := max(end-start, 0) // the thread may have moved to a CPU whose counter is behind
			b.slots[i].start, b.slots[i].dur = start, d
			if b.probe != nil {
				b.probe(start, d)
			}
			return
		}
	}
}

// Take releases the slot and returns the backend call measured during the request, if
// there was one (ok). The call must have started after t0, when the tracer claimed the slot.
func (s *Table) Take(r Ref, t0 int64) (start, end int64, ok bool) {
	if r < 0 {
		return 0, 0, false
	}
	b := &s.buckets[r/numWays]
	sl := &b.slots[r%numWays]
	start, dur := sl.start, sl.dur
	b.keys[r%numWays].Store(0)
	if dur < 0 || start < t0 {
		return 0, 0, false
	}
	return start, start + dur, true
}

// Claimed counts the slots claimed now (tests: with no request in flight, none is).
func (s *Table) Claimed() int {
	n := 0
	for i := range s.buckets {
		for j := range s.buckets[i].keys {
			if s.buckets[i].keys[j].Load() != 0 {
				n++
			}
		}
	}
	return n
}
