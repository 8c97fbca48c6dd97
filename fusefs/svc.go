package fusefs

import (
	"context"
	"sync"
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
// request's cancel channel, which the tracer receives and the method sees as ctx.Done():
// go-fuse makes one channel per request object and reuses the objects, so the slots stay
// few and a lookup does not allocate.

// svcSlot holds the service time measured during one request. The request's goroutine is
// the only user while the request is in flight.
type svcSlot struct {
	start, dur int64 // monotonic ns; dur < 0: not measured
}

// svcTable maps cancel channels to slots.
type svcTable struct{ m sync.Map }

// begin returns the request's slot, cleared, or nil when the request has no channel.
func (s *svcTable) begin(cancel <-chan struct{}) *svcSlot {
	if s == nil || cancel == nil {
		return nil
	}
	if v, ok := s.m.Load(cancel); ok {
		sl := v.(*svcSlot)
		sl.dur = -1
		return sl
	}
	v, _ := s.m.LoadOrStore(cancel, &svcSlot{dur: -1})
	return v.(*svcSlot)
}

// measured records the backend call that served the request of ctx: it started at start
// and ended now. The caller passes start from now() taken just before the call.
func (s *svcTable) measured(ctx context.Context, start int64) {
	end := now()
	if s == nil || ctx == nil {
		return
	}
	c := ctx.Done()
	if c == nil {
		return
	}
	if v, ok := s.m.Load(c); ok {
		sl := v.(*svcSlot)
		sl.start, sl.dur = start, end-start
	}
}

// span returns the times to record: the measured backend call if there was one, else the
// handler's t0 and t1.
func (sl *svcSlot) span(t0, t1 int64) (int64, int64) {
	if sl == nil || sl.dur < 0 || sl.start < t0 || sl.start+sl.dur > t1 {
		return t0, t1
	}
	return sl.start, sl.start + sl.dur
}
