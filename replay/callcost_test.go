package replay

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
)

// The replayer's own cost per call, against the floor.
//
// Each scenario is one kind of call a metadata-heavy job makes, repeated over many files:
// the recorded requests of the calls (with the kernel's legs, as a --legs kernel recording
// has them, and no time between the calls), and the same system calls issued by a minimal
// loop that keeps no books (the floor). BenchmarkCallCost replays the trace (afap and
// think timing, the replay trace written to io.Discard, as iotap replay writes it) and
// runs the floor on the same starting state, on each file system of callCostDirs, and
// reports per system call:
//
//	floor-ns/call     the floor loop's time per call
//	replay-ns/call    the replay's span per call
//	over-ns/call      replay-ns/call less floor-ns/call: what the replayer adds to a job's runtime
//	floor-in-ns/call  the floor's calls timed one by one, as the replayer times its own
//	replay-in-ns/call the replay's summed op time per call (the job I/O time it reports)
//	in-over-ns/call   replay-in less floor-in: what the replayer adds to the job I/O time
//	allocs/call       heap allocations of the replaying process per call
//	cpu-over-ns/call  the replaying process's CPU time per call less the floor's
//
// bench/replaycost.sh runs it on tmpfs and on a loop-mounted ext4 image and prints the
// table; wall-clock figures are evidence only on a quiet machine (see docs/performance.md).

// callScenario is one kind of call, item after item.
type callScenario struct {
	name  string
	calls int // system calls per item
	// record appends item i's requests as the recording layer saw them.
	record func(c *callRecorder, i int)
	// floor issues item i's system calls relative to dirfd, timing each with in.
	floor func(f *floorLoop, i int)
}

// callRecorder writes the requests of one thread's system calls with the kernel's legs
// (each call's entry and return around its requests), back to back.
type callRecorder struct {
	b   *tracetest.Builder
	tid uint32
	fh  uint64
}

const callTid = 7

// call appends the requests of one system call: each req is (op, name, mod).
func (c *callRecorder) call(reqs ...callReq) {
	start := c.b.Clock[callTid]
	if start == 0 {
		start = 1e9
		c.b.Clock[callTid] = start
	}
	for k, r := range reqs {
		last := k == len(reqs)-1
		c.b.Ev(callTid, r.op, r.name, 1000, 0, func(e *trace.Event) {
			e.Queued, e.Done, e.CallStart = e.Start, e.Start+e.Dur, start
			if last {
				e.CallEnd = e.Done
			}
			if r.mod != nil {
				r.mod(e)
			}
		})
	}
}

type callReq struct {
	op   trace.Op
	name string
	mod  func(e *trace.Event)
}

func lookupReq(name string, errno syscall.Errno, mode uint32) callReq {
	return callReq{trace.OpLookup, name, func(e *trace.Event) { e.Errno, e.Mode = uint16(errno), mode }}
}

// floorLoop issues a scenario's calls with no bookkeeping.
type floorLoop struct {
	dir   int // the target root
	fd    int // an open file, for the data scenarios
	buf   []byte
	names []string // names by item, made before the loop
	uid   int      // the user and group chown gives the files
	gid   int
	in    int64 // summed time inside the calls
	err   error
}

// timed issues one call and adds its time to f.in; the first error is kept.
func (f *floorLoop) timed(call func() error) {
	t0 := now()
	err := call()
	f.in += now() - t0
	if err != nil && f.err == nil {
		f.err = err
	}
}

func fileName(dir string, i int) string { return dir + "/f" + strconv.Itoa(i) }

