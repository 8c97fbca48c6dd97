package trace

import (
	"bytes"
	"hash/maphash"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader: it must never panic, never loop
// forever, and never allocate more than the frame limits allow.
//
//	go test ./trace -run '^$' -fuzz FuzzReader -fuzztime 30s
func FuzzReader(f *testing.F) {
	good := smallTrace(f, 200, 40)
	f.Add(good)
	f.Add(good[:len(good)/2])
	for _, p := range []string{goldenPath, goldenV2Path, goldenV3Path} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	var mix bytes.Buffer
	if err := writeGolden(&mix); err == nil {
		f.Add(mix.Bytes())
	}
	// Uncompressed chunks let the fuzzer reach the payload decoders without zstd.
	var h Header
	for _, v := range []uint16{Version1, Version2} {
		hdr := append(appendPreamble(nil, v), rawChunk(ChunkHeader, appendHeader(nil, &h))...)
		f.Add(append(bytes.Clone(hdr), rawChunk(ChunkEvents, appendEvents(nil, v, []Event{{Op: OpRead, Start: 5, Handle: 1, Size: 10, Ret: 10}, {Op: OpCopyFileRange, Handle: 1, Offset: 10, Offset2: 7}}, &offsetPredictor{}))...))
	}
	hdr3 := append(appendPreamble(nil, Version3), rawChunk(ChunkHeader, appendHeader(nil, &h))...)
	f.Add(append(bytes.Clone(hdr3), rawChunk(ChunkSamples, appendSamples(nil, goldenSamples()))...))
	hdr := append(appendPreamble(nil, Version2), rawChunk(ChunkHeader, appendHeader(nil, &h))...)
	f.Add(hdr)
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}}))...))
	// A pair recorded twice (a bounded path index), a file record and events on the repeat.
	rep := append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{
		{ID: 2, Parent: 1, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}, {ID: 4, Parent: 1, Name: "a"}, {ID: 5, Parent: 4, Name: "b"}}))...)
	rep = append(rep, rawChunk(ChunkFiles, appendFiles(nil, []File{{Path: 5, Size: 1}}))...)
	f.Add(append(rep, rawChunk(ChunkEvents, appendEvents(nil, Version2, []Event{{Op: OpRename, Path: 5, Path2: 4}}, &offsetPredictor{}))...))
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkProcesses, appendProcesses(nil, []Process{{Tid: 1, Comm: "x"}}))...))
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkFiles, appendFiles(nil, []File{{Path: 2, Size: 5}}))...))
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkFooter, appendFooter(nil, &Footer{OpCounts: []uint64{1, 2}}))...))
	// Side tables and chunk sequences no writer produces: a name past MaxName, records
	// that loop, a path past MaxPath, a repeated events chunk, a footer whose counts
	// disagree, op 255.
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: strings.Repeat("x", MaxName+1)}}))...))
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{{ID: 2, Parent: 3, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}}))...))
	deep := []PathRecord{{ID: 2, Parent: 1, Name: strings.Repeat("d", MaxName)}, {ID: 3, Parent: 2, Name: strings.Repeat("e", MaxName)}}
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, deep))...))
	evc := rawChunk(ChunkEvents, appendEvents(nil, Version2, []Event{{Op: OpGetattr, Path: 2, Dur: 3}}, &offsetPredictor{}))
	dup := append(append(bytes.Clone(hdr), rawChunk(ChunkPaths, appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: "a"}}))...), evc...)
	f.Add(append(bytes.Clone(dup), evc...))
	f.Add(append(dup, rawChunk(ChunkFooter, appendFooter(nil, &Footer{Events: 2, Chunks: 2, OpCounts: []uint64{0, 0, 0, 2}}))...))
	op255 := appendEvents(nil, Version2, []Event{{Op: OpGetattr, Path: 1}}, &offsetPredictor{})
	op255[1] = 255
	f.Add(append(bytes.Clone(hdr), rawChunk(ChunkEvents, op255)...))
	f.Add([]byte(magic))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		defer func() { _ = r.Close() }()
		_ = r.Header()
		for i := 0; ; i++ {
			e, err := r.Next()
			if err != nil {
				break
			}
			if i > len(data) {
				t.Fatalf("%d events from %d bytes", i, len(data))
			}
			if !e.Op.Valid() || e.Dur < 0 {
				t.Fatalf("event %d: op %d, duration %d", i, e.Op, e.Dur)
			}
			for _, id := range []uint32{e.Path, e.Path2} {
				if n := r.PathName(id); len(n) > MaxPath {
					t.Fatalf("path %d: %d bytes", id, len(n))
				}
			}
			_, _ = r.Process(e.Tid)
		}
		r.Footer()
		for _, d := range r.Damage() {
			_ = d.Error()
		}
		r.Processes()
		r.Files()
		if limit := SideTableBytes + SideTableRatio*r.off; r.side > limit {
			t.Fatalf("side tables hold %d bytes, limit %d", r.side, limit)
		}
	})
}

