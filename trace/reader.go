package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// maxPathDepth bounds the parent chain PathName follows (corrupt tables may loop).
const maxPathDepth = 4096

// Reader reads a trace as a stream, one chunk in memory at a time. Side tables (paths,
// processes, files) accumulate as their chunks go by.
//
// By default a damaged chunk is skipped and recorded in Damage, and a truncated tail ends
// the stream with io.EOF and a Damage entry. SetStrict makes Next return the *ChunkError
// instead.
type Reader struct {
	br     *bufio.Reader
	closer io.Closer
	off    int64 // file offset of the next unread byte
	strict bool

	hdr    Header
	footer *Footer
	damage []error
	dec    *zstd.Decoder
	stored []byte
	raw    []byte
	events []Event
	next   int
	pred   offsetPredictor
	col    []uint64
	done   bool
	err    error // sticky error from Next

	paths map[uint32]PathRecord
	names map[uint32]string // PathName cache
	// A writer with a bounded path index may record one (parent, name) under several ids
	// (pathIndex): the reader reports every event, record and file under the first.
	firstID   map[uint64]uint32 // hash of (first id of the parent, name) → first id
	seed      maphash.Seed
	alias     map[uint32]uint32 // a later id → the first id of its pair
	touched   bitset            // first ids named by an event so far
	lateFiles []int             // indexes in files of records that named a later id
	kept      []File            // Files' last answer, nil when files changed since
	procs     []Process
	procIndex map[uint32]int
	files     []File
}

// Open opens the trace at path; "-" reads standard input.
func Open(path string) (*Reader, error) {
	if path == "-" {
		r, err := NewReader(os.Stdin)
		if err != nil {
			return nil, fmt.Errorf("trace: stdin: %w", err)
		}
		return r, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := NewReader(f)
	if err != nil {
		_ = f.Close() // read-only: nothing to lose
		return nil, fmt.Errorf("%w: %s", err, path)
	}
	r.closer = f
	return r, nil
}

// NewReader reads the preamble and header chunk from rd. Errors: ErrEmpty (no bytes, or
// cut before the header was complete), ErrNotTrace, ErrVersion, or a *ChunkError for a
// corrupt header.
func NewReader(rd io.Reader) (*Reader, error) {
	r := &Reader{
		br:        bufio.NewReaderSize(rd, 1<<16),
		paths:     make(map[uint32]PathRecord),
		names:     make(map[uint32]string),
		firstID:   make(map[uint64]uint32),
		seed:      maphash.MakeSeed(),
		procIndex: make(map[uint32]int),
	}
	pre, err := r.br.Peek(preambleSize)
	switch {
	case len(pre) == 0 && (err == io.EOF || err == nil):
		return nil, ErrEmpty
	case len(pre) < preambleSize && err != io.EOF && err != nil:
		return nil, fmt.Errorf("trace: read: %w", err)
	}
	n := min(len(pre), len(magic))
	if !bytes.Equal(pre[:n], []byte(magic)[:n]) {
		return nil, ErrNotTrace
	}
	if len(pre) < preambleSize {
		return nil, fmt.Errorf("%w: cut short in the preamble", ErrEmpty)
	}
	v := binary.LittleEndian.Uint16(pre[len(magic):])
	if v != Version1 && v != Version2 {
		return nil, fmt.Errorf("%w %d (this build reads versions %d and %d)", ErrVersion, v, Version1, Version2)
	}
	_, _ = r.br.Discard(preambleSize) // cannot fail: Peek returned these bytes
	r.off = int64(preambleSize)
	r.hdr.Version = v

	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxChunkRaw))
	if err != nil {
		return nil, fmt.Errorf("trace: zstd decoder: %w", err)
	}
	r.dec = dec
	off := r.off
	t, payload, cerr := r.readChunk()
	switch {
	case cerr == io.EOF:
		r.dec.Close()
		return nil, fmt.Errorf("%w: no header chunk", ErrEmpty)
	case errors.Is(cerr, ErrTruncated):
		r.dec.Close()
		return nil, fmt.Errorf("%w: header chunk cut short", ErrEmpty)
	case cerr != nil:
		r.dec.Close()
		return nil, cerr
	case t != ChunkHeader:
		r.dec.Close()
		return nil, &ChunkError{Offset: off, Type: t, Reason: "first chunk is not the header", Err: ErrCorrupt}
	}
	if err := decodeHeader(payload, &r.hdr); err != nil {
		r.dec.Close()
		return nil, &ChunkError{Offset: off, Type: t, Reason: err.Error(), Err: ErrCorrupt}
	}
	return r, nil
}

