package fusefs_test

import (
	"maps"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/trace"
)

// posixKnown lists posixtest cases that fail through the layer for reasons that are not
// ours, with the reason; they fail on the untraced loopback too.
var posixKnown = map[string]string{
	// It takes a write lock through one descriptor and expects a read lock on the same file
	// through a second descriptor of the same process to fail with EAGAIN, which is what
	// OFD locks per open file (go-fuse's loopback with locks enabled) give. POSIX locks
	// belong to the process: natively the second request succeeds (it converts the lock),
	// and so it does through the layer (TestLocks, testdata/locks.c section 1).
	"FcntlFlockLocksFile": "expects non-POSIX lock semantics (a process conflicting with itself)",
}

// TestPosix runs go-fuse's POSIX conformance suite through the traced mount in both cache
// modes and with kernel passthrough, and through the untraced loopback as the reference.
// posixtest drives the load from this process (as go-fuse's own tests do).
func TestPosix(t *testing.T) {
	for _, o := range []fusefs.Options{{Cache: fusefs.CacheNone}, {Cache: fusefs.CacheKernel}, {Cache: fusefs.CacheNone, Passthrough: true}} {
		for _, traced := range []bool{true, false} {
			mode := string(o.Cache)
			if o.Passthrough {
				mode += "+passthrough"
			}
			name := mode + "/untraced"
			if traced {
				name = mode + "/traced"
			}
			t.Run(name, func(t *testing.T) {
				tests := maps.Clone(posixtest.All) // never mutate the shared map
				for k := range posixKnown {
					delete(tests, k)
				}
				for nm, fn := range tests {
					t.Run(nm, func(t *testing.T) {
						var rec fusefs.Recorder
						if traced {
							rec = fusetest.NewMemRecorder(0)
						}
						c := fusetest.Mount(t, rec, o)
						fn(t, c.Mnt)
						if traced && len(rec.(*fusetest.MemRecorder).Events()) == 0 {
							t.Errorf("no events recorded")
						}
					})
				}
			})
		}
	}
}

var _ = trace.OpRead
