package trace

import (
	"encoding/binary"
	"fmt"
)

// What a chunk of each type can hold.
//
// A chunk's frame says how many bytes its payload decompresses to, and its zstd frames
// hold that many (zstdBound checks it), but a few kilobytes of zstd can legitimately
// decompress to 64 MiB of one repeated byte: a path record whose name alone is 64 MiB. No
// writer makes such a record: a name is at most MaxName bytes, a command line MaxCmdline.
// So before a reader makes room for a large chunk, it decompresses the chunk's first zstd
// block alone (at most 128 KiB), reads the payload's record count, and refuses a chunk
// that says more bytes than that many records can hold as iotap writes them (maxRaw):
// memory then stays bounded by what records of real traces hold, and a long name is
// refused before it costs anything.

// checkAbove is the raw length above which a reader checks a chunk's length against its
// record count before it allocates: smaller chunks cost little.
const checkAbove = 1 << 20

// rawSlack is what maxRaw allows beyond its records: fields later writers of a format
// version may add.
const rawSlack = 64 << 10

// Largest encodings of the fields records are made of: a uvarint of a uint32, any varint,
// and a string of at most MaxName bytes (a 2-byte length).
const (
	u32Bytes  = 5
	varBytes  = 10
	nameBytes = 2 + MaxName
	// cmdlineBytes: a count of at most MaxCmdline+1 arguments (the first MaxCmdline bytes
	// of /proc/PID/cmdline split at NULs), each with its length, MaxCmdline bytes in all.
	cmdlineBytes = 2 + 2*(MaxCmdline+1) + MaxCmdline
	// samplePointBytes: one point of a series, eight varints.
	samplePointBytes = sampleFields * varBytes
	// maxSamplePoints bounds the points of one samples chunk as the writer makes them
	// (appendSampleChunk).
	maxSamplePoints = 1 << 18
	// maxHeaderRaw and maxFooterRaw bound the payloads that hold one record: the header
	// keeps the job's command line (at most 6 MiB on Linux: 3/4 of the 8 MiB stack limit)
	// and its labels, which came on iotap's own; the footer holds counters and an error.
	maxHeaderRaw = 16 << 20
	maxFooterRaw = 1 << 20
)

// maxRaw returns the most bytes a payload of type t and format version v, whose leading
// count says n records, can hold as iotap writes it; 0 for a type whose payload has no
// count (header and footer: their own bounds apply).
func maxRaw(t ChunkType, v uint16, n uint64) uint64 {
	var per, fixed uint64
	switch t {
	case ChunkPaths:
		per = 2*u32Bytes + nameBytes
	case ChunkFiles:
		per = 3*u32Bytes + 1 + 2*varBytes
	case ChunkProcesses:
		per = 3*u32Bytes + varBytes + 2*nameBytes + cmdlineBytes
	case ChunkSamples:
		per, fixed = 1+u32Bytes+nameBytes+3, maxSamplePoints*samplePointBytes
	case ChunkEvents:
		per = 1 + uint64(eventColumns(v))*varBytes
	default:
		return 0
	}
	if n > (1<<62)/per {
		return 1 << 62
	}
	return varBytes + n*per + fixed + rawSlack
}

// chunkTooLong returns why a zstd payload stored, of type t and raw length raw, cannot be
// what a writer made, or "": a header or footer longer than its bound, or a chunk longer
// than its record count allows (maxRaw). head is a buffer for the first block.
func (r *Reader) chunkTooLong(t ChunkType, stored []byte, raw uint32) string {
	switch {
	case t == ChunkHeader && raw > maxHeaderRaw:
		return fmt.Sprintf("header of %d bytes: iotap writes at most %d", raw, maxHeaderRaw)
	case t == ChunkFooter && raw > maxFooterRaw:
		return fmt.Sprintf("footer of %d bytes: iotap writes at most %d", raw, maxFooterRaw)
	case raw <= checkAbove || maxRaw(t, r.hdr.Version, 0) == 0:
		return ""
	}
	first, ok := zstdFirstBlock(stored)
	if !ok {
		return "" // not one whole frame: decompression says what is wrong
	}
	out, err := r.dec.DecodeAll(first, r.head[:0])
	if err != nil {
		return "decompress the first block: " + err.Error()
	}
	r.head = out
	n, k := binary.Uvarint(out)
	if k <= 0 {
		return fmt.Sprintf("%s chunk of %d bytes whose first block holds no record count", t, raw)
	}
	if lim := maxRaw(t, r.hdr.Version, n); uint64(raw) > lim {
		return fmt.Sprintf("%s chunk of %d bytes for %d records, which iotap writes in at most %d", t, raw, n, lim)
	}
	return ""
}

// zstdFirstBlock returns a zstd frame holding only the first block of the first frame of
// b, which decompresses to what that block holds (at most 128 KiB): a first block refers to
// no earlier data. false when b does not start with a whole frame header and block, or its
// frame uses a dictionary (iotap's never do).
func zstdFirstBlock(b []byte) ([]byte, bool) {
	const frameMagic = 0xFD2FB528
	if len(b) < 5 || binary.LittleEndian.Uint32(b) != frameMagic {
		return nil, false
	}
	desc := b[4]
	single, dictFlag, fcsFlag := desc&0x20 != 0, desc&3, desc>>6
	if dictFlag != 0 || desc&0x08 != 0 {
		return nil, false
	}
	n := 5
	if !single {
		n++ // window descriptor
	}
	fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && single {
		fcsLen = 1
	}
	n += fcsLen
	if len(b) < n+3 {
		return nil, false
	}
	h := uint32(b[n]) | uint32(b[n+1])<<8 | uint32(b[n+2])<<16
	size := int(h >> 3)
	switch (h >> 1) & 3 {
	case 1: // RLE: one byte
		size = 1
	case 3:
		return nil, false
	}
	if len(b) < n+3+size {
		return nil, false
	}
	// A frame of its own: no content size or checksum, a window of 128 KiB (a block's
	// most), and the block marked last.
	out := make([]byte, 0, 9+size)
	out = binary.LittleEndian.AppendUint32(out, frameMagic)
	out = append(out, 0x00, 7<<3)
	h |= 1
	out = append(out, byte(h), byte(h>>8), byte(h>>16))
	return append(out, b[n+3:n+3+size]...), true
}