// callScenarios are the calls metadata-heavy jobs make (tar, rsync, git checkout, a
// small-file benchmark).
var callScenarios = []callScenario{
	{name: "create-close", calls: 2, record: func(c *callRecorder, i int) {
		name := fileName("c", i)
		c.fh++
		fh := c.fh
		c.call(lookupReq(name, syscall.ENOENT, 0), callReq{trace.OpCreate, name, func(e *trace.Event) {
			e.Handle, e.Flags, e.Mode = fh, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, unix.S_IFREG|0o644
		}})
		c.call(callReq{trace.OpFlush, name, func(e *trace.Event) { e.Handle = fh }},
			callReq{trace.OpRelease, name, func(e *trace.Event) { e.Handle = fh }})
	}, floor: func(f *floorLoop, i int) {
		var fd int
		f.timed(func() (err error) {
			fd, err = unix.Openat(f.dir, f.names[i], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			return err
		})
		f.timed(func() error { return unix.Close(fd) })
	}},
	{name: "stat", calls: 1, record: func(c *callRecorder, i int) {
		c.call(lookupReq(fileName("s", i), 0, unix.S_IFREG|0o644))
	}, floor: func(f *floorLoop, i int) {
		var st unix.Stat_t
		f.timed(func() error { return unix.Fstatat(f.dir, f.names[i], &st, unix.AT_SYMLINK_NOFOLLOW) })
	}},
	{name: "chmod", calls: 1, record: func(c *callRecorder, i int) {
		name := fileName("a", i)
		c.call(lookupReq(name, 0, unix.S_IFREG|0o644), callReq{trace.OpSetattr, name, func(e *trace.Event) {
			e.Flags, e.Mode = trace.SetattrMode, 0o640
		}})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { return unix.Fchmodat(f.dir, f.names[i], 0o640, 0) })
	}},
	{name: "chown", calls: 1, record: func(c *callRecorder, i int) {
		name := fileName("a", i)
		c.call(lookupReq(name, 0, unix.S_IFREG|0o644), callReq{trace.OpSetattr, name, func(e *trace.Event) {
			e.Flags = trace.SetattrUID | trace.SetattrGID
		}})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error {
			return unix.Fchownat(f.dir, f.names[i], f.uid, f.gid, unix.AT_SYMLINK_NOFOLLOW)
		})
	}},
	{name: "utimes", calls: 1, record: func(c *callRecorder, i int) {
		name := fileName("a", i)
		c.call(lookupReq(name, 0, unix.S_IFREG|0o644), callReq{trace.OpSetattr, name, func(e *trace.Event) {
			e.Flags = trace.SetattrAtime | trace.SetattrMtime | trace.SetattrAtimeNow | trace.SetattrMtimeNow
		}})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { return unix.UtimesNanoAt(f.dir, f.names[i], nil, unix.AT_SYMLINK_NOFOLLOW) })
	}},
	{name: "unlink", calls: 1, record: func(c *callRecorder, i int) {
		name := fileName("u", i)
		c.call(lookupReq(name, 0, unix.S_IFREG|0o644), callReq{trace.OpUnlink, name, nil})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { return unix.Unlinkat(f.dir, f.names[i], 0) })
	}},
	{name: "mkdir", calls: 1, record: func(c *callRecorder, i int) {
		name := "m/d" + strconv.Itoa(i)
		c.call(lookupReq(name, syscall.ENOENT, 0), callReq{trace.OpMkdir, name, func(e *trace.Event) { e.Mode = unix.S_IFDIR | 0o755 }})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { return unix.Mkdirat(f.dir, f.names[i], 0o755) })
	}},
	{name: "rename", calls: 1, record: func(c *callRecorder, i int) {
		from, to := fileName("r", i), "r/g"+strconv.Itoa(i)
		c.call(lookupReq(from, 0, unix.S_IFREG|0o644), lookupReq(to, syscall.ENOENT, 0),
			callReq{trace.OpRename, from, func(e *trace.Event) { e.Path2 = c.b.Path(to) }})
	}, floor: func(f *floorLoop, i int) {
		to := "r/g" + f.names[i][len("r/f"):]
		f.timed(func() error { return unix.Renameat(f.dir, f.names[i], f.dir, to) })
	}},
	{name: "readdir", calls: 4, record: func(c *callRecorder, i int) {
		// A directory of 8 entries, listed whole: open, getdents, getdents (end), close.
		name := "l/d" + strconv.Itoa(i%16)
		c.fh++
		fh := c.fh
		c.call(lookupReq(name, 0, unix.S_IFDIR|0o755), callReq{trace.OpOpendir, name, func(e *trace.Event) {
			e.Handle, e.Flags = fh, unix.O_RDONLY|unix.O_DIRECTORY
		}})
		c.call(callReq{trace.OpReaddirplus, name, func(e *trace.Event) { e.Handle, e.Size, e.Ret = fh, 4096, 1616 }})
		c.call(callReq{trace.OpReaddirplus, name, func(e *trace.Event) { e.Handle, e.Offset, e.Size = fh, 10, 4096 }})
		c.call(callReq{trace.OpReleasedir, name, func(e *trace.Event) { e.Handle = fh }})
	}, floor: func(f *floorLoop, i int) {
		var fd int
		f.timed(func() (err error) {
			fd, err = unix.Openat(f.dir, f.names[i], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			return err
		})
		for range 2 {
			f.timed(func() error { _, err := unix.Getdents(fd, f.buf[:4096]); return err })
		}
		f.timed(func() error { return unix.Close(fd) })
	}},
	{name: "read-4k", calls: 1, record: func(c *callRecorder, i int) {
		c.call(callReq{trace.OpRead, "data", func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = 1<<40, int64(i%256)*4096, 4096, 4096
		}})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { _, err := unix.Pread(f.fd, f.buf[:4096], int64(i%256)*4096); return err })
	}},
	{name: "write-4k", calls: 1, record: func(c *callRecorder, i int) {
		c.call(callReq{trace.OpWrite, "data", func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = 1<<40, int64(i%256)*4096, 4096, 4096
		}})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { _, err := unix.Pwrite(f.fd, f.buf[:4096], int64(i%256)*4096); return err })
	}},
	{name: "write-fsync", calls: 2, record: func(c *callRecorder, i int) {
		c.call(callReq{trace.OpWrite, "data", func(e *trace.Event) {
			e.Handle, e.Offset, e.Size, e.Ret = 1<<40, int64(i%256)*4096, 4096, 4096
		}})
		c.call(callReq{trace.OpFsync, "data", func(e *trace.Event) { e.Handle, e.Flags = 1<<40, trace.FsyncDatasync }})
	}, floor: func(f *floorLoop, i int) {
		f.timed(func() error { _, err := unix.Pwrite(f.fd, f.buf[:4096], int64(i%256)*4096); return err })
		f.timed(func() error { return unix.Fdatasync(f.fd) })
	}},
}

