package fusefs

import (
	"fmt"
	"log"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/iotap/iotap/fusefs/internal/loopback"
	"github.com/iotap/iotap/fusefs/internal/servicetime"
	"github.com/iotap/iotap/trace"
)

// CacheMode selects what the kernel caches in front of the layer.
type CacheMode string

// Cache modes.
const (
	// CacheNone: direct I/O on every open and 0 s entry/attr/negative timeouts. Every
	// application read, write and stat reaches the layer at its own size (replay needs this).
	CacheNone CacheMode = "none"
	// CacheKernel: page cache (kept across opens), write-back caching and 1 s
	// attribute/entry caching, as on a kernel file system; the trace shows what reached the
	// backend (writes arrive as the kernel flushes dirty pages, attributed to the opener).
	CacheKernel CacheMode = "kernel"
)

// Defaults.
const (
	DefaultMaxWrite      = 1 << 20
	DefaultMaxBackground = 64
	DefaultFsName        = "iotap"
	kernelCacheTimeout   = time.Second
)

// DefaultServerProcs is the GOMAXPROCS a process serving mounts should run with: one per
// four CPUs, at least one. The serving code is a small part of a request; the rest is
// system calls. Fewer Ps mean fewer cross-CPU goroutine wake-ups per request: on a 2-vCPU
// VM, GOMAXPROCS=1 served 1.3-2.2x the small-file operations and 1.23x the 4 KiB random
// reads of GOMAXPROCS=2, with no change on 1 MiB reads and writes. The price is paid by jobs
// that keep many requests in flight on storage that blocks: a goroutine in a system call
// keeps its P until the runtime takes it back (after 20 µs to 10 ms), and the requests
// waiting for it meanwhile are neither read nor answered (docs/queue-depth.md). It is a
// process-wide setting, so Mount leaves it to the caller.
func DefaultServerProcs() int { return max(1, runtime.NumCPU()/4) }

// Options configure Mount.
type Options struct {
	Cache      CacheMode // default CacheNone
	MaxWrite   int       // default 1 MiB (the kernel caps it at max_pages_limit pages)
	AllowOther bool      // if set, also sets default_permissions
	Debug      bool      // go-fuse debug output
	Logger     *slog.Logger
	// Filters (empty = record everything): events whose path matches none of Include or any
	// of Exclude (path.Match globs on the path relative to root, on any leading directory of
	// it, or on any path element) are not recorded but still served.
	Include, Exclude []string
	UIDs             []uint32 // record only these callers (fs uid) when non-empty
	Comms            []string // record only these commands when non-empty
	// IgnoreSelf serves the requests of the process serving the mount without recording
	// them: a recorder that enters the job's directory before it starts the job, or checks
	// it, is not part of the job, and its requests would stand in the trace before the
	// job's (a replay would replay them, and the time between them).
	IgnoreSelf bool
	FsName     string // shown in /proc/mounts, default "iotap"
	// CostByOp also sums the layer's own work per operation (Server.CostByOp), for
	// benchmarks. It times every request instead of one in 8 (the layer's timing of
	// itself has a long tail, a request preempted mid-way, which a sample of one operation
	// magnifies): three more clock reads and two atomic adds per request.
	CostByOp bool
	// Passthrough lets kernel FUSE passthrough serve the reads and writes of open regular
	// files from their backing files, in the application's thread, without the layer: the
	// layer then neither serves nor records them (a recorder times them in the kernel,
	// package legs, and hands them to Server.KernelCall). It needs root and a kernel with
	// FUSE passthrough, and Cache CacheNone (passthrough excludes write-back caching). An
	// open whose backing file the kernel refuses, or a set-ID file, is served and recorded
	// by the layer with direct I/O (Server.Passthrough counts them).
	Passthrough bool
	// ProbeName is a name in the mount's root (one the backend does not hold) whose
	// lookups the layer answers itself with ENOENT, unrecorded, timing its own handling
	// (Server.Probes): a process outside the job times lookups of it to measure the
	// layer's round trip (the recorder's calibration). Empty: none.
	ProbeName string
}