// SetStrict makes Next stop with the *ChunkError at the first damaged chunk (corrupt or
// truncated) instead of skipping it or ending with io.EOF. The error is also in Damage. A
// missing footer alone is still only reported by Damage.
func (r *Reader) SetStrict(strict bool) { r.strict = strict }

// Header returns the trace header.
func (r *Reader) Header() *Header { return &r.hdr }

// Next returns the next event in file order. The event is valid until the next call. At
// the end it returns io.EOF, also when the tail was truncated (see Damage).
func (r *Reader) Next() (*Event, error) {
	for r.next >= len(r.events) {
		if r.err != nil {
			return nil, r.err
		}
		if err := r.advance(); err != nil {
			r.err = err
			return nil, err
		}
	}
	e := &r.events[r.next]
	r.next++
	return e, nil
}

// advance reads chunks until it has decoded an events chunk or reached the end.
func (r *Reader) advance() error {
	r.events = r.events[:0]
	r.next = 0
	for {
		if r.done {
			return io.EOF
		}
		off := r.off
		t, payload, err := r.readChunk()
		if err == io.EOF {
			r.done = true
			if r.footer == nil {
				r.damage = append(r.damage, ErrNoFooter)
			}
			return io.EOF
		}
		if err != nil {
			if errors.Is(err, ErrTruncated) {
				r.done = true
				r.damage = append(r.damage, err)
				if r.footer == nil {
					r.damage = append(r.damage, ErrNoFooter)
				}
				if r.strict {
					return err
				}
				return io.EOF
			}
			r.damage = append(r.damage, err)
			if r.strict {
				return err
			}
			continue
		}
		if r.footer != nil {
			err := &ChunkError{Offset: off, Type: t, Reason: "chunk after the footer", Err: ErrCorrupt}
			r.damage = append(r.damage, err)
			if r.strict {
				return err
			}
		}
		var derr error
		switch t {
		case ChunkEvents:
			r.events, derr = decodeEvents(payload, r.hdr.Version, r.events, &r.col, &r.pred)
			r.resolveEvents(r.events)
			if derr == nil && len(r.events) > 0 {
				return nil
			}
		case ChunkPaths:
			derr = decodePaths(payload, r.addPath)
		case ChunkProcesses:
			derr = decodeProcesses(payload, r.addProcess)
		case ChunkFiles:
			derr = decodeFiles(payload, r.addFile)
		case ChunkFooter:
			f := &Footer{}
			if derr = decodeFooter(payload, f); derr == nil {
				r.footer = f
			}
		case ChunkHeader:
			derr = errors.New("second header chunk")
		}
		if derr != nil {
			err := &ChunkError{Offset: off, Type: t, Reason: derr.Error(), Err: ErrCorrupt}
			r.damage = append(r.damage, err)
			if r.strict {
				return err
			}
		}
	}
}

// first returns the first id of id's pair (id itself if it is the first).
func (r *Reader) first(id uint32) uint32 {
	if f, ok := r.alias[id]; ok {
		return f
	}
	return id
}

// addPath stores a path record with its parent's first id. A record repeating an earlier
// pair makes its id an alias of the first one.
func (r *Reader) addPath(p PathRecord) {
	p.Parent = r.first(p.Parent)
	k := maphash.String(r.seed, p.Name) ^ uint64(p.Parent)*0x9E3779B97F4A7C15
	for ; ; k++ { // a hash shared by two pairs: probe on
		f, ok := r.firstID[k]
		if !ok {
			r.firstID[k] = p.ID
			break
		}
		if fr := r.paths[f]; fr.Parent == p.Parent && fr.Name == p.Name {
			if f != p.ID {
				if r.alias == nil {
					r.alias = make(map[uint32]uint32)
				}
				r.alias[p.ID] = f
			}
			break
		}
	}
	r.paths[p.ID] = p
}