// callTrace is the recorded trace of n items of sc. The data scenarios' file "data"
// (1 MiB) is opened before the items and closed after them; the namespace scenarios'
// files and directories exist before the trace when the items use them.
func callTrace(tb testing.TB, sc callScenario, n int) []byte {
	b := tracetest.NewWithHeader(tb, trace.Header{Kind: "record", Target: trace.Target{Path: "/traced", FSType: "ext4"},
		FUSE: trace.FUSEOptions{Cache: "none"}, Legs: trace.LegsKernel})
	c := &callRecorder{b: b, tid: callTid}
	switch sc.name {
	case "read-4k", "write-4k", "write-fsync":
		b.W.AddFile(trace.File{Path: b.Path("data"), Type: trace.TypeFile, Mode: 0o644, Size: 1 << 20})
		c.call(lookupReq("data", 0, unix.S_IFREG|0o644), callReq{trace.OpOpen, "data", func(e *trace.Event) {
			e.Handle, e.Flags = 1<<40, unix.O_RDWR
		}})
	case "stat", "unlink", "rename", "chmod", "chown", "utimes":
		dir := sc.name[:1]
		if sc.name[0] == 'c' || sc.name == "utimes" {
			dir = "a"
		}
		for i := range n {
			b.W.AddFile(trace.File{Path: b.Path(fileName(dir, i)), Type: trace.TypeFile, Mode: 0o644})
		}
	case "readdir":
		for d := range 16 {
			for k := range 8 {
				b.W.AddFile(trace.File{Path: b.Path(fmt.Sprintf("l/d%d/e%d", d, k)), Type: trace.TypeFile, Mode: 0o644})
			}
		}
	case "create-close", "mkdir":
		dir := map[string]string{"create-close": "c", "mkdir": "m"}[sc.name]
		b.W.AddFile(trace.File{Path: b.Path(dir), Type: trace.TypeDir, Mode: 0o755})
	}
	for i := range n {
		sc.record(c, i)
	}
	if strings.HasSuffix(sc.name, "4k") || sc.name == "write-fsync" {
		c.call(callReq{trace.OpFlush, "data", func(e *trace.Event) { e.Handle = 1 << 40 }},
			callReq{trace.OpRelease, "data", func(e *trace.Event) { e.Handle = 1 << 40 }})
	}
	return b.Bytes()
}

// floorNames are the names the floor loop of sc uses, by item.
func floorNames(sc callScenario, n int) []string {
	names := make([]string, n)
	for i := range names {
		switch sc.name {
		case "create-close":
			names[i] = fileName("c", i)
		case "stat", "unlink", "rename":
			names[i] = fileName(sc.name[:1], i)
		case "chmod", "chown", "utimes":
			names[i] = fileName("a", i)
		case "mkdir":
			names[i] = "m/d" + strconv.Itoa(i)
		case "readdir":
			names[i] = "l/d" + strconv.Itoa(i%16)
		}
	}
	return names
}

