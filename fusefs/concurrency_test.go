package fusefs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// gateRecorder holds requests of some operations inside the layer, before the reply, until
// want of them are in at once (or a deadline passes): the application's requests stay
// outstanding, so the number that reach the layer together is the number the kernel and
// the layer let through concurrently. The tracer records each request before it replies.
type gateRecorder struct {
	*fusetest.MemRecorder
	ops   map[trace.Op]bool
	want  int
	armed atomic.Bool

	mu         sync.Mutex // guards in, most, tids, handles, open
	in, most   int
	tids       map[uint32]bool
	handles    map[uint64]bool
	open       chan struct{} // closed when want requests are in, or at the deadline
	openedOnce sync.Once
}

func newGate(want int, ops ...trace.Op) *gateRecorder {
	g := &gateRecorder{MemRecorder: fusetest.NewMemRecorder(0), ops: map[trace.Op]bool{}, want: want,
		open: make(chan struct{}), tids: map[uint32]bool{}, handles: map[uint64]bool{}}
	for _, op := range ops {
		g.ops[op] = true
	}
	return g
}

// arm starts holding requests; after d, whatever is held goes on.
func (g *gateRecorder) arm(d time.Duration) {
	g.armed.Store(true)
	time.AfterFunc(d, g.release)
}

func (g *gateRecorder) release() { g.openedOnce.Do(func() { close(g.open) }) }

func (g *gateRecorder) Append(ev *trace.Event) {
	if g.ops[ev.Op] && g.armed.Load() {
		g.mu.Lock()
		g.in++
		g.most = max(g.most, g.in)
		g.tids[ev.Tid] = true
		g.handles[ev.Handle] = true
		if g.in >= g.want {
			g.release()
		}
		g.mu.Unlock()
		<-g.open
		g.mu.Lock()
		g.in--
		g.mu.Unlock()
	}
	g.MemRecorder.Append(ev)
}

func (g *gateRecorder) result() (most, tids, handles int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most, len(g.tids), len(g.handles)
}

// ioUringUsable reports why io_uring cannot be used here ("" if it can).
func ioUringUsable() string {
	b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled")
	if err == nil && strings.TrimSpace(string(b)) != "0" {
		return "io_uring is disabled (kernel.io_uring_disabled=" + strings.TrimSpace(string(b)) + ")"
	}
	return ""
}

// TestAsyncDirectIOConcurrent: fio's asynchronous direct reads (libaio and io_uring at
// iodepth 16, one thread, one file descriptor) reach the layer all at once, in both cache
// modes, as they reach a kernel file system: the kernel does not wait for one reply before
// it sends the next request (FUSE_ASYNC_DIO), and neither go-fuse's server nor the layer
// serialises the requests of one thread or one handle.
func TestAsyncDirectIOConcurrent(t *testing.T) {
	need(t, "fio")
	const depth = 16
	// The layer's reads: kernel passthrough serves them without it (package legs times
	// them at their depth: TestPassthroughAsync).
	for _, mode := range []fusefs.Options{{Cache: fusefs.CacheNone}, {Cache: fusefs.CacheKernel}} {
		t.Run(string(mode.Cache), func(t *testing.T) {
			for _, engine := range []string{"libaio", "io_uring"} {
				t.Run(engine, func(t *testing.T) {
					if why := ioUringUsable(); engine == "io_uring" && why != "" {
						testenv.Skip(t, testenv.FUSE, "%s", why)
					}
					g := newGate(depth, trace.OpRead)
					c := fusetest.Mount(t, g, mode)
					if err := os.WriteFile(filepath.Join(c.Orig, "f"), make([]byte, 4<<20), 0o644); err != nil {
						t.Fatal(err)
					}
					g.arm(5 * time.Second)
					sh(t, fmt.Sprintf("fio --name=qd --filename=%s --rw=randread --bs=4k --size=4m --number_ios=256 "+
						"--direct=1 --ioengine=%s --iodepth=%d --invalidate=0 --output=/dev/null", filepath.Join(c.Mnt, "f"), engine, depth))
					most, tids, handles := g.result()
					if most < depth {
						t.Errorf("at most %d reads were in the layer at once, want %d (the application's queue depth)", most, depth)
					}
					if tids != 1 || handles != 1 {
						t.Errorf("reads came from %d threads on %d handles, want one of each", tids, handles)
					}
				})
			}
		})
	}
}

// TestParallelWritesOneFile: threads writing to one file within its size are served
// concurrently with direct I/O on every open (cache none), as a kernel file system lets
// them copy their data concurrently (FOPEN_PARALLEL_DIRECT_WRITES: without it the kernel
// holds the inode lock for the whole round trip).
func TestParallelWritesOneFile(t *testing.T) {
	need(t, "fio")
	const threads = 4
	g := newGate(threads, trace.OpWrite)
	c := fusetest.Mount(t, g, fusefs.Options{Cache: fusefs.CacheNone})
	if err := os.WriteFile(filepath.Join(c.Orig, "f"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	g.arm(5 * time.Second)
	sh(t, fmt.Sprintf("fio --name=pw --filename=%s --rw=randwrite --bs=4k --size=4m --number_ios=64 "+
		"--ioengine=psync --numjobs=%d --thread --fallocate=none --invalidate=0 --output=/dev/null", filepath.Join(c.Mnt, "f"), threads))
	if most, tids, _ := g.result(); most < threads || tids < threads {
		t.Errorf("at most %d writes of %d threads were in the layer at once, want %d", most, tids, threads)
	}
}

// TestParallelDirOps: lookups and listings of one directory by several processes at once
// reach the layer together (FUSE_PARALLEL_DIROPS: the kernel takes the directory's lock
// shared for them), in both cache modes.
func TestParallelDirOps(t *testing.T) {
	const procs = 6
	forModes(t, func(t *testing.T, mode fusefs.Options) {
		for _, tc := range []struct {
			name string
			ops  []trace.Op
			cmd  string // run by each process, with $i its number
		}{
			{"lookup", []trace.Op{trace.OpLookup}, "stat -c %s d/f$i"},
			{"readdir", []trace.Op{trace.OpReaddir, trace.OpReaddirplus}, "ls d >/dev/null"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := newGate(procs, tc.ops...)
				c := fusetest.Mount(t, g, mode)
				if err := os.Mkdir(filepath.Join(c.Orig, "d"), 0o755); err != nil {
					t.Fatal(err)
				}
				for i := range procs {
					if err := os.WriteFile(filepath.Join(c.Orig, "d", fmt.Sprint("f", i)), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				// Every process looks the directory up first (from the root): let those
				// through, so that the gate sees the operations in d itself.
				sh(t, "stat -c %s "+filepath.Join(c.Mnt, "d")+" >/dev/null")
				g.arm(5 * time.Second)
				sh(t, fmt.Sprintf("cd %s && for i in $(seq 0 %d); do (%s) & done; wait", c.Mnt, procs-1, tc.cmd))
				if most, tids, _ := g.result(); most < procs {
					t.Errorf("at most %d of the %d processes' requests (from %d threads) were in the layer at once, want %d", most, procs, tids, procs)
				}
			})
		}
	})
}
