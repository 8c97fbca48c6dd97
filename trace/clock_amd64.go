package trace

// haveCycles says cycles reads a counter.
const haveCycles = true

// cycles returns the CPU's time-stamp counter (RDTSC, not serialized: it may run a few
// cycles early, which is nothing next to the system calls it times).
func cycles() int64
