package fusefs

import (
	"github.com/iotap/iotap/trace"
)

// PassthroughStats counts, with Options.Passthrough, the opens of regular files whose
// reads and writes the kernel served (Opens) and those the layer served because the kernel
// refused the backing file or the file is set-ID (LayerOpens, the first reason in Refused).
type PassthroughStats struct {
	Opens, LayerOpens uint64
	Refused           string
}

// Passthrough returns the counts of kernel passthrough so far (zero without
// Options.Passthrough).
func (s *Server) Passthrough() PassthroughStats {
	if s.passthrough == nil {
		return PassthroughStats{}
	}
	st := s.passthrough.Stats()
	return PassthroughStats{Opens: st.Opens, LayerOpens: st.LayerOpens, Refused: st.Refused}
}

// KernelCall records a read or write that kernel passthrough served on this mount, timed by
// the kernel (ev.Passthrough, with its node id, handle, caller and times set; package legs
// makes it). The layer names its path and attributes its caller as for the requests it
// serves, applies the same filters, and appends it to the trace. It may be called from any
// goroutine; it does not keep ev.
func (s *Server) KernelCall(ev *trace.Event) {
	t := s.tracer
	if t == nil {
		return
	}
	// The kernel hands the call over some milliseconds after it ended: the node may have
	// moved since (a file written, then renamed) or be forgotten (read, then removed). It is
	// named as it was when the call started.
	at := ev.Start + t.origin
	ev.Path = t.nodes.pathAt(ev.Node, at)
	if ev.Node2 != 0 {
		ev.Path2 = t.nodes.pathAt(ev.Node2, at)
	}
	if ev.Tid == 0 {
		t.asOpener(ev, ev.Handle, false)
	}
	// The caller is resolved as for a request (the kernel's pid is replaced by the
	// resolver's, which describes the thread in the trace), and the same filters apply.
	// Calls the kernel served are not the layer's requests: its cost counters leave them out.
	c := span{s0: at}
	pid := ev.Pid
	ev.Pid = 0
	if !t.keep(ev, &c) {
		return
	}
	if ev.Pid == 0 {
		ev.Pid = pid
	}
	if t.w != nil {
		t.w.Append(ev)
		return
	}
	p := eventPool.Get().(*trace.Event)
	*p = *ev
	t.rec.Append(p)
	eventPool.Put(p)
}
