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
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// Memory the Reader counts for each side-table entry besides its strings (map entries,
// bitset pages), for the SideTableBytes limit.
const (
	pathCost = 96      // paths, firstID and names entries
	procCost = 96      // procs and procIndex entries
	fileCost = 64      // a File and the room append keeps for it
	pageCost = 2 << 13 // a page of known and one of touched
	seenCost = 48      // a seen entry (a chunk's hash)
	// A kept resource sample, with the room append keeps for it, and a series' entry.
	sampleCost = 80
	seriesCost = 128
)

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
	head   []byte // a large chunk's first block, decompressed to check it (chunkbound.go)
	events []Event
	next   int
	pred   offsetPredictor
	col    []uint64
	done   bool
	err    error // sticky error from Next

	// While ahead is set (a ReadAhead's goroutine runs), nameMu guards paths against
	// PathName as the goroutine adds to it, and names and visible; the goroutine reads
	// paths without it. Otherwise one goroutine uses the Reader and nothing is locked.
	ahead   atomic.Bool
	nameMu  sync.Mutex
	paths   map[uint32]pathEntry
	names   map[uint32]string // PathName cache
	nPaths  uint32            // path records kept (pathEntry.seq of the next)
	visible uint32            // with ahead: PathName sees records with seq below it
	known   bitset            // ids with a path record
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
	procGen   uint64 // process records read
	files     []File
	samples   []Samples         // resource series, in first-seen order
	series    map[seriesKey]int // (role, pid) → index in samples
	pts       []Sample          // decodeSamples' scratch

	side     int64            // side-table bytes held, as counted against the limit
	chunks   uint64           // chunks read after the header, before the footer, header included
	nEvents  uint64           // events decoded
	opCounts [NumOps]uint64   // events decoded per op
	seen     map[uint64]int64 // hash of a side-table or events chunk's stored bytes → its offset
	footOff  int64            // the footer chunk's offset
}

// seriesKey names a resource series: points of one role and pid join one series.
type seriesKey struct {
	role SampleRole
	pid  uint32
}

