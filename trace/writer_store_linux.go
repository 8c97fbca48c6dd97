package trace

import (
	"syscall"
	"unsafe"
)

// newEventStore returns n zeroed events for the writer's batches, mapped outside the Go
// heap, and a function that unmaps them.
//
// The store is the writer's largest allocation (DefaultBufferEvents events are 26 MiB). In
// the Go heap it would be live heap, so the collector's heap goal would grow by as much
// again and the host process (go-fuse allocates on every request) would run through tens
// of MiB of fresh memory between collections, page-faulting on it. Event holds no
// pointers, so the collector has nothing to see there.
func newEventStore(n int) ([]Event, func()) {
	size := n * int(unsafe.Sizeof(Event{}))
	if size <= 0 {
		return make([]Event, n), func() {}
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]Event, n), func() {}
	}
	return unsafe.Slice((*Event)(unsafe.Pointer(&mem[0])), n), func() { _ = syscall.Munmap(mem) }
}
