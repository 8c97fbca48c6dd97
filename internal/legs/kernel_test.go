package legs_test

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/legs"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/trace"
)

// kernelCase is a mount with kernel passthrough whose data calls the program times.
type kernelCase struct {
	*fusetest.Case
	rec *fusetest.MemRecorder
	t   *legs.Tracer
}

func mountKernel(t *testing.T, o fusefs.Options) *kernelCase {
	t.Helper()
	return mountKernelJob(t, o, false)
}

// mountKernelJob is mountKernel, with only this process's children followed (jobOnly).
func mountKernelJob(t *testing.T, o fusefs.Options, jobOnly bool) *kernelCase {
	t.Helper()
	return mountKernelWith(t, o, legs.Options{DataCalls: true, JobOnly: jobOnly})
}

// mountKernelWith is mountKernel with the measurement's options lo (its Origin is set).
func mountKernelWith(t *testing.T, o fusefs.Options, lo legs.Options) *kernelCase {
	t.Helper()
	testenv.Root(t, testenv.FUSE, "measuring in the kernel needs root")
	origin := trace.Now()
	lo.Origin = origin
	tr, err := legs.Open(lo)
	if err != nil {
		testenv.Skip(t, testenv.FUSE, "the kernel's view cannot be measured here: %v", err)
	}
	t.Cleanup(tr.Detach)
	rec := fusetest.NewMemRecorder(origin)
	o.Passthrough = true
	c := fusetest.Mount(t, rec, o)
	if err := tr.Watch(c.Mnt, os.Getpid(), c.Server); err != nil {
		t.Fatal(err)
	}
	return &kernelCase{Case: c, rec: rec, t: tr}
}

// run runs a shell command in dir, in a child process. The shell enters dir itself: a
// child that entered the mount between its fork and its exec would wait for this process's
// server while it holds this process's memory (vfork), and the Go runtime may need all of
// this process's threads at that moment.
func run(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `cd "$1" && `+script, "sh", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// TestPassthroughDataCalls reads and writes through a passthrough mount with dd: every
// read and write call reaches the trace, timed by the kernel, with its bytes, offsets and
// handle, and none of them as a request to the layer.
func TestPassthroughDataCalls(t *testing.T) {
	for _, jobOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("job-only=%v", jobOnly), func(t *testing.T) { testPassthroughDataCalls(t, jobOnly) })
	}
}

func testPassthroughDataCalls(t *testing.T, jobOnly bool) {
	k := mountKernelJob(t, fusefs.Options{}, jobOnly)
	if err := os.WriteFile(filepath.Join(k.Orig, "in"), make([]byte, 64<<10+100), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, k.Mnt, "dd if=in of=out bs=4096 status=none")
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	st := k.Server.Passthrough()
	if st.Opens < 2 || st.LayerOpens != 0 {
		t.Errorf("passthrough opens %+v, want 2 through the kernel", st)
	}
	var reads, writes, rbytes, wbytes int64
	var layer int
	for _, ev := range k.rec.Events() {
		switch {
		case ev.Op != trace.OpRead && ev.Op != trace.OpWrite:
			continue
		case !ev.Passthrough:
			layer++
		case ev.Op == trace.OpRead:
			if ev.Offset != rbytes || ev.Size != 4096 {
				t.Errorf("read %d at offset %d of %d bytes, want offset %d", reads, ev.Offset, ev.Size, rbytes)
			}
			reads++
			rbytes += ev.Ret
		default:
			if ev.Offset != wbytes || int64(ev.Size) != ev.Ret {
				t.Errorf("write %d at offset %d of %d bytes, want offset %d", writes, ev.Offset, ev.Size, wbytes)
			}
			writes++
			wbytes += ev.Ret
		}
		if ev.Passthrough && (ev.Dur <= 0 || ev.Handle == 0 || ev.Node == 0 || ev.Pid == 0 || ev.Path == 0 ||
			ev.Unique != 0 || ev.CallStart != ev.Start || ev.CallEnd != ev.End() || ev.CallNr == 0 && ev.Op == trace.OpWrite) {
			t.Errorf("event %+v", ev)
		}
	}
	// dd reads 17 blocks (the last one short) and the end of file, and writes 17.
	if reads != 18 || writes != 17 || rbytes != 64<<10+100 || wbytes != 64<<10+100 || layer != 0 {
		t.Errorf("reads %d (%d bytes), writes %d (%d bytes), through the layer %d", reads, rbytes, writes, wbytes, layer)
	}
	if st := k.t.Stats(); st.Data != uint64(reads+writes) || st.Lost != 0 {
		t.Errorf("kernel counted %+v, trace holds %d", st, reads+writes)
	}
}