// resolveEvents replaces aliases in evs by first ids and notes the paths named.
func (r *Reader) resolveEvents(evs []Event) {
	for i := range evs {
		e := &evs[i]
		if r.alias != nil {
			e.Path, e.Path2 = r.first(e.Path), r.first(e.Path2)
		}
		r.touched.set(e.Path)
	}
}

// addFile keeps a first-seen file record, under the first id of its path. One that named
// a later id is about an object first seen under the first: Files leaves it out if the
// first id has a record of its own or is named by an event (the object was there before,
// or the job made it). Files decides when called, because the writer may write a record
// before events appended earlier.
func (r *Reader) addFile(f File) {
	if fid := r.first(f.Path); fid != f.Path {
		f.Path = fid
		r.lateFiles = append(r.lateFiles, len(r.files))
	}
	r.files = append(r.files, f)
	r.kept = nil
}

// bitset is a set of path ids, in pages of 65536 allocated on first use (a damaged id far
// beyond the others costs one page and the directory, at most 512 KiB).
type bitset struct{ pages []*[1024]uint64 }

func (b *bitset) set(i uint32) {
	p := int(i >> 16)
	if p >= len(b.pages) {
		b.pages = append(b.pages, make([]*[1024]uint64, p+1-len(b.pages))...)
	}
	if b.pages[p] == nil {
		b.pages[p] = new([1024]uint64)
	}
	b.pages[p][i>>6&1023] |= 1 << (i % 64)
}

func (b *bitset) has(i uint32) bool {
	p := int(i >> 16)
	return p < len(b.pages) && b.pages[p] != nil && b.pages[p][i>>6&1023]&(1<<(i%64)) != 0
}

func (r *Reader) addProcess(p Process) {
	if i, ok := r.procIndex[p.Tid]; ok {
		r.procs[i] = p
		return
	}
	r.procIndex[p.Tid] = len(r.procs)
	r.procs = append(r.procs, p)
}

// readChunk reads one chunk and returns its type and decompressed payload (valid until the
// next call). It returns io.EOF at a clean end, a *ChunkError wrapping ErrTruncated at a
// cut-off tail, and a *ChunkError wrapping ErrCorrupt for a damaged chunk, after which the
// reader is positioned at the next chunk: after the damaged payload when the frame was
// valid, else at the next offset that holds a valid frame.
func (r *Reader) readChunk() (ChunkType, []byte, error) {
	start := r.off
	hdr, err := r.br.Peek(frameSize)
	if len(hdr) == 0 && err == io.EOF {
		return 0, nil, io.EOF
	}
	if len(hdr) < frameSize {
		if err != io.EOF {
			return 0, nil, fmt.Errorf("trace: read: %w", err)
		}
		return 0, nil, &ChunkError{Offset: start, Reason: fmt.Sprintf("%d bytes left, a chunk frame needs %d", len(hdr), frameSize), Err: ErrTruncated}
	}
	f, reason := parseFrame(hdr)
	if reason != "" {
		skipped, err := r.resync()
		if err != nil {
			return 0, nil, err
		}
		return 0, nil, &ChunkError{Offset: start, Type: f.typ, Reason: fmt.Sprintf("%s; skipped %d bytes to the next valid frame", reason, skipped), Err: ErrCorrupt}
	}
	_, _ = r.br.Discard(frameSize) // cannot fail: Peek returned these bytes
	r.off += frameSize
	// Grow the buffer as data arrives, so a frame that promises more than the input holds
	// costs no more memory than the input.
	need := int(f.payload)
	buf := r.stored[:0]
	for len(buf) < need {
		step := min(need-len(buf), max(len(buf), 1<<20))
		buf = slices.Grow(buf, step)
		n, err := io.ReadFull(r.br, buf[len(buf):len(buf)+step])
		buf = buf[:len(buf)+n]
		r.off += int64(n)
		if err != nil {
			r.stored = buf[:0]
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return 0, nil, &ChunkError{Offset: start, Type: f.typ, Reason: fmt.Sprintf("payload has %d of %d bytes", len(buf), f.payload), Err: ErrTruncated}
			}
			return 0, nil, fmt.Errorf("trace: read: %w", err)
		}
	}
	r.stored = buf
	if crc(r.stored) != f.sum {
		return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "payload checksum mismatch", Err: ErrCorrupt}
	}
	if !f.typ.known() {
		return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "unknown chunk type", Err: ErrCorrupt}
	}
	payload := r.stored
	if f.flags&flagZstd != 0 {
		out, err := r.dec.DecodeAll(r.stored, r.raw[:0])
		if err != nil {
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "decompress: " + err.Error(), Err: ErrCorrupt}
		}
		if len(out) != int(f.raw) {
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: fmt.Sprintf("decompressed to %d bytes, frame says %d", len(out), f.raw), Err: ErrCorrupt}
		}
		if cap(out) <= MaxChunkRaw {
			r.raw = out
		}
		payload = out
	}
	return f.typ, payload, nil
}

