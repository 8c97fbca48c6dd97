package trace_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

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
	damageWith(t, r, trace.ErrCorrupt, "exceeds the limit of 4096")
	damageWith(t, r, trace.ErrCorrupt, "no record")
	if n != 300 || r.PathName(3) != "?3" {
		t.Errorf("%d events, child named %q", n, r.PathName(3))
	}
	// The name is decompressed (60 MiB, within MaxChunkRaw) and never copied.
	if longAlloc > 80<<20 {
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
