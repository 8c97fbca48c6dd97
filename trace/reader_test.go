package trace

import (
	"bytes"
	"errors"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smallTrace writes a trace of n events in chunks of chunk events, one thread.
func smallTrace(t testing.TB, n, chunk int) []byte {
	t.Helper()
	var buf bytes.Buffer
	// No timed flushes: chunk boundaries depend only on the counts.
	w, err := NewWriter(&buf, testHeader(), WriterOptions{ChunkEvents: chunk, BufferEvents: 1 << 12, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := w.Path(RootPath, "dir")
	for i := range n {
		w.Append(&Event{Op: OpRead, Start: int64(i) * 1000, Dur: 500, Tid: 1, Path: dir, Offset: int64(i)})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chunkOffsets returns the offsets of the chunks of a well-formed trace.
func chunkOffsets(t testing.TB, b []byte) []int {
	var offs []int
	for off := preambleSize; off < len(b); {
		f, reason := parseFrame(b[off : off+frameSize])
		if reason != "" {
			t.Fatalf("bad frame at %d: %s", off, reason)
		}
		offs = append(offs, off)
		off += frameSize + int(f.payload)
	}
	return offs
}

// rawChunk frames an uncompressed payload.
func rawChunk(t ChunkType, payload []byte) []byte {
	b := appendFrame(nil, frame{payload: uint32(len(payload)), typ: t, raw: uint32(len(payload)), sum: crc(payload)})
	return append(b, payload...)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := smallTrace(t, 10, 100)
	v6 := bytes.Clone(good)
	v6[8] = 6
	for _, tc := range []struct {
		name    string
		data    []byte
		want    error
		message string
	}{
		{"empty", nil, ErrEmpty, "empty file"},
		{"text", []byte("hello world, this is not a trace\n"), ErrNotTrace, "not an iotap trace"},
		{"one-byte", []byte("x"), ErrNotTrace, "not an iotap trace"},
		{"magic-prefix", []byte(magic[:5]), ErrEmpty, "preamble"},
		{"version", v6, ErrVersion, "unsupported format version 6"},
		{"preamble-only", good[:preambleSize], ErrEmpty, "no header"},
		{"header-cut", good[:preambleSize+frameSize+3], ErrEmpty, "header chunk cut short"},
		{"events-first", append(appendPreamble(nil, 1), rawChunk(ChunkEvents, []byte{0})...), ErrCorrupt, "first chunk is not the header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := Open(p)
			if err == nil {
				_ = r.Close()
				t.Fatal("no error")
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err = %v, want %v containing %q", err, tc.want, tc.message)
			}
		})
	}
	_, err := Open(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestDamage(t *testing.T) {
	good := smallTrace(t, 1000, 100) // header, paths, 10 events chunks, footer
	offs := chunkOffsets(t, good)
	if len(offs) != 13 {
		t.Fatalf("%d chunks", len(offs))
	}
	ev3 := offs[5] // fourth events chunk
	flip := func(at int) []byte {
		b := bytes.Clone(good)
		b[at] ^= 0x40
		return b
	}
	insert := func(at int, extra []byte) []byte {
		return append(append(bytes.Clone(good[:at]), extra...), good[at:]...)
	}
	for _, tc := range []struct {
		name      string
		data      []byte
		events    int
		damage    []error
		reason    string
		footer    bool
		strictErr error
	}{
		{"clean", good, 1000, nil, "", true, nil},
		{"payload-bit", flip(ev3 + frameSize + 10), 900, []error{ErrCorrupt, ErrMismatch}, "payload checksum mismatch", true, ErrCorrupt},
		{"frame-bit", flip(ev3 + 2), 900, []error{ErrCorrupt, ErrMismatch}, "frame checksum mismatch; skipped", true, ErrCorrupt},
		{"unknown-type", insert(ev3, rawChunk(9, []byte("future"))), 1000, []error{ErrCorrupt, ErrMismatch}, "unknown chunk type", true, ErrCorrupt},
		{"absurd-length", insert(ev3, appendFrame(nil, frame{payload: 1 << 31, typ: ChunkEvents, flags: flagZstd, raw: 10})), 1000, []error{ErrCorrupt}, "exceeds limit", true, ErrCorrupt},
		{"bad-zstd", insert(ev3, append(appendFrame(nil, frame{payload: 4, typ: ChunkEvents, flags: flagZstd, raw: 10, sum: crc([]byte("junk"))}), "junk"...)), 1000, []error{ErrCorrupt, ErrMismatch}, "decompress", true, ErrCorrupt},
		{"bad-events", insert(ev3, rawChunk(ChunkEvents, []byte{5, 1, 2})), 1000, []error{ErrCorrupt, ErrMismatch}, "count 5 exceeds", true, ErrCorrupt},
		{"garbage-between", insert(ev3, []byte("garbage garbage garbage")), 1000, []error{ErrCorrupt}, "skipped 23 bytes", true, ErrCorrupt},
		{"cut-in-chunk", good[:ev3+frameSize+5], 300, []error{ErrTruncated, ErrNoFooter}, "payload has 5 of", false, ErrTruncated},
		{"cut-in-frame", good[:ev3+7], 300, []error{ErrTruncated, ErrNoFooter}, "7 bytes left", false, ErrTruncated},
		{"cut-at-boundary", good[:ev3], 300, []error{ErrNoFooter}, "no footer", false, nil},
		{"after-footer", append(bytes.Clone(good), rawChunk(ChunkPaths, []byte{0})...), 1000, []error{ErrCorrupt}, "after the footer", true, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			evs := readAll(t, r)
			if len(evs) != tc.events {
				t.Errorf("%d events, want %d", len(evs), tc.events)
			}
			d := r.Damage()
			if len(d) != len(tc.damage) {
				t.Fatalf("damage %v, want %v", d, tc.damage)
			}
			for i := range d {
				if !errors.Is(d[i], tc.damage[i]) {
					t.Errorf("damage[%d] = %v, want %v", i, d[i], tc.damage[i])
				}
			}
			if len(d) > 0 && !strings.Contains(d[0].Error(), tc.reason) {
				t.Errorf("damage %q does not say %q", d[0], tc.reason)
			}
			var ce *ChunkError
			if len(d) > 0 && errors.As(d[0], &ce) && tc.name != "garbage-between" && tc.name != "after-footer" && ce.Offset != int64(ev3) {
				t.Errorf("offset %d, want %d", ce.Offset, ev3)
			}
			if _, ok := r.Footer(); ok != tc.footer {
				t.Errorf("footer %v, want %v", ok, tc.footer)
			}

			// Strict mode stops at the first damaged chunk.
			r, err = NewReader(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			r.SetStrict(true)
			for {
				_, err = r.Next()
				if err != nil {
					break
				}
			}
			if tc.strictErr == nil && err != io.EOF || tc.strictErr != nil && !errors.Is(err, tc.strictErr) {
				t.Errorf("strict: %v, want %v", err, tc.strictErr)
			}
			if _, err2 := r.Next(); err2 != err {
				t.Errorf("error not sticky: %v then %v", err, err2)
			}
		})
	}
}

// TestTruncateEverywhere cuts a trace at every byte: the reader never fails, and returns
// every event of every complete chunk.
func TestTruncateEverywhere(t *testing.T) {
	good := smallTrace(t, 300, 50)
	offs := chunkOffsets(t, good)
	for cut := 0; cut <= len(good); cut++ {
		r, err := NewReader(bytes.NewReader(good[:cut]))
		if err != nil {
			if cut > offs[1] {
				t.Fatalf("cut %d: %v", cut, err)
			}
			if !errors.Is(err, ErrEmpty) {
				t.Fatalf("cut %d: %v", cut, err)
			}
			continue
		}
		evs := readAll(t, r)
		complete := 0
		for i, o := range offs {
			end := len(good)
			if i+1 < len(offs) {
				end = offs[i+1]
			}
			if end <= cut && i >= 2 && i < len(offs)-1 {
				complete++
			}
			_ = o
		}
		if len(evs) != complete*50 {
			t.Fatalf("cut %d: %d events, want %d", cut, len(evs), complete*50)
		}
		for i, e := range evs {
			if e.Offset != int64(i) {
				t.Fatalf("cut %d: event %d has offset %d", cut, i, e.Offset)
			}
		}
		_, footer := r.Footer()
		if footer != (cut == len(good)) || footer != (len(r.Damage()) == 0) {
			t.Fatalf("cut %d: footer %v, damage %v", cut, footer, r.Damage())
		}
	}
}

// TestPathRecordsChecked: records no writer writes are refused (a parent that is not an
// earlier id, which is how a table could loop; an id twice), and a missing parent shows as
// its id.
func TestPathRecordsChecked(t *testing.T) {
	r := &Reader{paths: map[uint32]pathEntry{}, names: map[uint32]string{}, firstID: map[uint64]uint32{}, seed: maphash.MakeSeed()}
	for _, tc := range []struct {
		rec  PathRecord
		fail string
	}{
		{PathRecord{ID: 5, Parent: 6, Name: "a"}, "not an earlier id"},
		{PathRecord{ID: 6, Parent: 6, Name: "b"}, "not an earlier id"},
		{PathRecord{ID: 100, Parent: 99, Name: "c"}, ""},
		{PathRecord{ID: 101, Parent: 100, Name: "d"}, ""},
		{PathRecord{ID: 101, Parent: 100, Name: "e"}, "recorded twice"},
		{PathRecord{ID: 102, Parent: 101, Name: strings.Repeat("x", MaxPath-len("?99/c/d/")+1)}, "more than the limit"},
		{PathRecord{ID: 103, Parent: 101, Name: strings.Repeat("x", MaxPath-len("?99/c/d/"))}, ""},
	} {
		err := r.addPath(tc.rec)
		if (err == nil) != (tc.fail == "") || err != nil && !strings.Contains(err.Error(), tc.fail) {
			t.Errorf("%+v: error %v, want %q", tc.rec.ID, err, tc.fail)
		}
	}
	if got := r.PathName(101); got != "?99/c/d" {
		t.Errorf("unknown parent: %q", got)
	}
	if got := r.PathName(100); got != "?99/c" {
		t.Errorf("unknown parent: %q", got)
	}
	if got := r.PathName(103); len(got) != MaxPath {
		t.Errorf("longest path: %d bytes", len(got))
	}
	if got := r.PathName(5); got != "?5" {
		t.Errorf("refused record: %q", got)
	}
}
