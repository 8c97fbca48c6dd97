// Command benchmount serves a directory through fusefs for bench/overhead.sh (untraced, or
// traced into a trace file) and generates the small-file load of the overhead table.
//
//	benchmount mount -target DIR -mount MNT [-trace FILE | -nop] [-cache none|kernel] [-passthrough] [-ready FILE]
//	                 [-cpufile FILE] [-cpuprofile FILE] [-memprofile FILE] [-costbyop]
//	benchmount smallfiles -dir DIR [-n 1000] [-size 4096]
//	benchmount interleave -dirs DIR,DIR[,...] [-n 5000] [-block 50] [-rounds 1] [-size 4096]
//	benchmount dirops -dir DIR [-n 2000] [-threads 8] [-lists 200]
//
// mount serves until SIGINT or SIGTERM and writes the ready file once the mount is up.
// With -cpufile, every SIGUSR1 makes it write its own CPU time so far and the layer's
// measurement of its own cost, "UTIME_NS STIME_NS REQUESTS IN_LAYER_NS SELF_NS",
// to FILE (a temporary file renamed over FILE, so a reader never sees a partial line). The
// figures come from getrusage(RUSAGE_SELF): microsecond resolution, every thread including
// exited ones. Their sum is the exact time on CPU; the user/system split is estimated by the
// kernel from tick samples.
// smallfiles prints one line per phase: "create|stat|read|unlink OPS_PER_SEC".
// interleave runs the same loop on several directories at once, a block of files at a time
// on each in turn, and prints each one's rates and their ratios to the first (interleave.go).
// dirops stats and lists one directory from one thread and from many at once (dirops.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/lazyfree"
	"github.com/iotap/iotap/internal/tally"
	"github.com/iotap/iotap/trace"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "mount" {
		lazyfree.Reexec() // as iotap record and iotap mount do, so both servers run alike
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchmount mount|smallfiles|interleave|dirops ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "mount":
		err = mount(os.Args[2:])
	case "smallfiles":
		err = smallFiles(os.Args[2:])
	case "interleave":
		err = interleave(os.Args[2:])
	case "dirops":
		err = dirOps(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchmount:", err)
		os.Exit(1)
	}
}