// TestPassthroughAsync runs fio at queue depth 16 with libaio and io_uring on O_DIRECT
// through a passthrough mount: each of its reads reaches the trace once, timed from its
// submission to its completion, and the calls overlap (the depth survives).
func TestPassthroughAsync(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "fio")
	for _, engine := range []string{"libaio", "io_uring"} {
		t.Run(engine, func(t *testing.T) {
			k := mountKernel(t, fusefs.Options{})
			const size, bs = 4 << 20, 4096
			if err := os.WriteFile(filepath.Join(k.Orig, "f"), make([]byte, size), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, k.Mnt, "fio --name=qd --filename=f --rw=randread --bs=4k --size=4m --direct=1 --iodepth=16 --ioengine="+engine+" --output=/dev/null")
			if err := k.t.Close(); err != nil {
				t.Fatal(err)
			}
			seen := map[int64]int{}
			var reads []trace.Event
			for _, ev := range k.rec.Events() {
				if ev.Op != trace.OpRead || !ev.Passthrough {
					continue
				}
				reads = append(reads, ev)
				seen[ev.Offset]++
				if ev.Ret != bs || ev.Size != bs || ev.Dur <= 0 || ev.Offset%bs != 0 {
					t.Errorf("read %+v", ev)
				}
			}
			if len(reads) != size/bs || len(seen) != size/bs {
				t.Errorf("%d reads of %d blocks, want %d", len(reads), len(seen), size/bs)
			}
			// The most reads in flight at once.
			var depth, most int
			var edges []int64
			for _, ev := range reads {
				edges = append(edges, ev.Start<<1|1, ev.End()<<1)
			}
			slices.Sort(edges)
			for _, e := range edges {
				if e&1 == 1 {
					depth++
				} else {
					depth--
				}
				most = max(most, depth)
			}
			if most < 8 {
				t.Errorf("at most %d reads in flight, want the job's depth (16)", most)
			}
			t.Logf("%d reads, at most %d in flight", len(reads), most)
			if st := k.t.Stats(); st.Async != uint64(len(reads)) || st.Unseen != 0 || st.Lost != 0 {
				t.Errorf("kernel counted %+v, trace holds %d", st, len(reads))
			}
		})
	}
}

