package trace

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

func testHeader() Header {
	return Header{
		Kind:         "record",
		WallStart:    time.Date(2026, 11, 30, 2, 0, 0, 123, time.UTC),
		Origin:       123456789,
		Hostname:     "node17",
		IotapVersion: "test",
		Kernel:       "6.1.0",
		Target:       Target{Path: "/data/job", FSType: "fuse.s3fs", Source: "s3fs", Mount: "/data"},
		FUSE:         FUSEOptions{Cache: "none", MaxRead: 1 << 20, MaxWrite: 1 << 20, DirectIO: true, Writeback: true, AttrTimeout: time.Second},
		Command:      []string{"samtools", "sort", "in.bam"},
		Labels:       []Label{{"job", "42"}, {"user", "ann"}},
	}
}

// readAll reads every event of r (copies) and returns them.
func readAll(t testing.TB, r *Reader) []Event {
	t.Helper()
	var out []Event
	for {
		e, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, *e)
	}
}

// TestRoundTrip writes a generated mix of events, one event with extreme field values,
// paths, processes and a file record, and reads all of them back unchanged. It is long
// because it checks everything one trace holds against what was written: header, events,
// writer stats, footer with its per-op counts, and the path, process and file tables.
func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	h := testHeader()
	w, err := NewWriter(&buf, h, WriterOptions{ChunkEvents: 1000, BufferEvents: 4096})
	if err != nil {
		t.Fatal(err)
	}
	var want []Event
	paths := map[uint32]string{}
	mix := newMix(1, func(parent uint32, name string) uint32 {
		id := w.Path(parent, name)
		if parent == RootPath {
			paths[id] = name
		} else {
			paths[id] = paths[parent] + "/" + name
		}
		return id
	}, func(e *Event) {
		want = append(want, *e)
		w.Append(e)
	})
	w.AddProcess(Process{Tid: 4242, Pid: 4240, PPid: 1, FirstSeen: 10, Comm: "cat", Exe: "/usr/bin/cat"})
	w.AddProcess(Process{Tid: 4243, Pid: 4240, PPid: 1, FirstSeen: 11, Comm: "cat"})
	w.AddFile(File{Path: 2, Type: TypeDir, Mode: 0o755, Seen: 5, Nlink: 2})
	mix.run(5000)
	link := w.Raw("../target/of/symlink")
	w.Append(&Event{Op: OpSymlink, Path: 3, Path2: link, Start: 1 << 40, Dur: 1<<63 - 1, Offset: -5, Ret: -1, Node: 1<<64 - 1, Handle: 1<<64 - 1, Errno: 65535, Mode: 1<<32 - 1})
	want = append(want, Event{Op: OpSymlink, Path: 3, Path2: link, Start: 1 << 40, Dur: 1<<63 - 1, Offset: -5, Ret: -1, Node: 1<<64 - 1, Handle: 1<<64 - 1, Errno: 65535, Mode: 1<<32 - 1})
	w.CountError()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Events != uint64(len(want)) || st.Written != st.Events || st.Dropped != 0 {
		t.Errorf("stats %+v, want %d events written", st, len(want))
	}
	t.Logf("%d events, %d bytes, %.2f bytes/event", len(want), buf.Len(), float64(buf.Len())/float64(len(want)))

	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	h.Version = writeVersion
	if got := r.Header(); !reflect.DeepEqual(*got, h) {
		t.Errorf("header:\n got %+v\nwant %+v", *got, h)
	}
	if _, ok := r.Footer(); ok {
		t.Error("footer before EOF")
	}
	got := readAll(t, r)
	// Shards (one per thread here) interleave in file order: compare in Start order.
	slices.SortStableFunc(got, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if d := r.Damage(); len(d) != 0 {
		t.Errorf("damage: %v", d)
	}
	f, ok := r.Footer()
	if !ok {
		t.Fatal("no footer")
	}
	if f.Events != uint64(len(want)) || f.Dropped != 0 || f.Errors != 1 || f.Chunks != st.Chunks-1 {
		t.Errorf("footer %+v (stats %+v)", f, st)
	}
	var counts [NumOps]uint64
	for _, e := range want {
		counts[e.Op]++
	}
	for op, c := range counts {
		var fc uint64
		if op < len(f.OpCounts) {
			fc = f.OpCounts[op]
		}
		if fc != c {
			t.Errorf("footer count %v = %d, want %d", Op(op), fc, c)
		}
	}
	for id, p := range paths {
		if got := r.PathName(id); got != p {
			t.Errorf("PathName(%d) = %q, want %q", id, got, p)
		}
	}
	if got := r.PathName(RootPath); got != "" {
		t.Errorf("root = %q", got)
	}
	if got := r.PathName(link); got != "../target/of/symlink" {
		t.Errorf("raw = %q", got)
	}
	if got := r.PathName(999999); got != "?999999" {
		t.Errorf("unknown = %q", got)
	}
	if p, ok := r.Process(4243); !ok || p.Comm != "cat" || p.Pid != 4240 {
		t.Errorf("Process(4243) = %+v, %v", p, ok)
	}
	if n := len(r.Processes()); n != 2 {
		t.Errorf("%d processes", n)
	}
	if fs := r.Files(); len(fs) != 1 || fs[0] != (File{Path: 2, Type: TypeDir, Mode: 0o755, Seen: 5, Nlink: 2}) {
		t.Errorf("files %+v", fs)
	}
}