// callCostDirs returns the file systems to measure on, by name: IOTAP_CALLCOST_DIRS
// ("tmpfs=/dev/shm,ext4=/mnt/img"), else /dev/shm (when it is a tmpfs) and the test's
// temporary directory, named by its file system type.
func callCostDirs(tb testing.TB) [][2]string {
	if v := os.Getenv("IOTAP_CALLCOST_DIRS"); v != "" {
		var dirs [][2]string
		for _, kv := range strings.Split(v, ",") {
			k, d, ok := strings.Cut(kv, "=")
			if !ok {
				tb.Fatalf("IOTAP_CALLCOST_DIRS: %q is not name=dir", kv)
			}
			dirs = append(dirs, [2]string{k, d})
		}
		return dirs
	}
	var dirs [][2]string
	if shm := shmBase(tb); shm != "" {
		dirs = append(dirs, [2]string{"tmpfs", shm})
	}
	tmp := os.TempDir()
	var st unix.Statfs_t
	name := "tmp"
	if unix.Statfs(tmp, &st) == nil {
		switch st.Type {
		case unix.EXT4_SUPER_MAGIC:
			name = "ext4"
		case unix.TMPFS_MAGIC:
			name = "tmp-tmpfs"
		}
	}
	return append(dirs, [2]string{name, tmp})
}

// callCostItems is the number of items per run (IOTAP_CALLCOST_ITEMS, default 4000).
func callCostItems(tb testing.TB) int {
	n := 4000
	if v := os.Getenv("IOTAP_CALLCOST_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			tb.Fatalf("IOTAP_CALLCOST_ITEMS=%q: want a positive count", v)
		}
	}
	return n
}

// prepared derives sc's starting state from data and makes it in a new directory under
// base with plain system calls (no openat2, so that the floor runs under valgrind). With
// keep, the directory is left behind when the test ends (the caller removes it: the
// counts taken of a run then leave out the removal).
func prepared(tb testing.TB, base string, data []byte, keep bool) (string, *Dir) {
	var root string
	var d *Dir
	if keep {
		var err error
		root, err = os.MkdirTemp(base, "iotap-callcost-")
		must(tb, err)
		d, err = OpenDir(root)
		must(tb, err)
		tb.Cleanup(func() { _ = d.Close() })
	} else {
		root, d = target(tb, base)
	}
	st, err := DeriveState(tracetest.Reader(tb, data), PlanOptions{})
	must(tb, err)
	for _, e := range st.Entries {
		p := root + "/" + e.Name
		switch e.Type {
		case trace.TypeDir:
			must(tb, os.Mkdir(p, 0o755))
		default:
			must(tb, os.WriteFile(p, make([]byte, e.Size), 0o644))
		}
	}
	return root, d
}

// callCost is what one run of a scenario measured.
type callCost struct {
	wall, in, cpu time.Duration // the span, the summed time in the calls, the process's CPU time
	mallocs       uint64
}

// callCostModes are the ways a scenario's calls are issued: the floor loop, and replays.
var callCostModes = []string{"floor", "replay-afap", "replay-think"}

// nullBackend does nothing and succeeds: replayed onto it (modes null-afap, null-think), a
// scenario costs only the replayer's own work, which valgrind can count (valgrind 3.19
// does not know openat2, which Dir needs).
type nullBackend struct{}

