package trace

import "unsafe"

// prefetchEvent asks the CPU to fetch, for writing, the cache lines of the Event at p.
// The assembly spells out the lines of a 176-byte Event (p, p+64, p+128, p+175).
//
//go:noescape
func prefetchEvent(p unsafe.Pointer)

// Compile-time check: the assembly's offsets assume an Event of 176 bytes.
var (
	_ [176 - unsafe.Sizeof(Event{})]byte
	_ [unsafe.Sizeof(Event{}) - 176]byte
)
