package fusetest

import (
	"sync"

	"github.com/iotap/iotap/trace"
)

// MemRecorder is a fusefs.Recorder that keeps everything in memory, for tests.
type MemRecorder struct {
	mu        sync.Mutex // guards everything below
	origin    int64
	events    []trace.Event
	ids       map[pathKey]uint32
	paths     []trace.PathRecord // index = id-1
	processes []trace.Process
	files     []trace.File
	errors    int
}

type pathKey struct {
	parent uint32
	name   string
}

// NewMemRecorder returns an empty recorder whose origin is origin (monotonic ns).
func NewMemRecorder(origin int64) *MemRecorder {
	r := &MemRecorder{origin: origin, ids: map[pathKey]uint32{}}
	r.paths = append(r.paths, trace.PathRecord{ID: trace.RootPath})
	return r
}

// Origin implements fusefs.Recorder.
func (r *MemRecorder) Origin() int64 { return r.origin }

// Append implements fusefs.Recorder.
func (r *MemRecorder) Append(ev *trace.Event) {
	r.mu.Lock()
	r.events = append(r.events, *ev)
	r.mu.Unlock()
}

// Path implements fusefs.Recorder.
func (r *MemRecorder) Path(parent uint32, name string) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intern(parent, name)
}

func (r *MemRecorder) intern(parent uint32, name string) uint32 {
	k := pathKey{parent, name}
	if id, ok := r.ids[k]; ok {
		return id
	}
	id := uint32(len(r.paths) + 1)
	r.ids[k] = id
	r.paths = append(r.paths, trace.PathRecord{ID: id, Parent: parent, Name: name})
	return id
}

// Raw implements fusefs.Recorder.
func (r *MemRecorder) Raw(s string) uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.intern(0, s)
}

// AddProcess implements fusefs.Recorder.
func (r *MemRecorder) AddProcess(p trace.Process) {
	r.mu.Lock()
	r.processes = append(r.processes, p)
	r.mu.Unlock()
}

// AddFile implements fusefs.Recorder.
func (r *MemRecorder) AddFile(f trace.File) {
	r.mu.Lock()
	r.files = append(r.files, f)
	r.mu.Unlock()
}

// CountError implements fusefs.Recorder.
func (r *MemRecorder) CountError() {
	r.mu.Lock()
	r.errors++
	r.mu.Unlock()
}

// Events returns a copy of the events recorded so far.
func (r *MemRecorder) Events() []trace.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.Event(nil), r.events...)
}

// Reset drops the events recorded so far (side tables stay).
func (r *MemRecorder) Reset() {
	r.mu.Lock()
	r.events = r.events[:0]
	r.mu.Unlock()
}

// PathName returns the path of id relative to the root ("" for the root), or the raw text of
// a Parent-0 record.
func (r *MemRecorder) PathName(id uint32) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == 0 || int(id) > len(r.paths) {
		return "?"
	}
	p := r.paths[id-1]
	if p.ID == trace.RootPath {
		return ""
	}
	if p.Parent == 0 {
		return p.Name
	}
	var parts []string
	for p.ID != trace.RootPath && p.Parent != 0 {
		parts = append(parts, p.Name)
		p = r.paths[p.Parent-1]
	}
	s := ""
	for i := len(parts) - 1; i >= 0; i-- {
		if s != "" {
			s += "/"
		}
		s += parts[i]
	}
	return s
}

// Processes returns the process records.
func (r *MemRecorder) Processes() []trace.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.Process(nil), r.processes...)
}

// Files returns the file records.
func (r *MemRecorder) Files() []trace.File {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]trace.File(nil), r.files...)
}

// Errors returns the number of CountError calls.
func (r *MemRecorder) Errors() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}