// pathEntry is a path record as the Reader keeps it, with the length of the path PathName
// joins for it.
type pathEntry struct {
	parent uint32
	plen   uint32
	seq    uint32 // records kept before this one
	name   string
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
		paths:     make(map[uint32]pathEntry),
		seen:      make(map[uint64]int64),
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
	if v < Version1 || v > Version5 {
		return nil, fmt.Errorf("%w %d (this build reads versions %d to %d)", ErrVersion, v, Version1, Version5)
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
	r.chunks = 1
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
				return io.EOF
			}
			return r.checkFooter()
		}
		if err != nil {
			if ie := (*inputError)(nil); errors.As(err, &ie) {
				return err // the input failed (an I/O error): nothing after it can be read
			}
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
			if r.footer == nil && t != 0 {
				r.chunks++ // a chunk the writer wrote, damaged since
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
		} else if t != ChunkFooter {
			r.chunks++
		}
		derr := r.repeated(t, off)
		if derr == nil {
			switch t {
			case ChunkEvents:
				r.events, derr = decodeEvents(payload, r.hdr.Version, r.events, &r.col, &r.pred)
				if derr == nil {
					derr = r.resolveEvents(r.events)
				}
				if derr != nil && r.strict {
					r.events = r.events[:0]
				}
				if len(r.events) > 0 && (derr == nil || !r.strict) {
					if derr != nil {
						r.damage = append(r.damage, &ChunkError{Offset: off, Type: t, Reason: derr.Error(), Err: ErrCorrupt})
					}
					return nil
				}
			case ChunkPaths:
				derr = decodePaths(payload, r.addPath)
			case ChunkProcesses:
				derr = decodeProcesses(payload, r.addProcess)
			case ChunkFiles:
				derr = decodeFiles(payload, r.addFile)
			case ChunkSamples:
				r.pts, derr = decodeSamples(payload, r.pts, r.addSamples)
			case ChunkFooter:
				f := &Footer{}
				if derr = decodeFooter(payload, f); derr == nil && r.footer == nil {
					r.footer, r.footOff = f, off
				}
			case ChunkHeader:
				derr = errors.New("second header chunk")
			}
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

// repeated reports an events, paths, files or samples chunk whose stored bytes equal an earlier
// chunk's: a writer never writes one twice (events carry their start times, records their
// ids), so a repeat is a copy that would count its events or records twice.
func (r *Reader) repeated(t ChunkType, off int64) error {
	if t != ChunkEvents && t != ChunkPaths && t != ChunkFiles && t != ChunkSamples {
		return nil
	}
	h := maphash.Bytes(r.seed, r.stored) ^ uint64(t)
	if first, ok := r.seen[h]; ok {
		return fmt.Errorf("repeats the chunk at offset %d; skipped", first)
	}
	if err := r.charge(seenCost); err != nil {
		return err
	}
	r.seen[h] = off
	return nil
}

// checkFooter compares the footer's counts with what was read, at the end of the trace.
// A mismatch goes to Damage (and is Next's error in strict mode); else it returns io.EOF.
func (r *Reader) checkFooter() error {
	f := r.footer
	var why []string
	if f.Chunks != r.chunks {
		why = append(why, fmt.Sprintf("%d chunks before it, %d were read", f.Chunks, r.chunks))
	}
	if f.Events != r.nEvents {
		why = append(why, fmt.Sprintf("%d events, %d were read", f.Events, r.nEvents))
	} else {
		for op, n := range r.opCounts {
			var want uint64
			if op < len(f.OpCounts) {
				want = f.OpCounts[op]
			}
			if want != n {
				why = append(why, fmt.Sprintf("%d %s events, %d were read", want, Op(op), n))
				break
			}
		}
	}
	if len(why) == 0 {
		return io.EOF
	}
	err := &ChunkError{Offset: r.footOff, Type: ChunkFooter, Reason: "footer counts " + strings.Join(why, "; "), Err: ErrMismatch}
	r.damage = append(r.damage, err)
	if r.strict {
		return err
	}
	return io.EOF
}

// charge counts n more side-table bytes, or fails if they would pass the limit.
func (r *Reader) charge(n int64) error {
	limit := SideTableBytes + SideTableRatio*r.off
	if r.side+n > limit {
		return fmt.Errorf("side tables would hold more than %d bytes, the limit for the %d bytes of trace read (%d + %d per byte)",
			limit, r.off, SideTableBytes, SideTableRatio)
	}
	r.side += n
	return nil
}

// first returns the first id of id's pair (id itself if it is the first).
func (r *Reader) first(id uint32) uint32 {
	if f, ok := r.alias[id]; ok {
		return f
	}
	return id
}

// addPath stores a path record with its parent's first id. A record repeating an earlier
// pair makes its id an alias of the first one. A record that no writer writes is an error:
// an id seen before, a parent id not below the record's (a writer names a parent first, so
// paths never loop), a path longer than MaxPath, or more than the side-table limit.
func (r *Reader) addPath(p PathRecord) error {
	if r.known.has(p.ID) {
		return fmt.Errorf("path id %d recorded twice", p.ID)
	}
	if p.Parent >= p.ID {
		return fmt.Errorf("path id %d names parent %d, not an earlier id", p.ID, p.Parent)
	}
	p.Parent = r.first(p.Parent)
	plen := len(p.Name)
	if p.Parent != 0 && p.Parent != RootPath {
		if pe, ok := r.paths[p.Parent]; ok {
			plen += int(pe.plen) + 1
		} else {
			plen += len(unknownPath(p.Parent)) + 1
		}
	}
	if plen > MaxPath {
		return fmt.Errorf("path id %d is %d bytes long, more than the limit of %d", p.ID, plen, MaxPath)
	}
	cost := int64(pathCost + len(p.Name) + plen)
	if !r.known.hasPage(p.ID) {
		cost += pageCost
	}
	if err := r.charge(cost); err != nil {
		return err
	}
	k := maphash.String(r.seed, p.Name) ^ uint64(p.Parent)*0x9E3779B97F4A7C15
	for ; ; k++ { // a hash shared by two pairs: probe on
		f, ok := r.firstID[k]
		if !ok {
			r.firstID[k] = p.ID
			break
		}
		if fr := r.paths[f]; fr.parent == p.Parent && fr.name == p.Name {
			if f != p.ID {
				if r.alias == nil {
					r.alias = make(map[uint32]uint32)
				}
				r.alias[p.ID] = f
			}
			break
		}
	}
	if r.ahead.Load() {
		r.nameMu.Lock()
		defer r.nameMu.Unlock()
	}
	r.paths[p.ID] = pathEntry{parent: p.Parent, plen: uint32(plen), seq: r.nPaths, name: p.Name}
	r.nPaths++
	r.known.set(p.ID)
	return nil
}

// resolveEvents replaces aliases in evs by first ids, notes the paths named and counts the
// events. It returns an error for events that name a path id with no record: a writer
// writes a record before any event that names it.
func (r *Reader) resolveEvents(evs []Event) error {
	var missing, first uint32
	for i := range evs {
		e := &evs[i]
		r.opCounts[e.Op]++ // decodeEvents checked Op
		if r.alias != nil {
			e.Path, e.Path2 = r.first(e.Path), r.first(e.Path2)
		}
		for _, id := range [2]uint32{e.Path, e.Path2} {
			if id != 0 && !r.known.has(id) {
				if missing == 0 {
					first = id
				}
				missing++
			}
		}
		if e.Path != 0 && r.known.has(e.Path) {
			r.touched.set(e.Path)
		}
	}
	r.nEvents += uint64(len(evs))
	if missing > 0 {
		return fmt.Errorf("events name path ids with no record %d times (first: id %d)", missing, first)
	}
	return nil
}

// addFile keeps a first-seen file record, under the first id of its path. One that named
// a later id is about an object first seen under the first: Files leaves it out if the
// first id has a record of its own or is named by an event (the object was there before,
// or the job made it). Files decides when called, because the writer may write a record
// before events appended earlier.
func (r *Reader) addFile(f File) error {
	if err := r.charge(fileCost); err != nil {
		return err
	}
	if fid := r.first(f.Path); fid != f.Path {
		f.Path = fid
		r.lateFiles = append(r.lateFiles, len(r.files))
	}
	r.files = append(r.files, f)
	r.kept = nil
	return nil
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

// hasPage reports whether i's page is allocated.
func (b *bitset) hasPage(i uint32) bool {
	p := int(i >> 16)
	return p < len(b.pages) && b.pages[p] != nil
}

func (b *bitset) has(i uint32) bool {
	p := int(i >> 16)
	return p < len(b.pages) && b.pages[p] != nil && b.pages[p][i>>6&1023]&(1<<(i%64)) != 0
}

// addSamples appends a series record's points to the series of its role and pid (the
// first record names it), counting them against the side-table limit.
func (r *Reader) addSamples(s Samples) error {
	k := seriesKey{s.Role, s.Pid}
	i, ok := r.series[k]
	cost := int64(sampleCost * len(s.Points))
	if !ok {
		cost += int64(seriesCost + len(s.Name))
	}
	if err := r.charge(cost); err != nil {
		return err
	}
	if !ok {
		if r.series == nil {
			r.series = make(map[seriesKey]int)
		}
		i = len(r.samples)
		r.series[k] = i
		r.samples = append(r.samples, Samples{Role: s.Role, Pid: s.Pid, Name: s.Name})
	}
	r.samples[i].Points = append(r.samples[i].Points, s.Points...)
	return nil
}

// Samples returns the resource series read so far, one per sampled process (role and
// pid), in first-seen order. Traces of format versions 1 and 2 have none.
func (r *Reader) Samples() []Samples { return r.samples }

func (r *Reader) addProcess(p Process) error {
	r.procGen++
	if i, ok := r.procIndex[p.Tid]; ok {
		r.procs[i] = p
		return nil
	}
	n := procCost + len(p.Comm) + len(p.Exe)
	for _, a := range p.Cmdline {
		n += len(a) + 16
	}
	if err := r.charge(int64(n)); err != nil {
		return err
	}
	r.procIndex[p.Tid] = len(r.procs)
	r.procs = append(r.procs, p)
	return nil
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
			return 0, nil, &inputError{err}
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
			return 0, nil, &inputError{err}
		}
	}
	r.stored = buf
	if crc(r.stored) != f.sum {
		return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "payload checksum mismatch", Err: ErrCorrupt}
	}
	if !f.typ.known(r.hdr.Version) {
		return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "unknown chunk type", Err: ErrCorrupt}
	}
	payload := r.stored
	if f.flags&flagZstd != 0 {
		// The lengths the frames declare are trusted only as far as the stored bytes can
		// hold them: the buffer below, and the decoder's own, are sized by them.
		bound, declared, ok := zstdBound(r.stored)
		switch {
		case !ok:
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: "decompress: payload is not whole zstd frames", Err: ErrCorrupt}
		case uint64(f.raw) > bound:
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: fmt.Sprintf("frame says %d bytes, its zstd blocks hold at most %d", f.raw, bound), Err: ErrCorrupt}
		case declared > uint64(f.raw):
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: fmt.Sprintf("zstd frames declare %d bytes, the chunk frame %d", declared, f.raw), Err: ErrCorrupt}
		}
		// Nor more than its records can hold as iotap writes them.
		if why := r.chunkTooLong(f.typ, r.stored, f.raw); why != "" {
			return f.typ, nil, &ChunkError{Offset: start, Type: f.typ, Reason: why, Err: ErrCorrupt}
		}
		if cap(r.raw) < int(f.raw) { // room for what the frame promises (≤ MaxChunkRaw, ≤ bound) at once
			r.raw = make([]byte, 0, f.raw)
		}
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

