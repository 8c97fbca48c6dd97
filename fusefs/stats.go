package fusefs

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/iotap/iotap/trace"
)

// CostCounters are the layer's count of requests and its measurement of its own cost since
// the mount. (Operation counts, bytes and latencies are the trace writer's: iotap's live
// line and summary read them from the events, off the requests' path.)
type CostCounters struct {
	Ops uint64 // requests served

	// The layer's measurement of its own cost, summed over all requests: the time from its
	// entry to the end of its work (the reply to the kernel follows), and the part of that
	// which was the layer's own (timing, attribution, recording) rather than the bridge's
	// and the backend's. The layer times one request in 1<<costSampleShift (8), chosen by
	// the kernel's request id, and scales the sums to all requests; Sampled is how many it
	// timed (every request with Options.CostByOp).
	InLayer, Self time.Duration
	Sampled       uint64
	// Caller threads attributed, and the time spent in /proc in requests' paths, part of
	// Self; measured on every request. With the proc connector (Connector) that time is the
	// name and executable of a new program whose first request came before the resolver
	// read them (package procconn); without it, each new thread is looked up in /proc in
	// its first request and its comm re-read every 50 ms.
	Threads uint64
	Resolve time.Duration
	// With the proc connector: threads whose process record was written after their first
	// request (learnt from /proc by the resolver's goroutine), threads whose name or
	// executable could not be learnt (gone before /proc was read), and the times the
	// connector's socket overflowed (events lost, threads re-read from /proc).
	Connector                bool
	Late, Missing, Overflows uint64
	InPathReads              uint64 // threads read from /proc in a request's path anyway (procconn.Stats)
}

// LayerCost returns the layer's cost as the trace footer stores it.
func (s CostCounters) LayerCost() trace.LayerCost {
	return trace.LayerCost{Requests: s.Ops, InLayer: s.InLayer, Self: s.Self, Threads: s.Threads, Resolve: s.Resolve,
		Connector: s.Connector, Late: s.Late, Missing: s.Missing}
}

// costSampleShift: the layer times its own work on one request in 1<<costSampleShift.
// Timing a request costs two more clock reads and, when the node code measured the backend
// call, a third: on every request they would add a noticeable share to the layer's own
// work on a cheap request such as a getattr (trace's BenchmarkNow times a clock read,
// BenchmarkPartsCold the parts of the layer's own work).
const costSampleShift = 3

// sampled reports whether the request with this key (the kernel's request id, or the node
// id of a FORGET) has its own work timed, for a tracer timing one in 1<<shift.
func sampled(key uint64, shift uint8) bool {
	return (key*0x9E3779B97F4A7C15)>>(64-shift) == 0 // shift 0: every request
}

// statShards spreads the request counters over cache lines by caller thread, so that
// requests served on different CPUs do not pass one line back and forth.
const statShards = 16

type statShard struct {
	n       atomic.Uint64 // requests
	sampled atomic.Uint64 // of which timed
	inLayer atomic.Uint64 // ns in the layer of the timed requests, less their /proc lookups
	self    atomic.Uint64 // ns of own work of the timed requests, less their /proc lookups
	_       [32]byte
}

// costCounters is updated by every request with atomics only.
type costCounters struct {
	req              [statShards]statShard
	threads, resolve atomic.Uint64 // callers looked up in /proc, and ns spent doing it
}

// count counts a request of caller thread tid.
func (s *costCounters) count(tid uint32) { s.req[tid%statShards].n.Add(1) }

// timed adds a sampled request's time in the layer and own work, without /proc lookups.
func (s *costCounters) timed(tid uint32, inLayer, self int64) {
	sh := &s.req[tid%statShards]
	sh.sampled.Add(1)
	sh.inLayer.Add(uint64(max(inLayer, 0)))
	sh.self.Add(uint64(max(self, 0)))
}

// snapshot sums the counters and scales the sampled times to all requests.
func (s *costCounters) snapshot() CostCounters {
	var n, sn, in, self uint64
	for i := range s.req {
		sh := &s.req[i]
		n += sh.n.Load()
		sn += sh.sampled.Load()
		in += sh.inLayer.Load()
		self += sh.self.Load()
	}
	ls := CostCounters{Ops: n, Sampled: sn, Threads: s.threads.Load(), Resolve: time.Duration(s.resolve.Load())}
	if sn > 0 { // else too few requests to say (a /proc lookup alone would read as 100 %)
		ls.InLayer = scale(in, n, sn) + ls.Resolve
		ls.Self = scale(self, n, sn) + ls.Resolve
	}
	return ls
}

// scale returns sum × n / sampled, the sum over sampled requests extended to all n.
func scale(sum, n, sampled uint64) time.Duration {
	if sampled == 0 {
		return 0
	}
	hi, lo := bits.Mul64(sum, n)
	if hi >= sampled { // beyond 2^64 ns: not reachable in a mount's lifetime
		return time.Duration(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, sampled)
	return time.Duration(min(q, 1<<63-1))
}