func (nullBackend) Target() trace.Target                  { return trace.Target{Path: "null"} }
func (nullBackend) IsEmpty(context.Context) (bool, error) { return true, nil }
func (nullBackend) Reset(context.Context) error           { return nil }
func (nullBackend) Close() error                          { return nil }
func (nullBackend) BeginPhase(string)                     {}
func (nullBackend) Lstat(context.Context, string) (Attr, error) {
	return Attr{Mode: unix.S_IFREG | 0o644}, nil
}
func (nullBackend) Access(context.Context, string, uint32) error                  { return nil }
func (nullBackend) Statfs(context.Context) error                                  { return nil }
func (nullBackend) Mkdir(context.Context, string, uint32) error                   { return nil }
func (nullBackend) Mknod(context.Context, string, uint32) error                   { return nil }
func (nullBackend) Remove(context.Context, string) error                          { return nil }
func (nullBackend) Rmdir(context.Context, string) error                           { return nil }
func (nullBackend) Rename(context.Context, string, string, uint32) error          { return nil }
func (nullBackend) Link(context.Context, string, string) error                    { return nil }
func (nullBackend) Symlink(context.Context, string, string) error                 { return nil }
func (nullBackend) Readlink(_ context.Context, _ string, b []byte) (int, error)   { return len(b), nil }
func (nullBackend) Truncate(context.Context, string, int64) error                 { return nil }
func (nullBackend) Chmod(context.Context, string, uint32) error                   { return nil }
func (nullBackend) Chown(context.Context, string) error                           { return nil }
func (nullBackend) Utimes(context.Context, string) error                          { return nil }
func (nullBackend) Getxattr(context.Context, string, string, []byte) (int, error) { return 0, nil }
func (nullBackend) Listxattr(context.Context, string, []byte) (int, error)        { return 0, nil }
func (nullBackend) Setxattr(context.Context, string, string, []byte, int) error   { return nil }
func (nullBackend) Removexattr(context.Context, string, string) error             { return nil }
func (nullBackend) Open(context.Context, string, int, uint32) (File, error)       { return nullFile{}, nil }

type nullFile struct{}

func (nullFile) ReadAt(_ context.Context, p []byte, _ int64) (int, error)  { return len(p), nil }
func (nullFile) WriteAt(_ context.Context, p []byte, _ int64) (int, error) { return len(p), nil }
func (nullFile) ReadDir(context.Context, []byte, int64) (int, error)       { return 0, nil }
func (nullFile) Sync(context.Context, bool) error                          { return nil }
func (nullFile) Truncate(context.Context, int64) error                     { return nil }
func (nullFile) Stat(context.Context) (Attr, error)                        { return Attr{}, nil }
func (nullFile) Allocate(context.Context, uint32, int64, int64) error      { return nil }
func (nullFile) Seek(context.Context, int64, int) (int64, error)           { return 0, nil }
func (nullFile) Lock(context.Context, LockCmd, int16, int64, int64) error  { return nil }
func (nullFile) Close(context.Context) error                               { return nil }

