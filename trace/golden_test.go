package trace

import (
	"bytes"
	"cmp"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden trace of the version the Writer writes (testdata/trace/v5-small.iotap); the older versions' are never rewritten")

// goldenPath is the committed version-1 trace. It must stay readable by every later
// version of this package: never regenerate it to make TestGoldenV1 pass after a format
// change (the Writer writes a later version, so it cannot); add a new golden file for a new
// version instead.
var goldenPath = filepath.Join("..", "testdata", "trace", "v1-small.iotap")

// goldenV2Path is the committed version-2 trace. Like the version-1 file, it must stay
// readable by every later version of this package and is never regenerated.
var goldenV2Path = filepath.Join("..", "testdata", "trace", "v2-small.iotap")

// goldenV3Path is the committed version-3 trace. Like the earlier files, it must stay
// readable by every later version of this package and is never regenerated.
var goldenV3Path = filepath.Join("..", "testdata", "trace", "v3-small.iotap")

// goldenV4Path is the committed version-4 trace. Like the earlier files, it must stay
// readable by every later version of this package and is never regenerated.
var goldenV4Path = filepath.Join("..", "testdata", "trace", "v4-small.iotap")

// goldenV5Path is the committed version-5 trace (go test ./trace -run TestGoldenV5 -update
// rewrites it while the Writer writes version 5).
var goldenV5Path = filepath.Join("..", "testdata", "trace", "v5-small.iotap")

// goldenSamples are the resource series of the version-3 and later golden traces: an s3fs client
// whose memory grows and shrinks, and the recorder.
func goldenSamples() []Samples {
	client := Samples{Role: RoleClient, Pid: 4242, Name: "s3fs"}
	self := Samples{Role: RoleSelf, Pid: 99, Name: "iotap"}
	for i := range 5 {
		t := int64(i) * 100_000_000
		client.Points = append(client.Points, Sample{T: t, RSS: uint64(20+10*min(i, 4-i)) << 20,
			User: time.Duration(i) * 7 * time.Millisecond, Sys: time.Duration(i) * 3 * time.Millisecond,
			RChar: uint64(i) << 20, WChar: uint64(i) << 10, ReadBytes: 0, WriteBytes: uint64(i) * 4096})
		self.Points = append(self.Points, Sample{T: t + 5, RSS: 12 << 20, User: time.Duration(i) * time.Millisecond})
	}
	return []Samples{client, self}
}

// goldenContent is what the golden trace of the given format version holds. Version 2
// holds version 1's content plus copy_file_range calls from in.bam into out/copy.bam at
// output offsets other than their input offsets (the field version 2 added). Version 4
// adds the kernel's view of every request (the legs outside the layer, the system call
// that sent it, the thread's run delay and wake-up).
func goldenContent(version uint16) (Header, []PathRecord, []Process, []File, []Event) {
	h := testHeader()
	h.Version = version
	if version >= Version4 {
		h.Legs = LegsKernel
	}
	if version >= Version5 {
		h.Data, h.DataNote = DataKernel, ""
	}
	paths := []PathRecord{
		{ID: 1},
		{ID: 2, Parent: 1, Name: "data"},
		{ID: 3, Parent: 2, Name: "in.bam"},
		{ID: 4, Parent: 2, Name: "out"},
		{ID: 5, Parent: 4, Name: "sorted.bam"},
		{ID: 6, Parent: 0, Name: "../in.bam"},
		{ID: 7, Parent: 4, Name: "link"},
		{ID: 8, Parent: 4, Name: "sorted.bam.tmp"},
	}
	procs := []Process{
		{Tid: 100, Pid: 100, PPid: 1, FirstSeen: 1000, Comm: "samtools", Exe: "/usr/bin/samtools"},
		{Tid: 101, Pid: 100, PPid: 1, FirstSeen: 2000, Comm: "samtools", Exe: "/usr/bin/samtools"},
	}
	files := []File{
		{Path: 2, Type: TypeDir, Mode: 0o755, Size: 4096, Seen: 1500, Nlink: 3},
		{Path: 3, Type: TypeFile, Mode: 0o644, Size: 3 << 20, Seen: 1600, Nlink: 1},
	}
	var evs []Event
	t := int64(1000)
	add := func(e Event) {
		t += 1500
		e.Start = t
		if e.Dur == 0 {
			e.Dur = 10_000
		}
		t += e.Dur
		if e.Tid == 0 {
			e.Tid = 100
		}
		e.Pid = 100
		e.Uid, e.Gid = 1000, 100
		if version >= Version4 {
			n := int64(len(evs))
			e.Unique = uint64(2*n + 2)
			e.Queued, e.Done = e.Start-300-n, e.Start+e.Dur+200+n
			e.CallStart, e.CallEnd = e.Queued-400, e.Done+250
			e.CallNr = uint16(n % 300)
			e.RunDelay = 1 + 10*n
			e.WokenAt, e.Waker = e.CallStart-100, uint32(e.Tid^1)
		}
		evs = append(evs, e)
	}
	add(Event{Op: OpLookup, Path: 2, Node: 1, Node2: 2, Mode: syscall.S_IFDIR | 0o755, Ret: 4096})
	add(Event{Op: OpLookup, Path: 3, Node: 2, Node2: 3, Mode: syscall.S_IFREG | 0o644, Ret: 3 << 20})
	add(Event{Op: OpOpen, Path: 3, Node: 3, Handle: 1, Flags: syscall.O_RDONLY})
	for i := range 3 {
		add(Event{Op: OpRead, Path: 3, Node: 3, Handle: 1, Offset: int64(i) << 20, Size: 1 << 20, Ret: 1 << 20, Dur: 400_000})
	}
	add(Event{Op: OpRead, Path: 3, Node: 3, Handle: 1, Offset: 3 << 20, Size: 1 << 20, Ret: 0})
	add(Event{Op: OpRelease, Path: 3, Node: 3, Handle: 1})
	add(Event{Op: OpLookup, Path: 4, Node: 2, Errno: uint16(syscall.ENOENT)})
	add(Event{Op: OpMkdir, Path: 4, Node: 2, Node2: 4, Mode: 0o755})
	add(Event{Op: OpCreate, Path: 8, Node: 4, Node2: 5, Handle: 2, Flags: syscall.O_WRONLY | syscall.O_CREAT | syscall.O_EXCL, Mode: 0o644, Tid: 101})
	add(Event{Op: OpWrite, Path: 8, Node: 5, Handle: 2, Size: 65536, Ret: 65536, Tid: 101})
	add(Event{Op: OpWrite, Path: 8, Node: 5, Handle: 2, Offset: 65536, Size: 1000, Ret: 1000, Tid: 101})
	add(Event{Op: OpFsync, Path: 8, Node: 5, Handle: 2, Tid: 101})
	add(Event{Op: OpRelease, Path: 8, Node: 5, Handle: 2, Tid: 101})
	add(Event{Op: OpRename, Path: 8, Path2: 5, Node: 4, Node2: 4})
	add(Event{Op: OpSymlink, Path: 7, Path2: 6, Node: 4, Node2: 6})
	add(Event{Op: OpReadlink, Path: 7, Node: 6, Ret: 9})
	add(Event{Op: OpGetxattr, Path: 5, Node: 5, Size: 256, Errno: uint16(syscall.ENODATA)})
	add(Event{Op: OpOpendir, Path: 4, Node: 4, Handle: 3})
	add(Event{Op: OpReaddirplus, Path: 4, Node: 4, Handle: 3, Size: 4096, Ret: 240})
	add(Event{Op: OpReaddirplus, Path: 4, Node: 4, Handle: 3, Offset: 4, Size: 4096})
	add(Event{Op: OpReleasedir, Path: 4, Node: 4, Handle: 3})
	add(Event{Op: OpUnlink, Path: 7, Node: 4, Errno: uint16(syscall.EACCES), Uid: 0})
	add(Event{Op: OpStatfs, Path: 1, Node: 1})
	if version >= Version2 {
		paths = append(paths, PathRecord{ID: 9, Parent: 4, Name: "copy.bam"})
		add(Event{Op: OpOpen, Path: 3, Node: 3, Handle: 4, Flags: syscall.O_RDONLY})
		add(Event{Op: OpCreate, Path: 9, Node: 4, Node2: 7, Handle: 5, Flags: syscall.O_WRONLY | syscall.O_CREAT | syscall.O_TRUNC, Mode: 0o644})
		add(Event{Op: OpCopyFileRange, Path: 3, Path2: 9, Node: 3, Node2: 7, Handle: 4, Handle2: 5,
			Offset: 1 << 20, Offset2: 4096, Size: 1 << 20, Ret: 1 << 20})
		add(Event{Op: OpCopyFileRange, Path: 3, Path2: 9, Node: 3, Node2: 7, Handle: 4, Handle2: 5,
			Offset: 3 << 20, Offset2: 4096 + 1<<20, Size: 1 << 20, Ret: 0})
		add(Event{Op: OpRelease, Path: 9, Node: 7, Handle: 5})
		add(Event{Op: OpRelease, Path: 3, Node: 3, Handle: 4})
	}
	if version >= Version5 {
		// Reads and writes kernel passthrough served: no request, the call is the event.
		pass := func(e Event) {
			t += 700
			e.Start, e.Dur = t, 2_500
			t += e.Dur
			e.Pid, e.Uid, e.Gid, e.Passthrough = 100, 1000, 100, true
			e.Queued, e.Done, e.CallStart, e.CallEnd = e.Start, e.End(), e.Start, e.End()
			e.RunDelay = 3
			evs = append(evs, e)
		}
		add(Event{Op: OpOpen, Path: 3, Node: 3, Handle: 6, Flags: syscall.O_RDONLY})
		for i := range 3 {
			pass(Event{Op: OpRead, Path: 3, Node: 3, Handle: 6, Offset: int64(i) * 4096, Size: 4096, Ret: 4096, Tid: 100, CallNr: 0})
		}
		pass(Event{Op: OpRead, Path: 3, Node: 3, Handle: 6, Offset: 1 << 40, Size: 4096, Errno: uint16(syscall.EINVAL), Tid: 101, CallNr: 17})
		add(Event{Op: OpRelease, Path: 3, Node: 3, Handle: 6})
	}
	return h, paths, procs, files, evs
}

// writeGolden writes the golden content of the version the Writer writes, with two
// events chunks, and its resource series in two parts.
func writeGolden(w io.Writer) error {
	h, paths, procs, files, evs := goldenContent(writeVersion)
	tw, err := NewWriter(w, h, WriterOptions{ChunkEvents: 16})
	if err != nil {
		return err
	}
	for _, p := range paths[1:] {
		if id := tw.Path(p.Parent, p.Name); id != p.ID {
			panic("path ids out of step")
		}
	}
	for _, p := range procs {
		tw.AddProcess(p)
	}
	for _, f := range files {
		tw.AddFile(f)
	}
	var rest []Samples
	for _, s := range goldenSamples() {
		first := s
		first.Points = s.Points[:2]
		tw.AddSamples(first)
		s.Points = s.Points[2:]
		rest = append(rest, s)
	}
	for i := range evs {
		tw.Append(&evs[i])
	}
	for _, s := range rest {
		tw.AddSamples(s) // with the last chunks
	}
	tw.CountError()
	return tw.Close()
}

// TestGoldenV1 reads the committed version-1 trace. It has no -update path on purpose:
// the Writer writes a later version, and the point of the file is that version 1 wrote it.
func TestGoldenV1(t *testing.T) {
	got := checkGolden(t, goldenPath, Version1)
	for _, e := range got {
		if e.Offset2 != 0 {
			t.Errorf("version-1 event %+v has an Offset2", e)
		}
	}
}

// TestGoldenV2 reads the committed version-2 trace, whose copy_file_range events carry
// an output offset (Offset2).
func TestGoldenV2(t *testing.T) {
	checkOffset2(t, checkGolden(t, goldenV2Path, Version2))
}

// TestGoldenV3 reads the committed version-3 trace, which holds resource samples.
func TestGoldenV3(t *testing.T) {
	checkOffset2(t, checkGolden(t, goldenV3Path, Version3))
}

// TestGoldenV4 reads the committed version-4 trace, whose events carry the kernel's view
// of each request.
func TestGoldenV4(t *testing.T) {
	got := checkGolden(t, goldenV4Path, Version4)
	checkOffset2(t, got)
	for _, e := range got {
		if e.Unique == 0 || e.Queued == 0 || e.CallEnd == 0 || e.RunDelay == 0 {
			t.Errorf("version-4 event without the kernel's view: %+v", e)
		}
	}
}

// TestGoldenV5 reads the committed version-5 trace, which holds reads kernel passthrough
// served. -update rewrites it.
func TestGoldenV5(t *testing.T) {
	if *update {
		if writeVersion != Version5 {
			t.Fatalf("the Writer writes version %d: add a golden file for it instead", writeVersion)
		}
		var buf bytes.Buffer
		if err := writeGolden(&buf); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenV5Path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", goldenV5Path, buf.Len())
	}
	got := checkGolden(t, goldenV5Path, Version5)
	checkOffset2(t, got)
	var pass int
	for _, e := range got {
		if e.Passthrough {
			pass++
			if e.Unique != 0 || e.Queued != e.Start || e.CallEnd != e.End() {
				t.Errorf("passthrough event %+v", e)
			}
		} else if e.Unique == 0 || e.Queued == 0 || e.CallEnd == 0 || e.RunDelay == 0 {
			t.Errorf("version-5 event without the kernel's view: %+v", e)
		}
	}
	if pass != 4 {
		t.Errorf("%d passthrough events, want 4", pass)
	}
}

// checkOffset2 checks the output offsets of the golden traces' copy_file_range events.
func checkOffset2(t *testing.T, got []Event) {
	t.Helper()
	var offsets []int64
	for _, e := range got {
		if e.Op == OpCopyFileRange {
			offsets = append(offsets, e.Offset2)
		}
	}
	if want := []int64{4096, 4096 + 1<<20}; !slices.Equal(offsets, want) {
		t.Errorf("copy_file_range output offsets %v, want %v", offsets, want)
	}
}

// checkGolden reads the golden trace at path, compares it with goldenContent(version) and
// returns its events in Start order.
func checkGolden(t *testing.T, path string, version uint16) []Event {
	t.Helper()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	h, paths, procs, files, want := goldenContent(version)
	if got := r.Header(); !reflect.DeepEqual(*got, h) {
		t.Errorf("header:\n got %+v\nwant %+v", *got, h)
	}
	got := readAll(t, r)
	// File order interleaves the two threads' shards: compare in Start order.
	slices.SortStableFunc(got, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %+v\nwant %+v", got, want)
	}
	if d := r.Damage(); len(d) != 0 {
		t.Errorf("damage: %v", d)
	}
	for _, p := range paths {
		if got, ok := r.Path(p.ID); !ok || got != p {
			t.Errorf("path %d = %+v, %v; want %+v", p.ID, got, ok, p)
		}
	}
	for id, name := range map[uint32]string{1: "", 3: "data/in.bam", 5: "data/out/sorted.bam", 6: "../in.bam"} {
		if got := r.PathName(id); got != name {
			t.Errorf("PathName(%d) = %q, want %q", id, got, name)
		}
	}
	if !reflect.DeepEqual(r.Processes(), procs) {
		t.Errorf("processes %+v", r.Processes())
	}
	if !reflect.DeepEqual(r.Files(), files) {
		t.Errorf("files %+v", r.Files())
	}
	f, ok := r.Footer()
	if !ok {
		t.Fatal("no footer")
	}
	chunks, samples := uint64(6), []Samples(nil)
	if version >= Version3 {
		// The two parts of the samples went out in one chunk or two, as the writer's
		// encoder took the events.
		chunks, samples = 7, goldenSamples()
		if f.Chunks == 8 {
			chunks = 8
		}
	}
	if !reflect.DeepEqual(r.Samples(), samples) {
		t.Errorf("samples:\n got %+v\nwant %+v", r.Samples(), samples)
	}
	if f.Events != uint64(len(want)) || f.Errors != 1 || f.Dropped != 0 || f.Chunks != chunks || f.WallClose.IsZero() {
		t.Errorf("footer %+v", f)
	}
	var counts [NumOps]uint64
	for _, e := range want {
		counts[e.Op]++
	}
	for _, op := range []Op{OpRead, OpLookup, OpWrite, OpOpen} {
		if f.OpCounts[op] != counts[op] || counts[op] == 0 {
			t.Errorf("op counts %v, want %v", f.OpCounts, counts)
		}
	}
	if time.Duration(f.End) <= 0 {
		t.Errorf("footer end %d", f.End)
	}
	return got
}