// inputError is an error reading the input itself (an I/O error), not a damaged chunk:
// the reader cannot go past it.
type inputError struct{ err error }

func (e *inputError) Error() string { return "trace: read: " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

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
			return skipped, &inputError{err}
		}
		if _, reason := parseFrame(hdr); reason == "" {
			return skipped, nil
		}
	}
}

// PathName returns the path of id relative to the traced root ("" for the root itself),
// or "?" followed by the id if the trace has no record of it (yet). A Parent-0 record
// other than the root (a symlink target) returns its raw text. A path is at most MaxPath
// bytes long, and the paths PathName keeps count against the side-table limit (addPath).
func (r *Reader) PathName(id uint32) string {
	if r.ahead.Load() {
		r.nameMu.Lock()
		defer r.nameMu.Unlock()
	}
	return r.pathName(id)
}

// pathName is PathName, with nameMu held under a ReadAhead. Then it knows the records
// read before the chunk of the caller's event, as a Reader read without one would.
func (r *Reader) pathName(id uint32) string {
	if id == RootPath {
		return ""
	}
	if s, ok := r.names[id]; ok {
		return s
	}
	e, ok := r.paths[id]
	if !ok || e.seq >= r.visible && r.ahead.Load() {
		return unknownPath(id) // not kept: an unknown id costs no memory
	}
	s := e.name
	if e.parent != 0 && e.parent != RootPath {
		// Parents have lower ids and each level adds a byte: the recursion ends within
		// MaxPath levels.
		s = r.pathName(e.parent) + "/" + e.name
	}
	r.names[id] = s
	return s
}

