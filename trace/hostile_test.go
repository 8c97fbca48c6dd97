package trace_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracecraft"
)

// readCounting reads every event of b, resolving its paths, and returns the reader (for
// Damage), the events read and the bytes allocated meanwhile.
func readCounting(t *testing.T, b []byte) (r *trace.Reader, events int, alloc uint64) {
	t.Helper()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	r, err := trace.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events++
		if n := r.PathName(e.Path); len(n) > trace.MaxPath {
			t.Fatalf("path of %d bytes", len(n))
		}
	}
	runtime.ReadMemStats(&m1)
	return r, events, m1.TotalAlloc - m0.TotalAlloc
}

// damageWith fails unless some entry of r.Damage wraps want and contains text.
func damageWith(t *testing.T, r *trace.Reader, want error, text string) {
	t.Helper()
	for _, d := range r.Damage() {
		if errors.Is(d, want) && strings.Contains(d.Error(), text) {
			return
		}
	}
	t.Errorf("damage %v: no %v with %q", r.Damage(), want, text)
}

// TestHostileSideTables: side tables that would make a reader hold gigabytes are refused as
// damage, and reading them allocates no more than a chunk's decompressed bytes and the
// side-table limit.
func TestHostileSideTables(t *testing.T) {
	long, err := tracecraft.LongName(60<<20, 300) // a 60 MiB name with 300 children
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("long-name trace: %d bytes", len(long))
	r, n, longAlloc := readCounting(t, long)
	damageWith(t, r, trace.ErrCorrupt, "paths chunk of 62916733 bytes for 301 records")
	damageWith(t, r, trace.ErrCorrupt, "no record")
	if n != 300 || r.PathName(3) != "?3" {
		t.Errorf("%d events, child named %q", n, r.PathName(3))
	}
	// The chunk is refused before it is decompressed.
	if longAlloc > 4<<20 {
		t.Errorf("long name: allocated %d MiB", longAlloc>>20)
	}

	many, err := tracecraft.ManyPaths(40, 16<<20, 4000) // 640 MiB of records
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("many-paths trace: %d bytes", len(many))
	r, _, alloc := readCounting(t, many)
	damageWith(t, r, trace.ErrCorrupt, "side tables would hold more than")
	if limit := uint64(trace.SideTableBytes + trace.SideTableRatio*len(many)); alloc > limit+2*trace.MaxChunkRaw {
		t.Errorf("many paths: allocated %d MiB, limit %d MiB", alloc>>20, limit>>20)
	}
	t.Logf("allocated: long name %d MiB, many paths %d MiB", longAlloc>>20, alloc>>20)
}

// TestChunkSequenceDamage: chunks with valid checksums whose contents no writer produces
// are damage, and a repeated events chunk is not read twice.
func TestChunkSequenceDamage(t *testing.T) {
	ids := []uint32{2, 3, 2, 3}
	good, err := tracecraft.Recorded(ids)
	if err != nil {
		t.Fatal(err)
	}
	good, err = tracecraft.WithPaths(good, tracecraft.Paths([]trace.PathRecord{{ID: 2, Parent: 1, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}}))
	if err != nil {
		t.Fatal(err)
	}
	// WithPaths adds a chunk the writer's footer does not count: use the counts it has.
	if r, n, _ := readCounting(t, good); n != len(ids) || r.PathName(3) != "a/b" || len(r.Damage()) != 0 {
		t.Fatalf("base trace: %d events, %q, damage %v", n, r.PathName(3), r.Damage())
	}
	bad, err := tracecraft.Damaged(good)
	if err != nil {
		t.Fatal(err)
	}
	// A negative duration, written by a Writer that does not check it.
	var neg bytes.Buffer
	w, err := trace.NewWriter(&neg, trace.Header{}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(&trace.Event{Op: trace.OpGetattr, Dur: -5, Path: trace.RootPath})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	bad["negative-duration"] = neg.Bytes()

	for _, tc := range []struct {
		name   string
		events int
		want   error
		text   string
	}{
		{"paths-deleted", 4, trace.ErrCorrupt, "no record 4 times (first: id 2)"},
		{"paths-deleted", 4, trace.ErrMismatch, "chunks before it"},
		{"events-repeated", 4, trace.ErrCorrupt, "repeats the chunk at offset"},
		{"events-repeated", 4, trace.ErrMismatch, "chunks before it"},
		{"op-255", 0, trace.ErrCorrupt, "op 255 is not an operation"},
		{"op-255", 0, trace.ErrMismatch, "4 events, 0 were read"},
		{"path-cycle", 4, trace.ErrCorrupt, "path id 2 names parent 3, not an earlier id"},
		{"negative-duration", 0, trace.ErrCorrupt, "negative duration -5 ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, n, _ := readCounting(t, bad[tc.name])
			if n != tc.events {
				t.Errorf("%d events, want %d", n, tc.events)
			}
			damageWith(t, r, tc.want, tc.text)
			// Strict mode stops at the first damage.
			s, err := trace.NewReader(bytes.NewReader(bad[tc.name]))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			s.SetStrict(true)
			for err == nil {
				_, err = s.Next()
			}
			if err == io.EOF {
				t.Errorf("strict reader ended with EOF, damage %v", s.Damage())
			}
		})
	}
}

