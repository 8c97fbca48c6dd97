package legs_test

import (
	"fmt"
	"io"
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
	k := mountUnwatched(t, o, lo)
	k.watch(t)
	return k
}

// watch starts measuring the mount.
func (k *kernelCase) watch(t *testing.T) {
	t.Helper()
	if err := k.t.Watch(k.Mnt, os.Getpid(), k.Server); err != nil {
		t.Fatal(err)
	}
}

// mountUnwatched is mountKernelWith without the Watch: the program measures nothing yet.
func mountUnwatched(t *testing.T, o fusefs.Options, lo legs.Options) *kernelCase {
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

// TestPassthroughVectored: readv, writev, preadv and pwritev on a passthrough file each
// reach the trace once, with the bytes their iovec arrays ask for (summed over the first 16
// entries) and the bytes they moved.
func TestPassthroughVectored(t *testing.T) {
	k := mountKernel(t, fusefs.Options{})
	if err := os.WriteFile(filepath.Join(k.Orig, "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, k.Mnt, `python3 -c '
import os
fd = os.open("f", os.O_RDWR)
os.readv(fd, [bytearray(1000), bytearray(3000)])
os.writev(fd, [b"a" * 100, b"b" * 200, b"c" * 300])
os.preadv(fd, [bytearray(4096)] * 3, 8192)
os.pwritev(fd, [b"d" * 10] * 20, 65536)
os.close(fd)'`)
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	type call struct {
		op          trace.Op
		offset, ret int64
		size        uint32
	}
	want := []call{
		{trace.OpRead, 0, 4000, 4000},
		{trace.OpWrite, 4000, 600, 600},
		{trace.OpRead, 8192, 3 * 4096, 3 * 4096},
		{trace.OpWrite, 65536, 200, 160}, // 20 entries: the size counts the first 16
	}
	var got []call
	for _, ev := range k.rec.Events() {
		if (ev.Op == trace.OpRead || ev.Op == trace.OpWrite) && ev.Passthrough {
			got = append(got, call{ev.Op, ev.Offset, ev.Ret, ev.Size})
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("vectored calls %+v, want %+v", got, want)
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
				// libaio's submissions are dated by io_submit's return.
				if engine == "libaio" && (ev.CallEnd < ev.Start || ev.CallStart != ev.Start) {
					t.Errorf("read %+v: its io_submit's return is not dated", ev)
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

// TestPassthroughRenamedFiles: files written and renamed at once (mv, as a job's output is
// put in place) move before the ring's next drain; their writes still carry the name they
// had when they were made, and the reads after the rename the new one. A replay of such a
// trace creates a then renames it, not b before it exists.
func TestPassthroughRenamedFiles(t *testing.T) {
	k := mountKernelWith(t, fusefs.Options{}, legs.Options{DataCalls: true, DrainInterval: time.Second})
	const n = 20
	run(t, k.Mnt, fmt.Sprintf("for i in $(seq 0 %d); do echo data > a$i; mv a$i b$i; cat b$i > /dev/null; done", n-1))
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, ev := range k.rec.Events() {
		if ev.Passthrough && ev.Ret > 0 {
			named[ev.Op.String()+" "+k.rec.PathName(ev.Path)] = true
		}
	}
	for i := range n {
		for _, want := range []string{fmt.Sprintf("write a%d", i), fmt.Sprintf("read b%d", i)} {
			if !named[want] {
				t.Fatalf("no %s (calls named: %v)", want, slices.Sorted(maps.Keys(named)))
			}
		}
	}
}

// mappedJob maps two files of the mount with python3's mmap module and goes through the
// maps: "m" privately, read only, reading one byte of each page in [mapFrom, mapTo) and the
// last byte; "w" shared, reading its first page and storing bytes at wrote. It prints
// nothing; the files' contents tell what it did.
const mappedJob = `python3 - <<'PY'
import mmap, os
fd = os.open("m", os.O_RDONLY)
m = mmap.mmap(fd, 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
os.close(fd)  # the mapping outlives the descriptor
s = 0
for off in range(%d, %d, 4096):
    s += m[off]
s += m[len(m) - 1]
m.close()
fd = os.open("w", os.O_RDWR)
w = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
s += w[0]
for off in (%s):
    w[off] = 0x5a
w.flush()
w.close()
os.close(fd)
PY`

const (
	mapSize     = 1<<20 + 1000 // "m": a last page the file fills in part
	mapFrom     = 100_000
	mapTo       = 700_000
	sharedSize  = 64 << 10
	sharedPage1 = 5000
	sharedPage9 = 40000
)

// evict drops file's pages from the page cache, so that faults on it read it from the disk
// (mm_filemap_fault) rather than map what the cache holds (fault-around).
func evict(t *testing.T, file string) {
	t.Helper()
	syncFile(t, file)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// syncFile writes file's dirty pages back: its pages in the page cache are clean.
func syncFile(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestPassthroughMappedFile maps a file privately and one shared through a passthrough
// mount and goes through the maps: the trace names both files with the pages the faults
// brought in, covering every byte the job touched, as reads the kernel served without a
// system call (trace.MapFault, no duration), and the stores through the shared map as
// writes of the pages they made dirty; the stores reach the file.
func TestPassthroughMappedFile(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "python3")
	for _, jobOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("job-only=%v", jobOnly), func(t *testing.T) { testPassthroughMappedFile(t, jobOnly) })
	}
}

func testPassthroughMappedFile(t *testing.T, jobOnly bool) {
	k := mountKernelJob(t, fusefs.Options{}, jobOnly)
	if why := k.t.MapsUnfollowed(); why != "" {
		testenv.Skip(t, testenv.FUSE, "mapped files are not followed here: %s", why)
	}
	data := make([]byte, mapSize)
	for i := range data {
		data[i] = byte(i / 4096)
	}
	mustWrite(t, filepath.Join(k.Orig, "m"), data)
	mustWrite(t, filepath.Join(k.Orig, "w"), make([]byte, sharedSize))
	evict(t, filepath.Join(k.Orig, "m"))
	syncFile(t, filepath.Join(k.Orig, "w")) // clean: a store makes a page dirty only once
	run(t, k.Mnt, fmt.Sprintf(mappedJob, mapFrom, mapTo, fmt.Sprintf("%d, %d", sharedPage1, sharedPage9)))
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(filepath.Join(k.Orig, "w"))
	if err != nil || w[sharedPage1] != 0x5a || w[sharedPage9] != 0x5a {
		t.Fatalf("the stores through the shared map did not reach the file (%v)", err)
	}
	covered := map[string]*ranges{"read m": {}, "read w": {}, "write w": {}}
	var faults, writes uint64
	for _, ev := range k.rec.Events() {
		if !ev.Mapped() {
			if ev.Passthrough && (ev.Op == trace.OpRead || ev.Op == trace.OpWrite) {
				t.Errorf("a %s system call on %s: the job made none", ev.Op, k.rec.PathName(ev.Path))
			}
			continue
		}
		faults++
		name := k.rec.PathName(ev.Path)
		size := map[string]int64{"m": mapSize, "w": sharedSize}[name]
		if !ev.Passthrough || ev.Dur != 0 || ev.CallStart != 0 || ev.CallEnd != 0 || ev.CallNr != 0 || ev.Unique != 0 ||
			ev.Handle == 0 || ev.Node == 0 || ev.Pid == 0 || ev.Offset%4096 != 0 || int64(ev.Size)%4096 != 0 ||
			ev.Ret <= 0 || ev.Ret > int64(ev.Size) || ev.Offset+ev.Ret > size || ev.Errno != 0 {
			t.Errorf("fault %s %s: %+v", ev.Op, name, ev)
		}
		r := covered[ev.Op.String()+" "+name]
		if r == nil {
			t.Errorf("a fault %s of %s", ev.Op, name)
			continue
		}
		r.add(ev.Offset, ev.Offset+ev.Ret)
		if ev.Op == trace.OpWrite {
			writes++
		}
	}
	for _, c := range []struct {
		what     string
		from, to int64
	}{
		{"read m", mapFrom, mapTo}, {"read m", mapSize - 1, mapSize}, {"read w", 0, 1},
		{"write w", sharedPage1, sharedPage1 + 1}, {"write w", sharedPage9, sharedPage9 + 1},
	} {
		if !covered[c.what].covers(c.from, c.to) {
			t.Errorf("%s: bytes %d..%d touched, faults cover %v", c.what, c.from, c.to, covered[c.what])
		}
	}
	// Each store made its folio dirty (a page, or more where the file system keeps large
	// folios): at most one write for each of the two stores.
	if writes > 2 {
		t.Errorf("write w: %d writes for two stores (%v)", writes, covered["write w"])
	}
	st := k.t.Stats()
	if st.Maps != 2 || st.Faults != faults || st.MapsFull != 0 || st.Lost != 0 {
		t.Errorf("kernel counted %+v, trace holds %d faults", st, faults)
	}
	t.Logf("%d fault events; m: %v", faults, covered["read m"])
}

// TestPassthroughMappedBeforeWatch: a file mapped before the program watched the mount is
// not followed (its faults leave nothing, and nothing fails), while one mapped after is.
func TestPassthroughMappedBeforeWatch(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "python3")
	k := mountUnwatched(t, fusefs.Options{}, legs.Options{DataCalls: true})
	if why := k.t.MapsUnfollowed(); why != "" {
		testenv.Skip(t, testenv.FUSE, "mapped files are not followed here: %s", why)
	}
	mustWrite(t, filepath.Join(k.Orig, "before"), make([]byte, 256<<10))
	mustWrite(t, filepath.Join(k.Orig, "after"), make([]byte, 256<<10))
	evict(t, filepath.Join(k.Orig, "before"))
	evict(t, filepath.Join(k.Orig, "after"))
	// The child maps "before", says so, and waits for a line before it reads the maps.
	cmd := exec.Command("sh", "-c", `cd "$1" && exec python3 -c '
import mmap, os, sys
def open_map(name):
    fd = os.open(name, os.O_RDONLY)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    os.close(fd)
    return m
b = open_map("before")
print("mapped", flush=True)
sys.stdin.readline()
a = open_map("after")
print(sum(b[i] for i in range(0, len(b), 4096)) + sum(a[i] for i in range(0, len(a), 4096)))
'`, "sh", k.Mnt)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 7)
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "mapped\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child: %q, %v", line, err)
	}
	k.watch(t)
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(stdout)
	if err := cmd.Wait(); err != nil || string(out) != "0\n" {
		t.Fatalf("child: %v, printed %q", err, out)
	}
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	faulted := map[string]*ranges{"before": {}, "after": {}}
	for _, ev := range k.rec.Events() {
		if !ev.Mapped() {
			continue
		}
		r := faulted[k.rec.PathName(ev.Path)]
		if r == nil {
			t.Errorf("a fault of %q: %+v", k.rec.PathName(ev.Path), ev)
			continue
		}
		r.add(ev.Offset, ev.Offset+ev.Ret)
	}
	if len(*faulted["before"]) != 0 || !faulted["after"].covers(0, 256<<10) {
		t.Errorf("bytes faulted in: before %v, after %v; want none of before and all of after", faulted["before"], faulted["after"])
	}
	if st := k.t.Stats(); st.Maps != 1 {
		t.Errorf("kernel counted %+v, want the one map after the watch", st)
	}
}

func mustWrite(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ranges is a set of byte ranges [from, to), kept sorted and merged.
type ranges [][2]int64

func (r *ranges) add(from, to int64) {
	*r = append(*r, [2]int64{from, to})
	slices.SortFunc(*r, func(a, b [2]int64) int { return int(a[0] - b[0]) })
	out := (*r)[:1]
	for _, x := range (*r)[1:] {
		if last := &out[len(out)-1]; x[0] <= last[1] {
			last[1] = max(last[1], x[1])
		} else {
			out = append(out, x)
		}
	}
	*r = out
}

func (r *ranges) covers(from, to int64) bool {
	for _, x := range *r {
		if x[0] <= from && to <= x[1] {
			return true
		}
	}
	return false
}

// TestPassthroughMappedTableFull: with a table of two mapped files, a third file mapped
// while the first two still are is counted and its faults are not recorded; once those two
// are unmapped, a fourth mmap clears their entries and is followed.
func TestPassthroughMappedTableFull(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "python3")
	k := mountKernelWith(t, fusefs.Options{}, legs.Options{DataCalls: true, MappedFiles: 2})
	if why := k.t.MapsUnfollowed(); why != "" {
		testenv.Skip(t, testenv.FUSE, "mapped files are not followed here: %s", why)
	}
	names := []string{"a", "b", "c", "d"}
	for _, name := range names {
		mustWrite(t, filepath.Join(k.Orig, name), make([]byte, 64<<10))
	}
	run(t, k.Mnt, `python3 - <<'PY'
import mmap, os
def open_map(name):
    fd = os.open(name, os.O_RDONLY)
    m = mmap.mmap(fd, 0, prot=mmap.PROT_READ)
    os.close(fd)
    return m
def touch(m):
    return sum(m[i] for i in range(0, len(m), 4096))
a, b = open_map("a"), open_map("b")
c = open_map("c")  # the table is full of a and b, both mapped
touch(a); touch(c)
a.close(); b.close()
d = open_map("d")  # a and b are mapped nowhere now: their entries go
touch(d); touch(c)
PY`)
	if err := k.t.Close(); err != nil {
		t.Fatal(err)
	}
	faulted := map[string]*ranges{}
	for _, name := range names {
		faulted[name] = &ranges{}
	}
	for _, ev := range k.rec.Events() {
		if ev.Mapped() {
			faulted[k.rec.PathName(ev.Path)].add(ev.Offset, ev.Offset+ev.Ret)
		}
	}
	if !faulted["a"].covers(0, 64<<10) || !faulted["d"].covers(0, 64<<10) || len(*faulted["c"]) != 0 {
		t.Errorf("faulted in: a %v, c %v, d %v; want all of a and d, none of c", faulted["a"], faulted["c"], faulted["d"])
	}
	if st := k.t.Stats(); st.Maps != 3 || st.MapsFull != 1 {
		t.Errorf("kernel counted %+v, want 3 mmaps followed and 1 refused", st)
	}
}