func unknownPath(id uint32) string { return "?" + strconv.FormatUint(uint64(id), 10) }

// Path returns the path record with id, if the trace has one so far.
func (r *Reader) Path(id uint32) (PathRecord, bool) {
	e, ok := r.paths[id]
	return PathRecord{ID: id, Parent: e.parent, Name: e.name}, ok
}

// Process returns the latest record for thread tid.
func (r *Reader) Process(tid uint32) (Process, bool) {
	i, ok := r.procIndex[tid]
	if !ok {
		return Process{}, false
	}
	return r.procs[i], true
}

// ProcessRecords returns the number of process records read so far: when it has not
// changed, Process answers as before.
func (r *Reader) ProcessRecords() uint64 { return r.procGen }

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

// EventsRead returns the number of events decoded so far.
func (r *Reader) EventsRead() uint64 { return r.nEvents }

// CutShort reports whether every damage found so far is a cut-off tail (ErrTruncated,
// ErrNoFooter): the trace was not closed cleanly (its writer was killed, or its disk
// filled), but what it holds is intact. False for a trace without damage.
func (r *Reader) CutShort() bool {
	for _, d := range r.damage {
		if !errors.Is(d, ErrTruncated) && !errors.Is(d, ErrNoFooter) {
			return false
		}
	}
	return len(r.damage) > 0
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