// versionBit in FuzzPayload's type byte selects format version 2 (events payloads).
const versionBit = 0x80

// FuzzPayload feeds arbitrary bytes to every payload decoder directly, past the frame
// checksums that keep FuzzReader's mutations from reaching them. The type byte's low
// bits pick the decoder, its top bit (versionBit) the format version.
func FuzzPayload(f *testing.F) {
	var h Header
	f.Add(byte(ChunkHeader), appendHeader(nil, &h))
	th := testHeader()
	f.Add(byte(ChunkHeader), appendHeader(nil, &th))
	evs1 := []Event{{Op: OpRead, Start: 5, Handle: 1, Size: 10, Ret: 10}, {Op: OpWrite, Handle: 1, Offset: 10, Path: 1 << 31}}
	f.Add(byte(ChunkEvents), appendEvents(nil, Version1, evs1, &offsetPredictor{}))
	evs2 := append(evs1, Event{Op: OpCopyFileRange, Handle: 1, Handle2: 2, Offset: 20, Offset2: -3})
	f.Add(byte(ChunkEvents)|versionBit, appendEvents(nil, Version2, evs2, &offsetPredictor{}))
	f.Add(byte(ChunkPaths), appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: "a"}}))
	f.Add(byte(ChunkPaths), appendPaths(nil, []PathRecord{{ID: 2, Parent: 3, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}, {ID: 4, Parent: 3, Name: "c"}}))
	f.Add(byte(ChunkPaths), appendPaths(nil, []PathRecord{{ID: 2, Parent: 1, Name: strings.Repeat("d", MaxName)}, {ID: 3, Parent: 2, Name: strings.Repeat("e", MaxName)}, {ID: 3, Parent: 1, Name: "again"}}))
	f.Add(byte(ChunkProcesses), appendProcesses(nil, []Process{{Tid: 1, Comm: "x", Exe: "/x"}}))
	f.Add(byte(ChunkFiles), appendFiles(nil, []File{{Path: 2, Size: 5}}))
	f.Add(byte(ChunkFooter), appendFooter(nil, &Footer{OpCounts: []uint64{1, 2}}))
	f.Add(byte(ChunkSamples), appendSamples(nil, goldenSamples()))
	var col []uint64
	var pred offsetPredictor
	var evs []Event
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		version := Version1
		if typ&versionBit != 0 {
			version = Version2
		}
		switch ChunkType((typ &^ versionBit) % 8) {
		case ChunkHeader:
			var h Header
			if decodeHeader(b, &h) == nil {
				var h2 Header
				if err := decodeHeader(appendHeader(nil, &h), &h2); err != nil {
					t.Fatalf("re-decode header: %v", err)
				}
			}
		case ChunkEvents:
			var err error
			evs, err = decodeEvents(b, version, evs, &col, &pred)
			if err == nil {
				again, err := decodeEvents(appendEvents(nil, version, evs, &pred), version, nil, &col, &pred)
				if err != nil || len(again) != len(evs) {
					t.Fatalf("re-decode events: %v", err)
				}
				for i := range again {
					if again[i] != evs[i] {
						t.Fatalf("event %d: %+v != %+v", i, again[i], evs[i])
					}
				}
			}
		case ChunkPaths:
			// Whatever the records, the reader's table never loops and never joins a path
			// longer than MaxPath.
			r := &Reader{paths: map[uint32]pathEntry{}, names: map[uint32]string{}, firstID: map[uint64]uint32{}, seed: maphash.MakeSeed()}
			var ids []uint32
			_ = decodePaths(b, func(p PathRecord) error {
				ids = append(ids, p.ID, p.Parent)
				return r.addPath(p)
			})
			for _, id := range ids {
				if n := r.PathName(id); len(n) > MaxPath {
					t.Fatalf("path %d: %d bytes", id, len(n))
				}
			}
		case ChunkProcesses:
			_ = decodeProcesses(b, func(Process) error { return nil })
		case ChunkFiles:
			_ = decodeFiles(b, func(File) error { return nil })
		case ChunkSamples:
			// Whatever decodes re-encodes to the same series.
			var got []Samples
			_, err := decodeSamples(b, nil, func(s Samples) error {
				s.Points = slices.Clone(s.Points)
				got = append(got, s)
				return nil
			})
			if err == nil {
				var again []Samples
				if _, err := decodeSamples(appendSamples(nil, got), nil, func(s Samples) error {
					s.Points = slices.Clone(s.Points)
					again = append(again, s)
					return nil
				}); err != nil || !reflect.DeepEqual(again, got) {
					t.Fatalf("re-decode samples: %v\n got %+v\nwant %+v", err, again, got)
				}
			}
		default:
			var f Footer
			_ = decodeFooter(b, &f)
		}
	})
}
