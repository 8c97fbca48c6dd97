package trace

import "unsafe"

// prefetchEvent asks the CPU to fetch, for writing, the cache lines of the Event at p.
//
//go:noescape
func prefetchEvent(p unsafe.Pointer)