// offset2Events is a copy through two handles whose output offsets differ from the input
// offsets, with a read on the input handle between the copies (the offset predictor
// follows the input handle across them).
func offset2Events() []Event {
	return []Event{
		{Op: OpOpen, Start: 10, Tid: 1, Path: 2, Handle: 1},
		{Op: OpCreate, Start: 20, Tid: 1, Path: 3, Handle: 2},
		{Op: OpCopyFileRange, Start: 30, Tid: 1, Path: 2, Path2: 3, Handle: 1, Handle2: 2, Offset: 0, Offset2: 4096, Size: 1 << 20, Ret: 1 << 20},
		{Op: OpRead, Start: 40, Tid: 1, Path: 2, Handle: 1, Offset: 1 << 20, Size: 4096, Ret: 4096},
		{Op: OpCopyFileRange, Start: 50, Tid: 1, Path: 2, Path2: 3, Handle: 1, Handle2: 2, Offset: 1<<20 + 4096, Offset2: 1<<40 + 3, Size: 1 << 20, Ret: 5},
		{Op: OpCopyFileRange, Start: 60, Tid: 1, Path: 2, Path2: 3, Handle: 1, Handle2: 2, Offset: 7, Offset2: -1, Errno: uint16(syscall.EINVAL)},
	}
}

// TestOffset2 round-trips copy_file_range's output offset (format version 2) through
// Writer and Reader, and reads a version-1 file, which has no such column, as Offset2 0.
func TestOffset2(t *testing.T) {
	want := offset2Events()
	t.Run("version written", func(t *testing.T) {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testHeader(), WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w.Append(&want[i])
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close() }()
		if v := r.Header().Version; v != writeVersion {
			t.Errorf("header version %d, want %d", v, writeVersion)
		}
		if got := readAll(t, r); !slices.Equal(got, want) {
			t.Errorf("events:\n got %+v\nwant %+v", got, want)
		}
	})
	t.Run("version 1", func(t *testing.T) {
		h := testHeader()
		b := appendPreamble(nil, Version1)
		b = append(b, rawChunk(ChunkHeader, appendHeader(nil, &h))...)
		b = append(b, rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: "in"}, {ID: 3, Parent: 1, Name: "out"}}))...)
		b = append(b, rawChunk(ChunkEvents, appendEvents(nil, Version1, want, &offsetPredictor{}))...)
		foot := Footer{Events: uint64(len(want)), Chunks: 3, OpCounts: make([]uint64, NumOps)}
		for _, e := range want {
			foot.OpCounts[e.Op]++
		}
		b = append(b, rawChunk(ChunkFooter, appendFooter(nil, &foot))...)
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = r.Close() }()
		if v := r.Header().Version; v != Version1 {
			t.Errorf("header version %d, want %d", v, Version1)
		}
		got := readAll(t, r)
		if d := r.Damage(); len(d) != 0 {
			t.Errorf("damage: %v", d)
		}
		want1 := offset2Events()
		for i := range want1 {
			want1[i].Offset2 = 0
		}
		if !slices.Equal(got, want1) {
			t.Errorf("events:\n got %+v\nwant %+v", got, want1)
		}
	})
	t.Run("payload of the other version", func(t *testing.T) {
		var col []uint64
		var pred offsetPredictor
		if _, err := decodeEvents(appendEvents(nil, Version1, want, &pred), Version2, nil, &col, &pred); err == nil {
			t.Error("a version-1 payload decoded as version 2")
		}
		if _, err := decodeEvents(appendEvents(nil, Version2, want, &pred), Version1, nil, &col, &pred); err == nil {
			t.Error("a version-2 payload decoded as version 1")
		}
	})
}

