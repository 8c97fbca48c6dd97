package fusefs

import "github.com/iotap/iotap/trace"

// Recorder receives what the tracing layer observes. *trace.Writer implements it. All methods
// must be safe for concurrent use; Append, Path and Raw are on the hot path and should not
// allocate when the value was seen before.
type Recorder interface {
	// Origin is the monotonic clock reading (ns) that event Start times count from.
	Origin() int64
	// Append records a copy of *ev; ev is reused by the caller after Append returns.
	Append(ev *trace.Event)
	// Path interns parent/name and returns its path id (trace.RootPath is the root).
	Path(parent uint32, name string) uint32
	// Raw interns a free string (a symlink target) and returns its id.
	Raw(s string) uint32
	// AddProcess records a side-table entry for a calling thread.
	AddProcess(p trace.Process)
	// AddFile records a side-table entry for an object seen for the first time.
	AddFile(f trace.File)
	// CountError counts a recording failure (never turned into an errno).
	CountError()
}

// pathKeeper is a Recorder whose path index can forget paths (trace.Writer): the layer
// tells it which path ids must keep their id (those of nodes the kernel holds) and hears
// which ones it forgot.
type pathKeeper interface {
	KeepPaths(keep func() func(id uint32) bool, forgot func(ids []uint32))
}
