package report

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/iotap/iotap/trace"
)

// workload describes a small deterministic job for test traces.
type workload struct {
	host     string
	seed     uint64
	fstype   string
	cache    string
	labels   []trace.Label
	readMul  float64 // scales read latencies (slower storage)
	dataSets int     // dataset files read
	stall    bool    // a 300 ms read stall around t=3s
	replay   bool    // as a replay writes it: no path-walk lookups of existing files, a close as its flush
}

// genTrace writes the workload as a trace file with trace.Writer. Event times are
// synthetic and deterministic; the writer's footer carries a wall clock that reports
// do not show. It is long because it is the workload's script, phase after phase in
// time order, each a few lines that the golden reports depend on.
func genTrace(path string, wl workload) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // closed explicitly below; this only covers early returns
	kind, cache := "record", wl.cache
	if wl.replay {
		kind, cache = "replay", ""
	}
	h := trace.Header{
		Kind:         kind,
		WallStart:    time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
		Origin:       1_000_000_000,
		Hostname:     wl.host,
		IotapVersion: "test",
		Kernel:       "6.1.0-test",
		Target:       trace.Target{Path: "/data", FSType: wl.fstype, Source: "/dev/test", Mount: "/data"},
		FUSE:         trace.FUSEOptions{Cache: cache, MaxRead: 1 << 20, MaxWrite: 1 << 20},
		Command:      []string{"python3", "train.py", "--epochs", "1"},
		Labels:       wl.labels,
	}
	w, err := trace.NewWriter(f, h, trace.WriterOptions{FlushInterval: time.Hour, ChunkEvents: 1024})
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(wl.seed, 42))
	w.AddProcess(trace.Process{Tid: 100, Pid: 100, PPid: 1, Comm: "python3", Exe: "/usr/bin/python3.11", Cmdline: []string{"python3", "train.py", "--epochs", "1"}})
	w.AddProcess(trace.Process{Tid: 200, Pid: 200, PPid: 100, Comm: "ckpt-writer", Exe: "/usr/bin/python3.11", Cmdline: []string{"python3", "-m", "ckpt.writer", "--dir", "ckpt"}})
	w.AddProcess(trace.Process{Tid: 300, Pid: 300, PPid: 1, Comm: "ls", Exe: "/usr/bin/ls", Cmdline: []string{"ls", "-l", "dataset"}})

	lat := func(base, spread float64) int64 { return int64(base + rng.ExpFloat64()*spread) }
	root := trace.RootPath
	dataDir := w.Path(root, "dataset")
	ckDir := w.Path(root, "ckpt")
	var t int64 = 10_000_000 // 10 ms after origin
	var handle uint64
	flushed := map[uint64]bool{}
	ev := func(e trace.Event) {
		if wl.replay {
			// Replay folds lookups into the call they belong to and closes with one call,
			// written as the flush when there was one.
			if (e.Op == trace.OpRelease && flushed[e.Handle]) || (e.Op == trace.OpLookup && e.Errno == 0) {
				return
			}
			flushed[e.Handle] = e.Op == trace.OpFlush
		}
		e.Start = t
		t += e.Dur + int64(rng.IntN(20_000))
		w.Append(&e)
	}

	// Phase 1: ls walks the dataset directory, with failed lookups.
	ev(trace.Event{Op: trace.OpLookup, Path: dataDir, Dur: lat(8_000, 4_000), Tid: 300, Pid: 300, Mode: 0o40755})
	handle++
	dh := handle
	ev(trace.Event{Op: trace.OpOpendir, Path: dataDir, Handle: dh, Dur: lat(6_000, 2_000), Tid: 300, Pid: 300})
	for i := 0; i < 3; i++ {
		ev(trace.Event{Op: trace.OpReaddirplus, Path: dataDir, Handle: dh, Size: 4096, Ret: 4000, Dur: lat(40_000, 20_000), Tid: 300, Pid: 300})
	}
	ev(trace.Event{Op: trace.OpReleasedir, Path: dataDir, Handle: dh, Dur: lat(2_000, 1_000), Tid: 300, Pid: 300})
	files := make([]uint32, wl.dataSets)
	for i := range files {
		files[i] = w.Path(dataDir, "shard-"+string(rune('a'+i))+".bin")
		ev(trace.Event{Op: trace.OpLookup, Path: files[i], Dur: lat(7_000, 5_000), Tid: 300, Pid: 300, Ret: 4 << 20, Mode: 0o100644})
		ev(trace.Event{Op: trace.OpGetattr, Path: files[i], Dur: lat(3_000, 2_000), Tid: 300, Pid: 300})
	}
	for i := 0; i < 20; i++ {
		p := w.Path(dataDir, "missing-"+string(rune('a'+i%26)))
		ev(trace.Event{Op: trace.OpLookup, Path: p, Dur: lat(5_000, 3_000), Errno: 2, Tid: 300, Pid: 300})
	}

	// Phase 2: python reads every shard sequentially in 128 KiB requests, then re-reads the
	// head of each (a cache would help), with one stall.
	for i, fp := range files {
		handle++
		h := handle
		ev(trace.Event{Op: trace.OpOpen, Path: fp, Handle: h, Dur: lat(15_000, 10_000), Tid: 100, Pid: 100})
		for off := int64(0); off < 4<<20; off += 128 << 10 {
			d := int64(float64(lat(120_000, 60_000)) * wl.readMul)
			if wl.stall && i == 1 && off == 1<<20 {
				d = 300_000_000
			}
			ev(trace.Event{Op: trace.OpRead, Path: fp, Handle: h, Offset: off, Size: 128 << 10, Ret: 128 << 10, Dur: d, Tid: 100, Pid: 100})
			t += 15_000_000 // the job computes on each block
		}
		for k := 0; k < 8; k++ {
			off := int64(rng.IntN(64)) * 4096
			d := int64(float64(lat(30_000, 10_000)) * wl.readMul)
			ev(trace.Event{Op: trace.OpRead, Path: fp, Handle: h, Offset: off, Size: 4096, Ret: 4096, Dur: d, Tid: 100, Pid: 100})
		}
		ev(trace.Event{Op: trace.OpFlush, Path: fp, Handle: h, Dur: lat(2_000, 1_000), Tid: 100, Pid: 100})
		ev(trace.Event{Op: trace.OpRelease, Path: fp, Handle: h, Dur: lat(2_000, 1_000), Tid: 100, Pid: 100})
	}
	// A config file opened and never read.
	cfg := w.Path(root, "config.yaml")
	handle++
	ev(trace.Event{Op: trace.OpLookup, Path: cfg, Dur: lat(6_000, 2_000), Tid: 100, Pid: 100, Ret: 512, Mode: 0o100644})
	ev(trace.Event{Op: trace.OpOpen, Path: cfg, Handle: handle, Dur: lat(12_000, 5_000), Tid: 100, Pid: 100})
	ev(trace.Event{Op: trace.OpRelease, Path: cfg, Handle: handle, Dur: lat(2_000, 1_000), Tid: 100, Pid: 100})

	// Phase 3: the checkpoint writer creates a file and writes 2 MiB in 1 MiB and 4 KiB
	// pieces, then fsyncs it.
	ck := w.Path(ckDir, "model.pt")
	handle++
	ev(trace.Event{Op: trace.OpCreate, Path: ck, Handle: handle, Dur: lat(40_000, 20_000), Tid: 200, Pid: 200, Mode: 0o100644})
	off := int64(0)
	for k := 0; k < 2; k++ {
		ev(trace.Event{Op: trace.OpWrite, Path: ck, Handle: handle, Offset: off, Size: 1 << 20, Ret: 1 << 20, Dur: lat(900_000, 300_000), Tid: 200, Pid: 200})
		off += 1 << 20
	}
	for k := 0; k < 16; k++ {
		ev(trace.Event{Op: trace.OpWrite, Path: ck, Handle: handle, Offset: off, Size: 4096, Ret: 4096, Dur: lat(20_000, 10_000), Tid: 200, Pid: 200})
		off += 4096
	}
	ev(trace.Event{Op: trace.OpWrite, Path: ck, Handle: handle, Offset: 0, Size: 4096, Ret: 4096, Dur: lat(20_000, 10_000), Tid: 200, Pid: 200})
	ev(trace.Event{Op: trace.OpFsync, Path: ck, Handle: handle, Dur: lat(8_000_000, 2_000_000), Tid: 200, Pid: 200})
	ev(trace.Event{Op: trace.OpFlush, Path: ck, Handle: handle, Dur: lat(2_000, 1_000), Tid: 200, Pid: 200})
	ev(trace.Event{Op: trace.OpRelease, Path: ck, Handle: handle, Dur: lat(2_000, 1_000), Tid: 200, Pid: 200})
	// A write that fails: disk full.
	ev(trace.Event{Op: trace.OpWrite, Path: ck, Handle: 999, Offset: off, Size: 4096, Dur: lat(5_000, 1_000), Errno: 28, Tid: 200, Pid: 200})
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// testWorkloads are the committed traces in testdata/report.
var testWorkloads = map[string]workload{
	"node1.iotap": {host: "node1", seed: 1, fstype: "ext4", cache: "none", readMul: 1, dataSets: 6, stall: true,
		labels: []trace.Label{{Key: "job", Value: "42"}, {Key: "rank", Value: "0"}}},
	"node2.iotap": {host: "node2", seed: 2, fstype: "ext4", cache: "none", readMul: 1, dataSets: 6,
		labels: []trace.Label{{Key: "job", Value: "42"}, {Key: "rank", Value: "1"}}},
	"s3fs.iotap": {host: "node1", seed: 1, fstype: "fuse.s3fs", cache: "none", readMul: 3, dataSets: 6, stall: true,
		labels: []trace.Label{{Key: "job", Value: "43"}}},
	"replay.iotap":     {host: "node1", seed: 1, fstype: "xfs", readMul: 0.5, dataSets: 6, stall: true, replay: true},
	"other-work.iotap": {host: "node1", seed: 3, fstype: "ext4", cache: "none", readMul: 1, dataSets: 2},
}

func testdataDir() string { return filepath.Join("..", "testdata", "report") }
