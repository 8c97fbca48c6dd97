package trace

import "unsafe"

// prefetchEvent asks the CPU to fetch, for writing, the cache lines of the Event at p.
// The assembly spells out the lines of a 168-byte Event (p, p+64, p+128, p+167).
//
//go:noescape
func prefetchEvent(p unsafe.Pointer)

// Compile-time check: the assembly's offsets assume an Event of 168 bytes.
var (
	_ [168 - unsafe.Sizeof(Event{})]byte
	_ [unsafe.Sizeof(Event{}) - 168]byte
)
