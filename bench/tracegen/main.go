// Command tracegen writes synthetic traces for the export and summary benchmarks
// (bench/export-scale.sh): a job's requests over many files from several threads, with a
// process table, host and Slurm labels, in the trace format iotap records. Not part of
// iotap.
//
//	tracegen -events 10000000 -o big.iotap
//	tracegen -events 10000 -traces 1000 -o dir/        # dir/t0000.iotap ... (hosts h00..h15, jobs 0..99)
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/iotap/iotap/trace"
)

func main() {
	events := flag.Int("events", 1_000_000, "requests per trace")
	traces := flag.Int("traces", 1, "traces to write (more than one: -o is a directory)")
	files := flag.Int("files", 2000, "files per trace")
	threads := flag.Int("threads", 8, "threads per trace")
	out := flag.String("o", "trace.iotap", "output `file`, or directory with -traces")
	flag.Parse()
	if *traces > 1 {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fail(err)
		}
	}
	for i := range *traces {
		p := *out
		if *traces > 1 {
			p = filepath.Join(*out, fmt.Sprintf("t%04d.iotap", i))
		}
		if err := write(p, i, *events, *files, *threads); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tracegen:", err)
	os.Exit(1)
}

// write writes trace number n: events requests over files paths from threads threads. Each
// thread opens a file, reads (or writes) it in 64 KiB requests, closes it, and looks up the
// next; one lookup in 50 fails.
func write(path string, n, events, files, threads int) error {
	h := trace.Header{
		Kind: "record", Hostname: fmt.Sprintf("h%02d", n%16), WallStart: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n) * time.Minute),
		IotapVersion: "tracegen", Target: trace.Target{Path: "/data", FSType: "fuse.s3fs", Source: "s3fs"},
		Labels: []trace.Label{{Key: "SLURM_JOB_ID", Value: strconv.Itoa(n / 10)}, {Key: "pipeline", Value: "bench"}},
	}
	w, err := trace.Create(path, h, trace.WriterOptions{BufferEvents: 1 << 20})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	dir := w.Path(trace.RootPath, "data")
	ids := make([]uint32, files)
	for i := range ids {
		ids[i] = w.Path(dir, fmt.Sprintf("f%05d.bin", i))
	}
	for t := range threads {
		tid := uint32(1000 + t)
		w.AddProcess(trace.Process{Tid: tid, Pid: 1000, PPid: 1, Comm: "worker", Exe: "/usr/bin/worker", Cmdline: []string{"worker", "-n", strconv.Itoa(t)}})
	}
	type thread struct {
		clock  int64
		fh     uint64
		file   uint32
		off    int64
		left   int
		writes bool
	}
	ts := make([]thread, threads)
	var fh uint64
	for i := 0; i < events; {
		k := rng.IntN(threads)
		t := &ts[k]
		tid := uint32(1000 + k)
		ev := trace.Event{Tid: tid, Pid: 1000, Uid: 1000, Gid: 1000, Start: t.clock}
		switch {
		case t.fh == 0:
			t.file = ids[rng.IntN(files)]
			ev.Op, ev.Path, ev.Dur, ev.Mode = trace.OpLookup, t.file, 5000+rng.Int64N(20000), 0o100644
			if rng.IntN(50) == 0 {
				ev.Errno = 2
			} else {
				w.Append(&ev)
				i++
				fh++
				t.fh, t.off, t.left, t.writes = fh, 0, 1+rng.IntN(32), rng.IntN(4) == 0
				ev = trace.Event{Tid: tid, Pid: 1000, Uid: 1000, Gid: 1000, Start: t.clock + ev.Dur, Op: trace.OpOpen, Path: t.file, Handle: t.fh, Dur: 10000 + rng.Int64N(50000)}
			}
		case t.left == 0:
			ev.Op, ev.Path, ev.Handle, ev.Dur = trace.OpRelease, t.file, t.fh, 2000
			t.fh = 0
		default:
			ev.Op, ev.Path, ev.Handle, ev.Offset, ev.Size, ev.Ret = trace.OpRead, t.file, t.fh, t.off, 65536, 65536
			if t.writes {
				ev.Op = trace.OpWrite
			}
			ev.Dur = 20000 + rng.Int64N(200000)
			t.off += 65536
			t.left--
		}
		w.Append(&ev)
		t.clock = ev.Start + ev.Dur + rng.Int64N(5000)
		i++
	}
	return w.Close()
}
