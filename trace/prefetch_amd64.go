package trace

import "unsafe"

// prefetchEvent asks the CPU to fetch, for writing, the cache lines of the Event at p.
// The assembly spells out the lines of a 112-byte Event (p, p+64, p+111).
//
//go:noescape
func prefetchEvent(p unsafe.Pointer)

// Compile-time check: the assembly's offsets assume an Event of 112 bytes.
var (
	_ [112 - unsafe.Sizeof(Event{})]byte
	_ [unsafe.Sizeof(Event{}) - 112]byte
)
