// Package tracecraft builds trace files chunk by chunk, for tests that feed readers
// hostile or damaged input: chunks with valid checksums but contents a writer never
// produces (a name of 60 MiB, a repeated events chunk, a missing paths chunk). It encodes
// the frame as trace/doc.go specifies it, independently of the trace package's writer.
package tracecraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/iotap/iotap/trace"
)

const (
	magic     = "\x89iotap\r\n"
	frameSize = 20
	flagZstd  = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Chunk is one chunk of a trace: its type and its payload after decompression.
type Chunk struct {
	Type    trace.ChunkType
	Payload []byte
}

// Split parses a well-formed trace file into its version and chunks.
func Split(file []byte) (version uint16, chunks []Chunk, err error) {
	if len(file) < len(magic)+4 || string(file[:len(magic)]) != magic {
		return 0, nil, errors.New("tracecraft: not a trace")
	}
	version = binary.LittleEndian.Uint16(file[len(magic):])
	dec, err := zstd.NewReader(nil)
	if err != nil {
		return 0, nil, err
	}
	defer dec.Close()
	for off := len(magic) + 4; off < len(file); {
		if len(file)-off < frameSize {
			return 0, nil, fmt.Errorf("tracecraft: frame cut short at offset %d", off)
		}
		f := file[off : off+frameSize]
		n := int(binary.LittleEndian.Uint32(f))
		if off+frameSize+n > len(file) {
			return 0, nil, fmt.Errorf("tracecraft: payload cut short at offset %d", off)
		}
		p := file[off+frameSize : off+frameSize+n]
		if f[5]&flagZstd != 0 {
			if p, err = dec.DecodeAll(p, nil); err != nil {
				return 0, nil, fmt.Errorf("tracecraft: chunk at offset %d: %w", off, err)
			}
		} else {
			p = append([]byte(nil), p...)
		}
		chunks = append(chunks, Chunk{Type: trace.ChunkType(f[4]), Payload: p})
		off += frameSize + n
	}
	return version, chunks, nil
}

// Preamble returns the 12 bytes that open a trace of the given format version.
func Preamble(version uint16) []byte {
	b := append([]byte(magic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint16(b[len(magic):], version)
	return b
}

// Frame returns a chunk of type t holding payload, zstd-compressed if compress is set,
// with valid checksums.
func Frame(t trace.ChunkType, payload []byte, compress bool) []byte {
	stored, flags := payload, byte(0)
	if compress {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(false))
		if err != nil {
			panic(err) // only for invalid options
		}
		stored, flags = enc.EncodeAll(payload, nil), flagZstd
		_ = enc.Close()
	}
	return FrameRaw(t, stored, flags, uint32(len(payload)))
}

// FrameRaw returns a chunk of type t whose stored payload is stored, with the given frame
// flags and decompressed length raw (whatever stored decompresses to), and valid
// checksums.
func FrameRaw(t trace.ChunkType, stored []byte, flags byte, raw uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(stored)))
	b = append(b, byte(t), flags, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, raw)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(stored, castagnoli))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	return append(b, stored...)
}

// Join returns a trace file of the given version made of chunks, each compressed.
func Join(version uint16, chunks []Chunk) []byte {
	b := Preamble(version)
	for _, c := range chunks {
		b = append(b, Frame(c.Type, c.Payload, true)...)
	}
	return b
}

// Paths returns the payload of a paths chunk holding recs.
func Paths(recs []trace.PathRecord) []byte {
	b := binary.AppendUvarint(nil, uint64(len(recs)))
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(r.ID))
		b = binary.AppendUvarint(b, uint64(r.Parent))
		b = binary.AppendUvarint(b, uint64(len(r.Name)))
		b = append(b, r.Name...)
	}
	return b
}