func TestCreateOpen(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.iotap")
	w, err := Create(p, Header{Kind: "record"}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Origin() == 0 {
		t.Error("origin not set")
	}
	w.Append(&Event{Op: OpGetattr, Path: w.Path(RootPath, "x"), Start: Now() - w.Origin()})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	w.Append(&Event{Op: OpGetattr}) // after close: dropped, no panic
	if w.Stats().Dropped != 1 {
		t.Errorf("dropped = %d", w.Stats().Dropped)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	evs := readAll(t, r)
	if len(evs) != 1 || r.PathName(evs[0].Path) != "x" {
		t.Fatalf("events %+v", evs)
	}
	if r.Header().WallStart.IsZero() || r.Header().Origin == 0 {
		t.Errorf("header %+v", r.Header())
	}
}

func TestConcurrentAppend(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts WriterOptions
	}{
		{"default", WriterOptions{}},
		{"tiny-buffer-block", WriterOptions{BufferEvents: 64, ChunkEvents: 16, FlushInterval: time.Millisecond}},
		{"tiny-buffer-drop", WriterOptions{BufferEvents: 64, ChunkEvents: 16, DropWhenFull: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			// Observe sees every written event, in each producer's order.
			observed, seen := 0, map[uint32]int64{}
			tc.opts.Observe = func(evs []Event) {
				for _, e := range evs {
					if e.Offset < seen[e.Tid] {
						t.Errorf("observed tid %d offset %d after %d", e.Tid, e.Offset, seen[e.Tid])
					}
					seen[e.Tid] = e.Offset
					observed++
				}
			}
			w, err := NewWriter(&buf, Header{}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			const producers, per = 8, 20000
			var wg sync.WaitGroup
			for g := range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dir := w.Path(RootPath, "d")
					for i := range per {
						p := w.Path(dir, string(rune('a'+i%16)))
						w.Append(&Event{Op: OpRead, Tid: uint32(g + 1), Offset: int64(i), Path: p})
					}
				}()
			}
			wg.Wait()
			cost := LayerCost{Requests: 7, InLayer: 5000, Self: 300}
			w.SetLayerCost(cost)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			st := w.Stats()
			if uint64(observed) != st.Written {
				t.Errorf("observed %d events, wrote %d", observed, st.Written)
			}
			if st.EncodeCPU <= 0 {
				t.Errorf("encoder CPU %v after Close", st.EncodeCPU)
			}
			if st.Events+st.Dropped != producers*per {
				t.Errorf("events %d + dropped %d != %d", st.Events, st.Dropped, producers*per)
			}
			if !tc.opts.DropWhenFull && st.Dropped != 0 {
				t.Errorf("dropped %d in block mode", st.Dropped)
			}
			r, err := NewReader(&buf)
			if err != nil {
				t.Fatal(err)
			}
			// Per producer, offsets come out in order.
			next := map[uint32]int64{}
			n := 0
			for {
				e, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				n++
				if e.Offset < next[e.Tid] {
					t.Fatalf("tid %d: offset %d after %d", e.Tid, e.Offset, next[e.Tid])
				}
				if tc.opts.DropWhenFull {
					next[e.Tid] = e.Offset + 1
				} else if e.Offset != next[e.Tid] {
					t.Fatalf("tid %d: offset %d, want %d", e.Tid, e.Offset, next[e.Tid])
				} else {
					next[e.Tid]++
				}
				if name := r.PathName(e.Path); len(name) != 3 || name[:2] != "d/" {
					t.Fatalf("path %q", name)
				}
			}
			f, _ := r.Footer()
			if uint64(n) != st.Events || f == nil || f.Events != st.Events || f.Dropped != st.Dropped {
				t.Fatalf("read %d, stats %+v, footer %+v", n, st, f)
			}
			if f.Layer != cost || f.EncodeCPU != st.EncodeCPU {
				t.Errorf("footer cost %+v, encoder %v; want %+v, %v", f.Layer, f.EncodeCPU, cost, st.EncodeCPU)
			}
			t.Logf("stats %+v", st)
		})
	}
}