// TestPassthroughSendfileSplice moves data with sendfile and splice (python3's
// shutil.copyfile uses sendfile) between passed-through files and others: a move between
// two files of the mount is a copy, one from the mount a read, one into it a write, each
// with its bytes and offsets.
func TestPassthroughSendfileSplice(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "python3")
	k := mountKernel(t, fusefs.Options{})
	data := make([]byte, 300000)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(k.Orig, "src"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	run(t, k.Mnt, `python3 - "`+outside+`" <<'PY'
import os, shutil, sys
out = sys.argv[1]
shutil.copyfile("src", "copy")                 # sendfile, mount to mount: copies
shutil.copyfile("src", out + "/fromfuse")      # sendfile, mount to outside: reads
shutil.copyfile(out + "/fromfuse", "tofuse")   # sendfile, outside to mount: writes
r, w = os.pipe()
src = os.open("src", os.O_RDONLY)
dst = os.open("spliced", os.O_WRONLY | os.O_CREAT, 0o644)
n = os.splice(src, w, 65536, offset_src=4096)  # splice from the mount into a pipe: a read at 4096
os.splice(r, dst, n)                           # and from the pipe into the mount: a write at 0
PY`)
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"copy", "tofuse"} {
		if b, err := os.ReadFile(filepath.Join(k.Orig, name)); err != nil || len(b) != len(data) {
			t.Fatalf("%s: %d bytes, %v", name, len(b), err)
		}
	}
	if st := k.Server.Passthrough(); st.LayerOpens != 0 {
		t.Errorf("opens through the layer: %+v", st)
	}
	moved := map[string]int64{} // op and paths → bytes
	for _, ev := range k.rec.Events() {
		if !ev.Passthrough {
			continue
		}
		key := ev.Op.String() + " " + k.rec.PathName(ev.Path)
		if ev.Op == trace.OpCopyFileRange {
			key += " " + k.rec.PathName(ev.Path2)
		}
		if ev.Errno != 0 || ev.Ret < 0 {
			t.Errorf("%s failed: %+v", key, ev)
		}
		if key == "read src" && ev.CallNr == unix.SYS_SPLICE && ev.Offset != 4096 {
			t.Errorf("the splice read at %d, want 4096", ev.Offset)
		}
		moved[key] += ev.Ret
	}
	n := int64(len(data))
	for key, want := range map[string]int64{"copy_file_range src copy": n, "write tofuse": n, "write spliced": 65536} {
		if moved[key] != want {
			t.Errorf("%s: %d bytes, want %d (all: %v)", key, moved[key], want, moved)
		}
	}
	// src is read by the copy to outside (sendfile) and by the splice.
	if moved["read src"] != n+65536 {
		t.Errorf("read src: %d bytes, want %d (all: %v)", moved["read src"], n+65536, moved)
	}
}

// TestPassthroughRingFull: a job making reads and writes faster than the ring of records
// drains loses some records, and each call is either in the trace or counted lost: none is
// lost without a count. A ring of one page and a slow drain make the loss certain.
func TestPassthroughRingFull(t *testing.T) {
	k := mountKernelWith(t, fusefs.Options{}, legs.Options{DataCalls: true, RingBytes: 4096, DrainInterval: time.Second})
	const blocks = 20000
	run(t, k.Mnt, fmt.Sprintf("dd if=/dev/zero of=out bs=512 count=%d status=none && dd if=out of=/dev/null bs=512 status=none", blocks))
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	var seen uint64
	for _, ev := range k.rec.Events() {
		if ev.Passthrough {
			seen++
		}
	}
	st := k.t.Stats()
	// dd writes blocks and reads blocks plus the read at the end of the file.
	const calls = 2*blocks + 1
	if st.LostData == 0 || seen+st.LostData != calls || st.Data != seen {
		t.Errorf("%d calls in the trace, %d lost, %d recorded by the kernel; want some lost and %d in all", seen, st.LostData, st.Data, calls)
	}
}

// TestPassthroughForgottenFiles: files read and removed at once are forgotten by the layer
// before the ring's next drain; their reads still carry their paths, which the layer keeps
// for the nodes the kernel forgot last.
func TestPassthroughForgottenFiles(t *testing.T) {
	k := mountKernelWith(t, fusefs.Options{}, legs.Options{DataCalls: true, DrainInterval: time.Second})
	const n = 30
	for i := range n {
		if err := os.WriteFile(filepath.Join(k.Orig, fmt.Sprintf("f%d", i)), []byte("some data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, k.Mnt, fmt.Sprintf("for i in $(seq 0 %d); do cat f$i > /dev/null; rm f$i; done", n-1))
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, ev := range k.rec.Events() {
		if ev.Passthrough && ev.Op == trace.OpRead && ev.Ret > 0 {
			named[k.rec.PathName(ev.Path)] = true
		}
	}
	for i := range n {
		if name := fmt.Sprintf("f%d", i); !named[name] {
			t.Errorf("no read of %s by its name (reads named: %v)", name, slices.Sorted(maps.Keys(named)))
			break
		}
	}
}