// Recorded returns a well-formed trace written by trace.Writer with one lookup event per id
// in ids (1 µs apart, each naming that path id) and no path records but the root's.
func Recorded(ids []uint32) ([]byte, error) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Header{Kind: "record"}, trace.WriterOptions{})
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		w.Append(&trace.Event{Op: trace.OpLookup, Start: int64(i) * 1000, Dur: 500, Path: id, Tid: 7, Pid: 7})
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WithPaths returns file with its paths chunks replaced by one chunk per payload in paths,
// placed right after the header.
func WithPaths(file []byte, paths ...[]byte) ([]byte, error) {
	v, chunks, err := Split(file)
	if err != nil {
		return nil, err
	}
	out := []Chunk{chunks[0]}
	for _, p := range paths {
		out = append(out, Chunk{Type: trace.ChunkPaths, Payload: p})
	}
	for _, c := range chunks[1:] {
		if c.Type != trace.ChunkPaths {
			out = append(out, c)
		}
	}
	return Join(v, out), nil
}

// LongName returns a trace whose paths name one directory with a name of nameLen bytes
// and children under it, each named by an event: a reader that joined the names would
// hold children × nameLen bytes. It is a few kilobytes long.
func LongName(nameLen, children int) ([]byte, error) {
	recs := []trace.PathRecord{{ID: 2, Parent: 1, Name: strings.Repeat("a", nameLen)}}
	ids := make([]uint32, children)
	for i := range ids {
		ids[i] = uint32(3 + i)
		recs = append(recs, trace.PathRecord{ID: ids[i], Parent: 2, Name: fmt.Sprintf("c%d", i)})
	}
	rec, err := Recorded(ids)
	if err != nil {
		return nil, err
	}
	return WithPaths(rec, Paths(recs))
}

// ManyPaths returns a trace with chunks paths chunks, each holding as many records with
// distinct ids and names of nameLen bytes as fit in perChunk raw bytes. A reader that kept
// them all would hold about chunks × perChunk bytes. Each chunk is compressed as soon as it
// is made: making the trace takes the memory of one chunk.
func ManyPaths(chunks, perChunk, nameLen int) ([]byte, error) {
	rec, err := Recorded([]uint32{2})
	if err != nil {
		return nil, err
	}
	v, cs, err := Split(rec)
	if err != nil {
		return nil, err
	}
	out := append(Preamble(v), Frame(cs[0].Type, cs[0].Payload, true)...)
	name := strings.Repeat("n", nameLen)
	id := uint32(2)
	var recs []trace.PathRecord
	for range chunks {
		recs = recs[:0]
		for size := 0; size+nameLen+12 < perChunk; size += nameLen + 12 {
			recs = append(recs, trace.PathRecord{ID: id, Parent: 1, Name: name})
			id++
		}
		out = append(out, Frame(trace.ChunkPaths, Paths(recs), true)...)
	}
	for _, c := range cs[1:] {
		if c.Type != trace.ChunkPaths {
			out = append(out, Frame(c.Type, c.Payload, true)...)
		}
	}
	return out, nil
}

// Damaged returns variants of file (a trace Recorded or written by trace.Writer, with a
// paths chunk and at least one events chunk) whose every chunk has valid checksums but
// whose contents no writer produces, by name:
//
//	paths-deleted     the paths chunks left out: events name ids with no record
//	events-repeated   the first events chunk written twice
//	op-255            the first event's op is 255
//	path-cycle        two records name each other as parent
func Damaged(file []byte) (map[string][]byte, error) {
	v, cs, err := Split(file)
	if err != nil {
		return nil, err
	}
	ev := -1
	for i, c := range cs {
		if c.Type == trace.ChunkEvents {
			ev = i
			break
		}
	}
	if ev < 0 {
		return nil, errors.New("tracecraft: no events chunk")
	}
	var noPaths []Chunk
	for _, c := range cs {
		if c.Type != trace.ChunkPaths {
			noPaths = append(noPaths, c)
		}
	}
	repeated := append(append(append([]Chunk(nil), cs[:ev+1]...), cs[ev]), cs[ev+1:]...)
	op := append([]Chunk(nil), cs...)
	p := append([]byte(nil), cs[ev].Payload...)
	_, n := binary.Uvarint(p) // the op column follows the event count, one byte an event
	p[n] = 255
	op[ev].Payload = p
	cycle, err := WithPaths(file, Paths([]trace.PathRecord{{ID: 2, Parent: 3, Name: "a"}, {ID: 3, Parent: 2, Name: "b"}}))
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"paths-deleted":   Join(v, noPaths),
		"events-repeated": Join(v, repeated),
		"op-255":          Join(v, op),
		"path-cycle":      cycle,
	}, nil
}

