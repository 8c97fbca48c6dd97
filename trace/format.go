package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// magic opens every trace file (see doc.go, "File preamble").
const magic = "\x89iotap\r\n"

const (
	preambleSize = len(magic) + 4 // magic, u16 version, u16 reserved
	frameSize    = 20             // chunk frame header, see doc.go "Chunk frame"

	// MaxChunkPayload bounds the stored (compressed) payload of one chunk. A frame that
	// claims more is corrupt; readers never allocate more than this per chunk.
	MaxChunkPayload = 32 << 20
	// MaxChunkRaw bounds the decompressed payload of one chunk.
	MaxChunkRaw = 64 << 20
	// MaxChunkEvents bounds the number of events in one events chunk.
	MaxChunkEvents = 1 << 17

	// MaxName bounds a side-table string: a path record's name (one component, or a
	// symlink target) and a process's command name and executable. The kernel hands the
	// layer no longer name: PATH_MAX is 4096 bytes with the terminating NUL.
	MaxName = 4096
	// MaxCmdline bounds a process's command line: its arguments together. The layer keeps
	// the first 4096 bytes of /proc/<pid>/cmdline (ARG_MAX is far larger).
	MaxCmdline = 4096
	// MaxPath bounds a path as PathName joins it from its records. The layer reaches
	// every file through its path relative to the traced root, which the kernel limits to
	// PATH_MAX; a failed lookup under the deepest directory adds one more name.
	MaxPath = 2 * MaxName
	// SideTableBytes and SideTableRatio bound what a Reader holds for the side tables
	// (records, their joined paths, and the maps that index them): at most SideTableBytes
	// plus SideTableRatio bytes per byte of trace read so far. A recording's side tables
	// stay far below: a path record costs a few bytes of the file and about a hundred
	// bytes of memory plus its name and path.
	SideTableBytes = 64 << 20
	SideTableRatio = 64

	flagZstd = 1 << 0
)

// ChunkType identifies the content of a chunk. The values are part of the on-disk format.
type ChunkType uint8

// Chunk types. Unknown types are errors.
const (
	ChunkHeader    ChunkType = 1
	ChunkEvents    ChunkType = 2
	ChunkPaths     ChunkType = 3
	ChunkProcesses ChunkType = 4
	ChunkFiles     ChunkType = 5
	ChunkFooter    ChunkType = 6
	// ChunkSamples holds resource samples of processes (format version 3 and later).
	ChunkSamples ChunkType = 7
)

func (t ChunkType) String() string {
	switch t {
	case ChunkHeader:
		return "header"
	case ChunkEvents:
		return "events"
	case ChunkPaths:
		return "paths"
	case ChunkProcesses:
		return "processes"
	case ChunkFiles:
		return "files"
	case ChunkFooter:
		return "footer"
	case ChunkSamples:
		return "samples"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// known reports whether a file of format version v may hold chunks of type t.
func (t ChunkType) known(v uint16) bool {
	return t >= ChunkHeader && t <= ChunkFooter || t == ChunkSamples && v >= Version3
}

// Errors returned by readers. Chunk-level damage is reported as *ChunkError wrapping
// ErrCorrupt or ErrTruncated.
var (
	ErrNotTrace  = errors.New("trace: not an iotap trace")
	ErrVersion   = errors.New("trace: unsupported format version")
	ErrEmpty     = errors.New("trace: empty file")
	ErrCorrupt   = errors.New("corrupt chunk")
	ErrTruncated = errors.New("truncated")
	// ErrNoFooter is reported by Reader.Damage when a trace ends without a footer: the
	// writer did not close cleanly (it was killed, or the disk filled up).
	ErrNoFooter = errors.New("trace: no footer (writer did not close cleanly)")
	// ErrMismatch is reported by Reader.Damage when the chunks read disagree with the
	// footer's counts (a chunk deleted or repeated with valid checksums).
	ErrMismatch = errors.New("chunks do not match the footer")
)

// ChunkError describes a damaged chunk: its file offset, its type if the frame could be
// read, and why it was rejected. It wraps ErrCorrupt or ErrTruncated.
type ChunkError struct {
	Offset int64     // file offset of the chunk frame
	Type   ChunkType // 0 if the frame itself was unreadable
	Reason string
	Err    error
}

func (e *ChunkError) Error() string {
	t := ""
	if e.Type != 0 {
		t = " (" + e.Type.String() + ")"
	}
	return fmt.Sprintf("trace: %v at offset %d%s: %s", e.Err, e.Offset, t, e.Reason)
}

func (e *ChunkError) Unwrap() error { return e.Err }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// frame is a decoded chunk frame header.
type frame struct {
	payload uint32 // stored payload length
	typ     ChunkType
	flags   uint8
	raw     uint32 // decompressed length
	sum     uint32 // CRC32C of the stored payload
}

func appendPreamble(dst []byte, version uint16) []byte {
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, version)
	return binary.LittleEndian.AppendUint16(dst, 0)
}

func appendFrame(dst []byte, f frame) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, f.payload)
	dst = append(dst, byte(f.typ), f.flags, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, f.raw)
	dst = binary.LittleEndian.AppendUint32(dst, f.sum)
	return binary.LittleEndian.AppendUint32(dst, crc(dst[start:]))
}

// parseFrame checks a frame header. It returns a reason when the frame is not valid.
func parseFrame(b []byte) (frame, string) {
	if binary.LittleEndian.Uint32(b[16:]) != crc(b[:16]) {
		return frame{}, "frame checksum mismatch"
	}
	f := frame{
		payload: binary.LittleEndian.Uint32(b[0:]),
		typ:     ChunkType(b[4]),
		flags:   b[5],
		raw:     binary.LittleEndian.Uint32(b[8:]),
		sum:     binary.LittleEndian.Uint32(b[12:]),
	}
	switch {
	case b[6] != 0 || b[7] != 0 || f.flags&^flagZstd != 0:
		return f, "reserved frame bits set"
	case f.payload > MaxChunkPayload:
		return f, fmt.Sprintf("payload length %d exceeds limit %d", f.payload, MaxChunkPayload)
	case f.raw > MaxChunkRaw:
		return f, fmt.Sprintf("raw length %d exceeds limit %d", f.raw, MaxChunkRaw)
	case f.flags&flagZstd == 0 && f.raw != f.payload:
		return f, "raw length differs from stored length in an uncompressed chunk"
	}
	return f, ""
}