func TestAppendAllocs(t *testing.T) {
	w, err := NewWriter(io.Discard, Header{}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	dir := w.Path(RootPath, "dir")
	ev := Event{Op: OpRead, Tid: 7, Size: 4096}
	allocs := testing.AllocsPerRun(100000, func() {
		ev.Offset += 4096
		w.Append(&ev)
	})
	if allocs != 0 {
		t.Errorf("Append: %v allocs per event", allocs)
	}
	name := "file.txt"
	allocs = testing.AllocsPerRun(10000, func() {
		if w.Path(dir, name) == 0 {
			t.Fatal("zero id")
		}
	})
	if allocs != 0 {
		t.Errorf("Path hit: %v allocs", allocs)
	}
	allocs = testing.AllocsPerRun(10000, func() { _ = Now() })
	if allocs != 0 {
		t.Errorf("Now: %v allocs", allocs)
	}
}

// failWriter accepts limit bytes, then fails every write.
type failWriter struct {
	limit int
	n     int
}

var errDiskFull = errors.New("disk full")

func (f *failWriter) Write(b []byte) (int, error) {
	if f.n+len(b) > f.limit {
		return 0, errDiskFull
	}
	f.n += len(b)
	return len(b), nil
}

func TestWriteError(t *testing.T) {
	if _, err := NewWriter(&failWriter{limit: 10}, Header{}, WriterOptions{}); !errors.Is(err, errDiskFull) {
		t.Fatalf("header write: %v", err)
	}
	w, err := NewWriter(&failWriter{limit: 1000}, Header{}, WriterOptions{ChunkEvents: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		w.Append(&Event{Op: OpWrite, Offset: int64(i) * 7919, Start: int64(i) * 1e6})
	}
	if err := w.Close(); !errors.Is(err, errDiskFull) {
		t.Fatalf("Close: %v", err)
	}
	st := w.Stats()
	if st.Written+st.Dropped != 10000 || st.Dropped == 0 {
		t.Errorf("stats %+v: want every event written or dropped", st)
	}
}

// TestCreatePrivate: a trace written over a file readable by others is 0600, like a new one.
func TestCreatePrivate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.iotap")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Create(p, Header{}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

func TestCreateError(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "no", "such", "dir.iotap"), Header{}, WriterOptions{})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "trace: create") {
		t.Fatalf("err = %v", err)
	}
}

// TestCloseRace closes a writer while producers are appending: every accepted event is
// written, every other one is counted as dropped, nothing blocks or panics.
func TestCloseRace(t *testing.T) {
	for _, drop := range []bool{false, true} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, Header{}, WriterOptions{BufferEvents: 256, ChunkEvents: 64, DropWhenFull: drop})
		if err != nil {
			t.Fatal(err)
		}
		const producers, per = 4, 50000
		var wg sync.WaitGroup
		for g := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					w.Append(&Event{Op: OpRead, Tid: uint32(g), Offset: int64(i)})
					if i%1000 == 0 {
						w.Path(RootPath, strconv.Itoa(i))
					}
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		st := w.Stats()
		if st.Events+st.Dropped != producers*per || st.Written != st.Events {
			t.Errorf("drop=%v: stats %+v", drop, st)
		}
		r, err := NewReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(readAll(t, r)); uint64(n) != st.Written {
			t.Errorf("drop=%v: read %d, written %d", drop, n, st.Written)
		}
		if f, ok := r.Footer(); !ok || f.Events != st.Written {
			t.Errorf("drop=%v: footer %+v", drop, f)
		}
	}
}