// TestDeclaredLengthsBounded: a tiny trace whose chunk frame, or whose zstd frame inside
// it, says the chunk decompresses to 64 MiB is corrupt, and reading it allocates about
// what the file holds, not what it declares.
func TestDeclaredLengthsBounded(t *testing.T) {
	small, err := os.ReadFile("../testdata/trace/v3-small.iotap")
	if err != nil {
		t.Fatal(err)
	}
	_, chunks, err := tracecraft.Split(small)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	events := enc.EncodeAll(chunks[len(chunks)-2].Payload, nil)
	_ = enc.Close()
	// A zstd frame by hand: single segment, a 4-byte content size of 64 MiB, then one raw
	// block of 10 bytes.
	lying := []byte{0x28, 0xB5, 0x2F, 0xFD, 0xA0}
	lying = binary.LittleEndian.AppendUint32(lying, trace.MaxChunkRaw)
	lying = append(lying, 10<<3|1, 0, 0)
	lying = append(lying, make([]byte, 10)...)
	for _, tc := range []struct {
		name   string
		stored []byte
		raw    uint32
		reason string
	}{
		{"chunk frame says 64 MiB", events, trace.MaxChunkRaw, "zstd blocks hold at most"},
		{"zstd frame says 64 MiB", lying, trace.MaxChunkRaw, "zstd blocks hold at most 10"},
		{"zstd frame says more than the chunk frame", lying, 10, "declare 67108864 bytes, the chunk frame 10"},
		{"not zstd", []byte("not a zstd frame at all"), 1 << 20, "not whole zstd frames"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := append(tracecraft.Preamble(trace.Version3), tracecraft.Frame(chunks[0].Type, chunks[0].Payload, true)...)
			file = append(file, tracecraft.FrameRaw(trace.ChunkEvents, tc.stored, 1, tc.raw)...)
			if len(file) > 4<<10 {
				t.Fatalf("crafted trace of %d bytes", len(file))
			}
			r, _, alloc := readCounting(t, file)
			damageWith(t, r, trace.ErrCorrupt, tc.reason)
			if alloc > 4<<20 {
				t.Errorf("reading a %d-byte trace allocated %d bytes", len(file), alloc)
			}
		})
	}
}