func mount(args []string) error {
	fs := flag.NewFlagSet("mount", flag.ExitOnError)
	target := fs.String("target", "", "backend directory")
	mnt := fs.String("mount", "", "mount point")
	traceFile := fs.String("trace", "", "record into this trace file (default: untraced)")
	nop := fs.Bool("nop", false, "trace into a recorder that discards everything (the layer's own cost)")
	cache := fs.String("cache", "none", "cache mode")
	ready := fs.String("ready", "", "file to create once mounted")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the serving process")
	memprofile := fs.String("memprofile", "", "write a heap profile when signalled, before unmounting")
	procs := fs.Int("procs", fusefs.DefaultServerProcs(), "GOMAXPROCS while serving (iotap's default)")
	cpufile := fs.String("cpufile", "", "on SIGUSR1, write the process's CPU time (\"utime_ns stime_ns\") to this file")
	costByOp := fs.Bool("costbyop", false, "sum the layer's own work per operation and print it on exit (traced)")
	passthrough := fs.Bool("passthrough", false, "let kernel FUSE passthrough serve reads and writes (root; -cache none)")
	_ = fs.Parse(args) // ExitOnError
	runtime.GOMAXPROCS(max(1, *procs))
	// Install the handler before the ready file exists: an unhandled SIGUSR1 would kill us.
	if *cpufile != "" {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		defer signal.Stop(usr1)
		go func() {
			for range usr1 {
				if err := writeCPU(*cpufile, served.Load()); err != nil {
					fmt.Fprintln(os.Stderr, "benchmount: cpu file:", err)
				}
			}
		}()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	o := fusefs.Options{Cache: fusefs.CacheMode(*cache), CostByOp: *costByOp, Passthrough: *passthrough}
	var rec fusefs.Recorder
	var w *trace.Writer
	if *traceFile != "" {
		h := trace.Header{Kind: "record", FUSE: o.TraceOptions()}
		var err error
		// As iotap record: the writer's encoder also feeds the live line's and the
		// summary's tally.
		var tl tally.Tally
		if w, err = trace.Create(*traceFile, h, trace.WriterOptions{Observe: tl.AddBatch}); err != nil {
			return err
		}
		rec = w
	}
	if *nop {
		rec = nopRecorder{}
	}
	srv, err := fusefs.Mount(*mnt, *target, rec, o)
	if err != nil {
		return err
	}
	served.Store(srv)
	if *ready != "" {
		if err := os.WriteFile(*ready, nil, 0o644); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		if *memprofile != "" {
			if f, err := os.Create(*memprofile); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
		for srv.Unmount() != nil { // busy: wait for the load to leave the mount
			time.Sleep(500 * time.Millisecond)
		}
	}()
	srv.Wait()
	printCostByOp(srv.CostByOp())
	if w != nil {
		w.SetLayerCost(srv.Cost().LayerCost())
		err := w.Close()
		st := w.Stats()
		fmt.Fprintf(os.Stderr, "benchmount: %d events, %d dropped, blocked %v, encoder CPU %d ns\n", st.Events, st.Dropped, st.Blocked, st.EncodeCPU.Nanoseconds())
		return err
	}
	return nil
}

// printCostByOp prints the layer's own work per operation, the most expensive in total
// first: "cost OP REQUESTS NS_PER_REQUEST SHARE_OF_ALL median MEDIAN_NS ns".
func printCostByOp(m map[trace.Op]fusefs.OpCost) {
	var total time.Duration
	ops := make([]trace.Op, 0, len(m))
	for op, c := range m {
		ops = append(ops, op)
		total += c.Self
	}
	sort.Slice(ops, func(i, j int) bool { return m[ops[i]].Self > m[ops[j]].Self })
	for _, op := range ops {
		c := m[op]
		fmt.Fprintf(os.Stderr, "cost %-12s %9d %7d ns %5.1f%%  median %6d ns\n", op, c.Requests, c.Self.Nanoseconds()/int64(c.Requests), 100*float64(c.Self)/float64(max(total, 1)), c.Median.Nanoseconds())
	}
}

// served is the mount, once there is one (the cpu file reports its own cost measurement).
var served atomic.Pointer[fusefs.Server]

// writeCPU writes the CPU time of this process (all threads, live and exited) and the
// layer's measurement of its own cost so far (zero untraced or before the mount) as
// "utime_ns stime_ns requests in_layer_ns self_ns" to path, through a temporary file
// renamed over it.
func writeCPU(path string, srv *fusefs.Server) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return fmt.Errorf("getrusage: %w", err)
	}
	var c trace.LayerCost
	if srv != nil {
		c = srv.Cost().LayerCost()
	}
	line := fmt.Sprintf("%d %d %d %d %d\n", ru.Utime.Nano(), ru.Stime.Nano(), c.Requests, c.InLayer.Nanoseconds(), c.Self.Nanoseconds())
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// nopRecorder discards everything.
type nopRecorder struct{}

func (nopRecorder) Origin() int64                  { return 0 }
func (nopRecorder) Append(*trace.Event)            {}
func (nopRecorder) Path(p uint32, n string) uint32 { return 2 }
func (nopRecorder) Raw(string) uint32              { return 3 }
func (nopRecorder) AddProcess(trace.Process)       {}
func (nopRecorder) AddFile(trace.File)             {}
func (nopRecorder) CountError()                    {}

func smallFiles(args []string) error {
	fs := flag.NewFlagSet("smallfiles", flag.ExitOnError)
	dir := fs.String("dir", "", "directory (created)")
	n := fs.Int("n", 1000, "files")
	size := fs.Int("size", 4096, "bytes per file")
	_ = fs.Parse(args) // ExitOnError
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	buf := make([]byte, *size)
	names := make([]string, *n)
	for i := range names {
		names[i] = filepath.Join(*dir, fmt.Sprintf("f%06d", i))
	}
	phase := func(name string, fn func(p string) error) error {
		t0 := time.Now()
		for _, p := range names {
			if err := fn(p); err != nil {
				return fmt.Errorf("%s %s: %w", name, p, err)
			}
		}
		fmt.Printf("%s %.0f\n", name, float64(len(names))/time.Since(t0).Seconds())
		return nil
	}
	for _, ph := range smallPhases(buf) {
		if err := phase(ph.name, ph.fn); err != nil {
			return err
		}
	}
	return nil
}

// smallPhase is one phase of the small-file loop, done to one file per call.
type smallPhase struct {
	name string
	fn   func(p string) error
}

// smallPhases are the loop's phases, in order: create and write size bytes, stat, read
// size bytes, unlink.
func smallPhases(buf []byte) []smallPhase {
	var st syscall.Stat_t
	return []smallPhase{
		{"create", func(p string) error {
			fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC|syscall.O_CLOEXEC, 0o644)
			if err != nil {
				return err
			}
			if _, err := syscall.Write(fd, buf); err != nil {
				return err
			}
			return syscall.Close(fd)
		}},
		{"stat", func(p string) error { return syscall.Stat(p, &st) }},
		{"read", func(p string) error {
			fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			if _, err := syscall.Read(fd, buf); err != nil {
				return err
			}
			return syscall.Close(fd)
		}},
		{"unlink", func(p string) error { return syscall.Unlink(p) }},
	}
}