// resync skips bytes until the buffered input starts with a valid frame header, or to the
// end of input. It returns how many bytes it skipped.
func (r *Reader) resync() (int64, error) {
	var skipped int64
	for {
		_, _ = r.br.Discard(1) // cannot fail: Peek returned at least this byte
		r.off++
		skipped++
		hdr, err := r.br.Peek(frameSize)
		if len(hdr) < frameSize {
			if err == io.EOF {
				n, _ := r.br.Discard(len(hdr))
				r.off += int64(n)
				return skipped + int64(n), nil
			}
			return skipped, fmt.Errorf("trace: read: %w", err)
		}
		if _, reason := parseFrame(hdr); reason == "" {
			return skipped, nil
		}
	}
}

// PathName returns the path of id relative to the traced root ("" for the root itself),
// or "?" followed by the id if the trace has no record of it (yet). A Parent-0 record
// other than the root (a symlink target) returns its raw text.
func (r *Reader) PathName(id uint32) string {
	if id == RootPath {
		return ""
	}
	if s, ok := r.names[id]; ok {
		return s
	}
	rec, ok := r.paths[id]
	if !ok {
		return "?" + strconv.FormatUint(uint64(id), 10)
	}
	var s string
	switch rec.Parent {
	case 0, RootPath:
		s = rec.Name
	default:
		// Walk up iteratively; corrupt tables may loop or reference unknown parents.
		parts := []string{rec.Name}
		p := rec.Parent
		for depth := 0; p != RootPath && p != 0; depth++ {
			if cached, ok := r.names[p]; ok {
				parts = append(parts, cached)
				break
			}
			pr, ok := r.paths[p]
			if !ok || depth >= maxPathDepth {
				parts = append(parts, "?"+strconv.FormatUint(uint64(p), 10))
				break
			}
			parts = append(parts, pr.Name)
			p = pr.Parent
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		s = strings.Join(parts, "/")
	}
	r.names[id] = s
	return s
}

// Path returns the path record with id, if the trace has one so far.
func (r *Reader) Path(id uint32) (PathRecord, bool) {
	p, ok := r.paths[id]
	return p, ok
}

// Process returns the latest record for thread tid.
func (r *Reader) Process(tid uint32) (Process, bool) {
	i, ok := r.procIndex[tid]
	if !ok {
		return Process{}, false
	}
	return r.procs[i], true
}

// Processes returns the process records read so far, in first-seen order.
func (r *Reader) Processes() []Process { return r.procs }

// Files returns the first-seen file records read so far (see addFile).
func (r *Reader) Files() []File {
	if len(r.lateFiles) == 0 {
		return r.files
	}
	if r.kept != nil {
		return r.kept
	}
	var filed bitset
	late := r.lateFiles
	kept := make([]File, 0, len(r.files))
	for i, f := range r.files {
		if len(late) > 0 && late[0] == i {
			late = late[1:]
			if filed.has(f.Path) || r.touched.has(f.Path) {
				continue
			}
		}
		filed.set(f.Path)
		kept = append(kept, f)
	}
	r.kept = kept
	return kept
}

// Footer returns the footer once Next has returned io.EOF, if the trace has one.
func (r *Reader) Footer() (*Footer, bool) { return r.footer, r.footer != nil }

// Damage returns what was wrong with the trace so far: *ChunkError values for skipped or
// truncated chunks and ErrNoFooter for a trace that was not closed cleanly.
func (r *Reader) Damage() []error { return r.damage }

// Close releases the reader and closes the file Open opened.
func (r *Reader) Close() error {
	if r.dec != nil {
		r.dec.Close()
		r.dec = nil
	}
	if r.closer != nil {
		err := r.closer.Close()
		r.closer = nil
		return err
	}
	return nil
}