// TestLongRecordsRefused: a chunk of a few kilobytes whose zstd frame decompresses,
// legitimately, to 64 MiB that no writer makes (a name of 64 MiB, a command name, a
// series of samples, one event, a header) is damage, refused before the reader makes room
// for it: reading it allocates a few MiB, not the 64 it says.
func TestLongRecordsRefused(t *testing.T) {
	rec, err := tracecraft.Recorded([]uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	_, chunks, err := tracecraft.Split(rec)
	if err != nil {
		t.Fatal(err)
	}
	const long = 64<<20 - 64
	str := func(b []byte, n int) []byte {
		return append(binary.AppendUvarint(b, uint64(n)), bytes.Repeat([]byte("a"), n)...)
	}
	uv := func(b []byte, vs ...uint64) []byte {
		for _, v := range vs {
			b = binary.AppendUvarint(b, v)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		typ     trace.ChunkType
		payload []byte
		reason  string
	}{
		{"a name of 64 MiB", trace.ChunkPaths, str(uv(nil, 1, 2, 1), long), "paths chunk of 67108807 bytes for 1 records"},
		{"a command name of 64 MiB", trace.ChunkProcesses, str(append(uv(nil, 1, 7, 7, 1), 0), long), "processes chunk of"},
		{"a series name of 64 MiB", trace.ChunkSamples, str(uv(append(uv(nil, 1), byte(trace.RoleSelf)), 7), long), "samples chunk of"},
		{"one event of 64 MiB", trace.ChunkEvents, append(uv(nil, 1), bytes.Repeat([]byte{byte(trace.OpLookup)}, long)...), "events chunk of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := append(tracecraft.Preamble(trace.Version4), tracecraft.Frame(chunks[0].Type, chunks[0].Payload, true)...)
			file = append(file, tracecraft.Frame(tc.typ, tc.payload, true)...)
			for _, c := range chunks[1:] {
				file = append(file, tracecraft.Frame(c.Type, c.Payload, true)...)
			}
			if len(file) > 16<<10 {
				t.Fatalf("crafted trace of %d bytes", len(file))
			}
			r, _, alloc := readCounting(t, file)
			damageWith(t, r, trace.ErrCorrupt, tc.reason)
			if alloc > 4<<20 {
				t.Errorf("reading a %d-byte trace allocated %d MiB", len(file), alloc>>20)
			}
		})
	}
	t.Run("a header of 64 MiB", func(t *testing.T) {
		h := str(nil, long) // the kind
		file := append(tracecraft.Preamble(trace.Version4), tracecraft.Frame(trace.ChunkHeader, h, true)...)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		r, err := trace.NewReader(bytes.NewReader(file))
		runtime.ReadMemStats(&m1)
		if err == nil {
			_ = r.Close()
			t.Fatal("a header of 64 MiB read")
		}
		if !errors.Is(err, trace.ErrCorrupt) || !strings.Contains(err.Error(), "header of") {
			t.Errorf("error %v", err)
		}
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 4<<20 {
			t.Errorf("reading a %d-byte trace allocated %d MiB", len(file), alloc>>20)
		}
	})
}

// TestLargestChunksRead: the largest chunks a writer makes (as many events as a chunk
// holds, each with fields of the widest encoding; names of MaxName bytes; processes with
// the longest names and command lines; series of samples as long as a chunk holds) read
// back whole: the bounds on what records hold (TestLongRecordsRefused) refuse nothing a
// writer writes.
func TestLargestChunksRead(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Kind: "record"},
		trace.WriterOptions{ChunkEvents: trace.MaxChunkEvents, BufferEvents: 2 * trace.MaxChunkEvents, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", trace.MaxName)
	parent := uint32(trace.RootPath)
	var ids []uint32
	for i := range 1500 {
		id := w.Path(parent, fmt.Sprintf("%04d", i)+name[4:])
		ids = append(ids, id)
	}
	args := []string{strings.Repeat("a", trace.MaxCmdline/2), strings.Repeat("b", trace.MaxCmdline/2)}
	for i := range 400 {
		w.AddProcess(trace.Process{Tid: uint32(1<<31 + i), Pid: 1 << 31, PPid: 1 << 31, FirstSeen: -1 << 62,
			Comm: name, Exe: name, Cmdline: args})
	}
	pts := make([]trace.Sample, trace.MaxSamplesPerRecord)
	for i := range pts {
		s := int64(1) << 62
		if i%2 == 1 {
			s = -s
		}
		pts[i] = trace.Sample{T: int64(i) << 40, RSS: uint64(s), User: time.Duration(s), Sys: time.Duration(-s),
			ReadBytes: uint64(s), WriteBytes: uint64(-s), RChar: uint64(s), WChar: uint64(-s)}
	}
	for i := range 4 {
		w.AddSamples(trace.Samples{Role: trace.RoleSelf, Pid: uint32(1<<31 + i), Name: name, Points: pts})
	}
	for i := range trace.MaxChunkEvents {
		big := int64(1)<<62 + int64(i)
		w.Append(&trace.Event{Op: trace.OpWrite, Start: big, Dur: big, Offset: big, Offset2: big, Ret: -big,
			Size: 1<<32 - 1, Handle: 1<<64 - 1, Handle2: 1<<64 - 1, Node: 1<<64 - 1, Node2: 1<<64 - 1,
			Path: ids[i%len(ids)], Path2: ids[(i+1)%len(ids)], Tid: 1<<32 - 1, Pid: 1<<32 - 1,
			Uid: 1<<32 - 1, Gid: 1<<32 - 1, Flags: 1<<32 - 1, Mode: 1<<32 - 1, Errno: 1<<16 - 1})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, n, _ := readCounting(t, buf.Bytes())
	if len(r.Damage()) != 0 || n != trace.MaxChunkEvents || len(r.Processes()) != 400 {
		t.Errorf("read %d events, %d processes, damage %v", n, len(r.Processes()), r.Damage())
	}
}