// TestFlushInterval checks that pending events reach the file within about one
// FlushInterval, without Close, and that the open file is readable meanwhile.
func TestFlushInterval(t *testing.T) {
	p := filepath.Join(t.TempDir(), "live.iotap")
	w, err := Create(p, Header{}, WriterOptions{FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	dir := w.Path(RootPath, "d")
	for i := range 10 {
		w.Append(&Event{Op: OpMkdir, Path: dir, Tid: uint32(i), Offset: int64(i)})
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Stats().Written < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("not flushed after 5s: %+v", w.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	evs := readAll(t, r)
	if len(evs) != 10 || r.PathName(evs[0].Path) != "d" {
		t.Errorf("live read: %d events, path %q", len(evs), r.PathName(evs[0].Path))
	}
	if d := r.Damage(); len(d) != 1 || !errors.Is(d[0], ErrNoFooter) {
		t.Errorf("live read damage %v, want only ErrNoFooter", d)
	}
}

func TestShardSize(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("padding is sized for 64-bit platforms")
	}
	if s := unsafe.Sizeof(shard{}); s != 128 {
		t.Errorf("shard is %d bytes, want 128 (update the padding)", s)
	}
}

func TestTypeOfMode(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode uint32
		want FileType
	}{
		{"regular", 0o100644, TypeFile},
		{"directory", 0o040755, TypeDir},
		{"symlink", 0o120777, TypeSymlink},
		{"fifo", 0o010644, TypeOther},
		{"socket", 0o140755, TypeOther},
		{"no type bits", 0o644, TypeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TypeOfMode(tc.mode); got != tc.want {
				t.Errorf("TypeOfMode(%o) = %v, want %v", tc.mode, got, tc.want)
			}
		})
	}
}

// TestFooterWithoutCost: a footer written before the cost fields existed reads with a zero
// cost; one with them reads them back.
func TestFooterWithoutCost(t *testing.T) {
	f := Footer{Events: 3, OpCounts: []uint64{0, 3}, WallClose: time.Unix(1, 0).UTC()}
	full := appendFooter(nil, &f)
	old := full[:len(full)-6] // the six cost fields are one byte each when zero
	var got Footer
	if err := decodeFooter(old, &got); err != nil || got.Events != 3 || got.EncodeCPU != 0 || got.Layer != (LayerCost{}) {
		t.Errorf("old footer: %+v, %v", got, err)
	}
	f.EncodeCPU, f.Layer = 1234567, LayerCost{Requests: 1 << 40, InLayer: 9e9, Self: 3e8, Threads: 77, Resolve: 5e6}
	got = Footer{}
	if err := decodeFooter(appendFooter(nil, &f), &got); err != nil || got.EncodeCPU != f.EncodeCPU || got.Layer != f.Layer {
		t.Errorf("footer with cost: %+v, %v", got, err)
	}
	withCost := appendFooter(nil, &f)
	f.Layer.Connector, f.Layer.Late, f.Layer.Missing = true, 12, 3
	got = Footer{}
	if err := decodeFooter(appendFooter(nil, &f), &got); err != nil || got.Layer != f.Layer || got.Lost != 0 || got.WriteError != "" {
		t.Errorf("footer with attribution: %+v, %v", got, err)
	}
	got = Footer{}
	if err := decodeFooter(withCost, &got); err != nil || got.Layer.Connector || got.Layer.Late != 0 {
		t.Errorf("footer without attribution: %+v, %v", got, err)
	}
	f.Lost, f.WriteError = 5, "no space"
	got = Footer{}
	if err := decodeFooter(appendFooter(nil, &f), &got); err != nil || got.Layer != f.Layer || got.Lost != 5 || got.WriteError != "no space" {
		t.Errorf("footer with attribution and a failed write: %+v, %v", got, err)
	}
}

// TestFooterRoundTrip: the measured round trip reads back, with or without a failed
// write before it or the attribution fields after it; a footer without it (clean, or
// written before it existed) reads zero.
func TestFooterRoundTrip(t *testing.T) {
	rt := RoundTrip{Start: 21500, Run: 48250, Samples: 17}
	for _, tc := range []struct {
		name string
		f    Footer
	}{
		{"clean", Footer{Events: 3, OpCounts: []uint64{0, 3}, RoundTrip: rt}},
		{"after a failed write", Footer{Events: 3, Lost: 2, WriteError: "disk full", RoundTrip: rt}},
		{"none", Footer{Events: 3}},
		{"failed write, none", Footer{Events: 3, Lost: 2, WriteError: "disk full"}},
		{"with attribution", Footer{Events: 3, RoundTrip: rt, Layer: LayerCost{Connector: true, Late: 4, Missing: 1}}},
		{"attribution, none", Footer{Events: 3, Layer: LayerCost{Connector: true, Late: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.WallClose = time.Unix(1, 0).UTC()
			var got Footer
			if err := decodeFooter(appendFooter(nil, &tc.f), &got); err != nil || got.RoundTrip != tc.f.RoundTrip || got.Layer != tc.f.Layer ||
				got.Lost != tc.f.Lost || got.WriteError != tc.f.WriteError || got.Events != 3 {
				t.Errorf("footer %+v read as %+v, %v", tc.f, got, err)
			}
		})
	}
	// A writer's footer carries what SetRoundTrip set.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetRoundTrip(rt)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, r)
	if f, ok := r.Footer(); !ok || f.RoundTrip != rt {
		t.Errorf("footer %+v (%v), want round trip %+v", f, ok, rt)
	}
}

// TestThreadlessOrder: events without a thread (the kernel's own, such as FORGET) share one
// shard, so they are written in the order they were appended.
func TestThreadlessOrder(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{}, WriterOptions{ChunkEvents: 64, BufferEvents: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	for i := range n {
		w.Append(&Event{Op: OpForget, Node: uint64(i + 1)})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	evs := readAll(t, r)
	if len(evs) != n {
		t.Fatalf("read %d events, want %d", len(evs), n)
	}
	for i, e := range evs {
		if e.Node != uint64(i+1) {
			t.Fatalf("event %d is node %d: out of order", i, e.Node)
		}
	}
}