// ReplayBombs returns small well-formed traces, by name, whose sizes or times no real job
// produces and that a replay must bound or refuse:
//
//	read-4g    a read of 2^32−1 bytes from a file of 10 bytes
//	write-4g   a write of 2^32−1 bytes on a file opened for reading only (recorded EBADF)
//	file-1p    a file of 2^50 bytes that existed before the job (a File record), looked up
//	late-call  a getattr whose system call entered 2^62 ns (146 years) after the kernel
//	           queued its request, then a lookup: a think time of 146 years
func ReplayBombs() (map[string][]byte, error) {
	const tid = 7
	make1 := func(fill func(w *trace.Writer)) ([]byte, error) {
		var buf bytes.Buffer
		w, err := trace.NewWriter(&buf, trace.Header{Kind: "record", Target: trace.Target{Path: "/job", FSType: "ext4"},
			FUSE: trace.FUSEOptions{Cache: "none"}, Legs: trace.LegsKernel}, trace.WriterOptions{})
		if err != nil {
			return nil, err
		}
		w.AddProcess(trace.Process{Tid: tid, Pid: tid, Comm: "job"})
		fill(w)
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	ev := func(op trace.Op, start int64, path uint32, mod func(e *trace.Event)) *trace.Event {
		e := &trace.Event{Op: op, Start: start, Dur: 1000, Path: path, Tid: tid, Pid: tid}
		if mod != nil {
			mod(e)
		}
		return e
	}
	dataCall := func(op trace.Op, openFlags uint32, errno uint16) func(w *trace.Writer) {
		return func(w *trace.Writer) {
			f := w.Path(trace.RootPath, "f")
			w.AddFile(trace.File{Path: f, Type: trace.TypeFile, Mode: 0o644, Size: 10})
			w.Append(ev(trace.OpLookup, 1e6, f, func(e *trace.Event) { e.Mode, e.Ret = 0o100644, 10 }))
			w.Append(ev(trace.OpOpen, 2e6, f, func(e *trace.Event) { e.Handle, e.Flags = 1, openFlags }))
			w.Append(ev(op, 3e6, f, func(e *trace.Event) {
				e.Handle, e.Size, e.Errno = 1, 1<<32-1, errno
				if errno == 0 {
					e.Ret = 10
				}
			}))
			w.Append(ev(trace.OpRelease, 4e6, f, func(e *trace.Event) { e.Handle = 1 }))
		}
	}
	out := map[string][]byte{}
	var err error
	if out["read-4g"], err = make1(dataCall(trace.OpRead, 0, 0)); err != nil {
		return nil, err
	}
	if out["write-4g"], err = make1(dataCall(trace.OpWrite, 0, 9 /* EBADF */)); err != nil {
		return nil, err
	}
	if out["file-1p"], err = make1(func(w *trace.Writer) {
		f := w.Path(trace.RootPath, "huge")
		w.AddFile(trace.File{Path: f, Type: trace.TypeFile, Mode: 0o644, Size: 1 << 50})
		w.Append(ev(trace.OpLookup, 1e6, f, func(e *trace.Event) { e.Mode, e.Ret = 0o100644, 1<<50 }))
	}); err != nil {
		return nil, err
	}
	if out["late-call"], err = make1(func(w *trace.Writer) {
		w.Append(ev(trace.OpGetattr, 1e6, trace.RootPath, func(e *trace.Event) {
			e.Mode = 0o40755
			e.Queued, e.Done, e.CallStart, e.CallEnd = e.Start-100, e.End()+100, e.Start-200, e.End()+200
		}))
		w.Append(ev(trace.OpGetattr, 2e6, trace.RootPath, func(e *trace.Event) {
			e.Mode = 0o40755
			e.Queued, e.Done, e.CallStart, e.CallEnd = e.Start-100, e.End()+100, e.Start-100+1<<62, e.End()+1<<62
		}))
	}); err != nil {
		return nil, err
	}
	return out, nil
}