func (o Options) withDefaults() (Options, error) {
	switch o.Cache {
	case "":
		o.Cache = CacheNone
	case CacheNone, CacheKernel:
	default:
		return o, fmt.Errorf("fusefs: unknown cache mode %q (want %q or %q)", o.Cache, CacheNone, CacheKernel)
	}
	if o.Passthrough && o.Cache != CacheNone {
		return o, fmt.Errorf("fusefs: kernel passthrough needs cache mode %q (cache %q caches writes in the kernel, which passthrough excludes)", CacheNone, o.Cache)
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = DefaultMaxWrite
	}
	if o.FsName == "" {
		o.FsName = DefaultFsName
	}
	for _, g := range append(append([]string(nil), o.Include...), o.Exclude...) {
		if err := checkGlob(g); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (o Options) timeout() time.Duration {
	if o.Cache == CacheKernel {
		return kernelCacheTimeout
	}
	return 0
}

// TraceOptions describes the settings in the form the trace header stores.
func (o Options) TraceOptions() trace.FUSEOptions {
	o, _ = o.withDefaults()
	return trace.FUSEOptions{
		Cache:        string(o.Cache),
		MaxRead:      uint32(o.MaxWrite),
		MaxWrite:     uint32(o.MaxWrite),
		EntryTimeout: o.timeout(),
		AttrTimeout:  o.timeout(),
		DirectIO:     o.Cache == CacheNone,
		Passthrough:  o.Passthrough,
		Writeback:    o.Cache == CacheKernel,
	}
}

// fsOptions builds the go-fuse options; o must have defaults applied.
func (o Options) fsOptions() *fs.Options {
	to := o.timeout()
	entry, attr, neg := to, to, to
	mo := fuse.MountOptions{
		AllowOther:          o.AllowOther,
		MaxBackground:       DefaultMaxBackground,
		CongestionThreshold: DefaultMaxBackground * 3 / 4,
		MaxWrite:            o.MaxWrite,
		MaxReadAhead:        o.MaxWrite,
		FsName:              o.FsName,
		Name:                "iotap",
		Debug:               o.Debug,
		EnableLocks:         true,
		DirectMount:         os.Geteuid() == 0,
		// Kernel passthrough lets reads and writes bypass the layer: only when asked for.
		DisabledCapabilities: fuse.CAP_PASSTHROUGH,
		// The server drops set-user-ID and set-group-ID bits where the kernel says so
		// (package loopback), and the kernel does not ask for security.capability before
		// each write.
		ExtraCapabilities: fuse.CAP_HANDLE_KILLPRIV_V2 | asyncDIO,
	}
	if o.AllowOther {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if o.Passthrough {
		mo.DisabledCapabilities &^= fuse.CAP_PASSTHROUGH
		// A backing file may itself be on a stacked file system (overlayfs, or another
		// FUSE mount with passthrough): the kernel's limit, FILESYSTEM_MAX_STACK_DEPTH.
		mo.MaxStackDepth = maxStackDepth
	}
	switch o.Cache {
	case CacheNone:
		// Keep MAP_SHARED mmap working on direct-I/O files (kernel >= 6.6).
		mo.ExtraCapabilities |= fuse.CAP_DIRECT_IO_ALLOW_MMAP
	case CacheKernel:
		// Writes complete in the page cache and reach the layer when the kernel writes the
		// dirty pages back, in large requests.
		mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
	}
	var lg *log.Logger
	if o.Logger != nil && !o.Debug {
		// go-fuse's own warnings go to our logger; its debug trace stays on stderr.
		lg = slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn)
		mo.Logger = lg
	}
	return &fs.Options{
		// A mode of 0 reaches the kernel as 0 (go-fuse would report 0644 or 0755, and the
		// kernel's default_permissions check would run against that).
		NullPermissions: true,
		Logger:          lg,
		MountOptions:    mo,
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
	}
}

// maxStackDepth is the kernel's FILESYSTEM_MAX_STACK_DEPTH: with it, the kernel passes
// through backing files of file systems stacked once (overlayfs, FUSE with passthrough),
// and nothing stacks on the layer itself.
const maxStackDepth = 2

// asyncDIO lets the kernel keep an application's asynchronous direct I/O asynchronous
// (FUSE_ASYNC_DIO): io_uring and libaio requests on O_DIRECT files reach the layer as
// separate background requests, all in flight at once, as they reach a kernel file system.
// Without it the kernel waits for each request's reply before it sends the next, so the
// job runs at queue depth 1 and the trace cannot show the depth it used. The kernel also
// splits one large O_DIRECT request into max_read-sized requests sent together.
const asyncDIO = fuse.CAP_ASYNC_DIO

// loopbackOptions are the file system's settings for o (with defaults applied), its backend
// calls reporting their time to times (nil: untraced).
func (o Options) loopbackOptions(times *servicetime.Table) loopback.Options {
	lo := loopback.Options{ServiceTimes: times}
	switch o.Cache {
	case CacheNone:
		lo.OpenFlags = fuse.FOPEN_DIRECT_IO | parallelWrites
	case CacheKernel:
		// Like a kernel file system, a re-open keeps the cached pages; the kernel drops them
		// when it sees mtime or size change (CAP_AUTO_INVAL_DATA, on by default).
		lo.OpenFlags = fuse.FOPEN_KEEP_CACHE
		lo.Writeback = true
	}
	return lo
}

// parallelWrites lets the kernel send the writes of several threads to one direct-I/O file
// together (FOPEN_PARALLEL_DIRECT_WRITES, on every open with cache none). Without it the
// kernel holds the file's inode lock for each write's whole round trip through the layer,
// where a kernel file system holds it only while it copies the data. Appends and writes
// past the end of the file still take the lock (the kernel must know the new size).
const parallelWrites = fuse.FOPEN_PARALLEL_DIRECT_WRITES