// runCallCost issues n items of sc (trace data) on a starting state made under base, in
// mode (callCostModes, or "setup": only make the starting state).
func runCallCost(tb testing.TB, base string, sc callScenario, data []byte, n int, mode string, keep bool) callCost {
	trace.CalibrateClock()
	var root string
	var b Backend = nullBackend{}
	if !strings.HasPrefix(mode, "null-") {
		root, b = prepared(tb, base, data, keep)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	m0 := ms.Mallocs
	var c callCost
	switch mode {
	case "setup", "null-setup":
		if mode == "setup" {
			openFloor(tb, root, sc, n).close() // as the floor does before its loop
		}
		return c
	case "floor":
		f := openFloor(tb, root, sc, n)
		defer f.close()
		c0, t0 := processCPU(), now()
		for i := range n {
			sc.floor(f, i)
		}
		c.wall, c.cpu, c.in = time.Duration(now()-t0), processCPU()-c0, time.Duration(f.in)
		if f.err != nil {
			tb.Fatalf("floor: %v", f.err)
		}
	case "replay-afap", "replay-think", "null-afap", "null-think":
		tm := TimingAFAP
		if strings.HasSuffix(mode, "-think") {
			tm = TimingThink
		}
		w, err := trace.NewWriter(io.Discard, trace.Header{Kind: "replay"}, trace.WriterOptions{})
		must(tb, err)
		c0 := processCPU()
		sum, err := Run(context.Background(), tracetest.Reader(tb, data), b, w, Options{Timing: tm, Workers: 1})
		must(tb, err)
		must(tb, w.Close())
		c.cpu = processCPU() - c0
		if sum.Divergences != 0 || sum.ReplayedOps == 0 {
			tb.Fatalf("replayed %d ops, %d divergences: %v", sum.ReplayedOps, sum.Divergences, sum.Examples)
		}
		c.wall, c.in = sum.ReplaySpan, sum.ReplayIO
	default:
		tb.Fatalf("unknown mode %q", mode)
	}
	runtime.ReadMemStats(&ms)
	c.mallocs = ms.Mallocs - m0
	return c
}

// BenchmarkCallCost measures the replayer's cost per call against the floor (see above).
func BenchmarkCallCost(b *testing.B) {
	n := callCostItems(b)
	for _, fs := range callCostDirs(b) {
		for _, sc := range callScenarios {
			data := callTrace(b, sc, n)
			calls := float64(n * sc.calls)
			for _, mode := range callCostModes {
				b.Run(fs[0]+"/"+sc.name+"/"+mode, func(b *testing.B) {
					var sum callCost
					for range b.N {
						c := runCallCost(b, fs[1], sc, data, n, mode, false)
						sum.wall += c.wall
						sum.in += c.in
						sum.cpu += c.cpu
						sum.mallocs += c.mallocs
					}
					N := calls * float64(b.N)
					b.ReportMetric(float64(sum.wall)/N, "wall-ns/call")
					b.ReportMetric(float64(sum.in)/N, "in-ns/call")
					b.ReportMetric(float64(sum.cpu)/N, "cpu-ns/call")
					b.ReportMetric(float64(sum.mallocs)/N, "allocs/call")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
	logLoad(b)
}

// TestCallCostOnce runs one scenario once, for instruction and system call counts taken
// from outside (bench/replaycost.sh runs it under valgrind and perf): IOTAP_CALLCOST_ONCE
// is "DIR:SCENARIO:MODE", MODE one of callCostModes, "setup" (the starting state only,
// whose counts the script subtracts from theirs), or null-afap, null-think (onto
// nullBackend) and null-setup (the trace only); the item count is IOTAP_CALLCOST_ITEMS's.
// The directories it makes under DIR are left behind: the script removes them.
func TestCallCostOnce(t *testing.T) {
	v := os.Getenv("IOTAP_CALLCOST_ONCE")
	if v == "" {
		t.Skip("IOTAP_CALLCOST_ONCE is not set (bench/replaycost.sh sets it)")
	}
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		t.Fatalf("IOTAP_CALLCOST_ONCE=%q: want DIR:SCENARIO:MODE", v)
	}
	n := callCostItems(t)
	for _, sc := range callScenarios {
		if sc.name == parts[1] {
			c := runCallCost(t, parts[0], sc, callTrace(t, sc, n), n, parts[2], true)
			fmt.Printf("callcost calls %d mallocs %d\n", n*sc.calls, c.mallocs)
			return
		}
	}
	t.Fatalf("no scenario %q", parts[1])
}

// openFloor opens the floor loop's root (and data file) under root.
func openFloor(tb testing.TB, root string, sc callScenario, n int) *floorLoop {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(tb, err)
	f := &floorLoop{dir: dir, fd: -1, buf: make([]byte, 1<<16), names: floorNames(sc, n), uid: os.Geteuid(), gid: os.Getegid()}
	if strings.HasSuffix(sc.name, "4k") || sc.name == "write-fsync" {
		f.fd, err = unix.Openat(dir, "data", unix.O_RDWR|unix.O_CLOEXEC, 0)
		must(tb, err)
	}
	return f
}

func (f *floorLoop) close() {
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
	}
	_ = unix.Close(f.dir)
}

// TestCallScenarios checks that each scenario's trace replays its calls without
// divergence, one replayed op per system call the floor makes, and that the floor's calls
// succeed on the same starting state.
func TestCallScenarios(t *testing.T) {
	const n = 40
	for _, sc := range callScenarios {
		t.Run(sc.name, func(t *testing.T) {
			data := callTrace(t, sc, n)
			_, d := prepared(t, "", data, false)
			sum, err := Run(context.Background(), tracetest.Reader(t, data), d, nil, Options{Timing: TimingAFAP})
			must(t, err)
			extra := 0
			if strings.HasSuffix(sc.name, "4k") || sc.name == "write-fsync" {
				extra = 2 // the data file's open and close
			}
			if sum.Divergences != 0 || sum.ReplayedOps != uint64(n*sc.calls+extra) || sum.ImplicitOpens != 0 {
				t.Fatalf("replayed %d ops (want %d), %d divergences, %d implicit opens: %v",
					sum.ReplayedOps, n*sc.calls+extra, sum.Divergences, sum.ImplicitOpens, sum.Examples)
			}
			root, _ := prepared(t, "", data, false)
			f := openFloor(t, root, sc, n)
			defer f.close()
			for i := range n {
				sc.floor(f, i)
			}
			if f.err != nil {
				t.Fatalf("floor: %v", f.err)
			}
		})
	}
}
