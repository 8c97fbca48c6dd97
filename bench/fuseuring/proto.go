package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// FUSE protocol constants and wire layouts (little-endian, include/uapi/linux/fuse.h, protocol
// 7.45). Only what the prototype serves is here.
const (
	opLookup      = 1
	opForget      = 2
	opGetattr     = 3
	opOpen        = 14
	opRead        = 15
	opStatfs      = 17
	opRelease     = 18
	opFlush       = 25
	opInit        = 26
	opInterrupt   = 36
	opDestroy     = 38
	opBatchForget = 42

	kernelMajor = 7
	kernelMinor = 45

	initAsyncRead    = 1 << 0
	initBigWrites    = 1 << 5
	initExt          = 1 << 30
	init2OverIOUring = 1 << (41 - 32) // FUSE_OVER_IO_URING, in flags2

	fopenDirectIO = 1 << 0

	inHeaderSize  = 40
	outHeaderSize = 16
	attrSize      = 88
	entryOutSize  = 40 + attrSize
	attrOutSize   = 16 + attrSize
	openOutSize   = 16
	statfsOutSize = 80
	initOutSize   = 64

	// FUSE over io_uring (struct fuse_uring_req_header): 128 bytes for the in or out header,
	// 128 for the operation's own header, then struct fuse_uring_ent_in_out.
	uringInOutSize   = 128
	uringOpInSize    = 128
	uringEntOffset   = uringInOutSize + uringOpInSize
	uringEntSize     = 32
	uringHeaderSize  = uringEntOffset + uringEntSize
	uringCmdRegister = 1 // FUSE_IO_URING_CMD_REGISTER
	uringCmdCommit   = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
	uringCmdReqSize  = 24
)

// errShort is returned when a buffer is smaller than the structure it must hold.
var errShort = errors.New("fuseuring: short buffer")

// inHeader is struct fuse_in_header.
type inHeader struct {
	Len         uint32
	Opcode      uint32
	Unique      uint64
	NodeID      uint64
	UID, GID    uint32
	PID         uint32
	TotalExtLen uint16
}

func decodeInHeader(b []byte) (inHeader, error) {
	if len(b) < inHeaderSize {
		return inHeader{}, fmt.Errorf("in header: %d bytes: %w", len(b), errShort)
	}
	le := binary.LittleEndian
	return inHeader{
		Len: le.Uint32(b[0:]), Opcode: le.Uint32(b[4:]), Unique: le.Uint64(b[8:]),
		NodeID: le.Uint64(b[16:]), UID: le.Uint32(b[24:]), GID: le.Uint32(b[28:]),
		PID: le.Uint32(b[32:]), TotalExtLen: le.Uint16(b[36:]),
	}, nil
}

func (h inHeader) encode(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], h.Len)
	le.PutUint32(b[4:], h.Opcode)
	le.PutUint64(b[8:], h.Unique)
	le.PutUint64(b[16:], h.NodeID)
	le.PutUint32(b[24:], h.UID)
	le.PutUint32(b[28:], h.GID)
	le.PutUint32(b[32:], h.PID)
	le.PutUint16(b[36:], h.TotalExtLen)
	le.PutUint16(b[38:], 0)
}

// putOutHeader writes struct fuse_out_header: total length, negative errno, request id.
func putOutHeader(b []byte, length uint32, errno int32, unique uint64) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], length)
	le.PutUint32(b[4:], uint32(errno))
	le.PutUint64(b[8:], unique)
}

// opHeaderSize is the size of the fixed header that follows fuse_in_header for an operation:
// on /dev/fuse it precedes the variable part in one buffer; over io_uring the kernel puts it in
// the op_in area and the variable part (a name, write data) in the payload buffer.
func opHeaderSize(opcode uint32) int {
	switch opcode {
	case opForget:
		return 8
	case opGetattr:
		return 16
	case opInit:
		return 64
	case opOpen:
		return 8
	case opRead:
		return 40
	case opRelease, opFlush:
		return 24
	case opInterrupt:
		return 8
	case opBatchForget:
		return 8
	}
	return 0 // LOOKUP (name only), STATFS, DESTROY and unknown ops
}

// attr is the part of struct fuse_attr the prototype fills in.
type attr struct {
	Ino, Size, Blocks uint64
	Mode, Nlink       uint32
	Blksize           uint32
}

func (a attr) encode(b []byte) {
	le := binary.LittleEndian
	clear(b[:attrSize])
	le.PutUint64(b[0:], a.Ino)
	le.PutUint64(b[8:], a.Size)
	le.PutUint64(b[16:], a.Blocks)
	le.PutUint32(b[60:], a.Mode)
	le.PutUint32(b[64:], a.Nlink)
	le.PutUint32(b[80:], a.Blksize)
}

// putEntryOut writes struct fuse_entry_out with zero entry and attribute timeouts, so that
// every stat reaches the server.
func putEntryOut(b []byte, nodeID uint64, a attr) {
	clear(b[:entryOutSize])
	binary.LittleEndian.PutUint64(b[0:], nodeID)
	a.encode(b[40:])
}

// putAttrOut writes struct fuse_attr_out with a zero timeout.
func putAttrOut(b []byte, a attr) {
	clear(b[:attrOutSize])
	a.encode(b[16:])
}

// putOpenOut writes struct fuse_open_out.
func putOpenOut(b []byte, fh uint64, openFlags uint32) {
	clear(b[:openOutSize])
	binary.LittleEndian.PutUint64(b[0:], fh)
	binary.LittleEndian.PutUint32(b[8:], openFlags)
}

// readIn is the part of struct fuse_read_in the prototype uses.
type readIn struct {
	Fh     uint64
	Offset uint64
	Size   uint32
}

func decodeReadIn(b []byte) (readIn, error) {
	if len(b) < 40 {
		return readIn{}, fmt.Errorf("read in: %d bytes: %w", len(b), errShort)
	}
	le := binary.LittleEndian
	return readIn{Fh: le.Uint64(b[0:]), Offset: le.Uint64(b[8:]), Size: le.Uint32(b[16:])}, nil
}

// initIn is the part of struct fuse_init_in the prototype uses.
type initIn struct {
	Major, Minor, MaxReadahead, Flags, Flags2 uint32
}

func decodeInitIn(b []byte) (initIn, error) {
	if len(b) < 16 {
		return initIn{}, fmt.Errorf("init in: %d bytes: %w", len(b), errShort)
	}
	le := binary.LittleEndian
	in := initIn{Major: le.Uint32(b[0:]), Minor: le.Uint32(b[4:]), MaxReadahead: le.Uint32(b[8:]), Flags: le.Uint32(b[12:])}
	if len(b) >= 20 {
		in.Flags2 = le.Uint32(b[16:])
	}
	return in, nil
}

// initOut is the part of struct fuse_init_out the prototype sets.
type initOut struct {
	Major, Minor, MaxReadahead, Flags, Flags2 uint32
	MaxBackground, CongestionThreshold        uint16
	MaxWrite, TimeGran                        uint32
}

func (o initOut) encode(b []byte) {
	le := binary.LittleEndian
	clear(b[:initOutSize])
	le.PutUint32(b[0:], o.Major)
	le.PutUint32(b[4:], o.Minor)
	le.PutUint32(b[8:], o.MaxReadahead)
	le.PutUint32(b[12:], o.Flags)
	le.PutUint16(b[16:], o.MaxBackground)
	le.PutUint16(b[18:], o.CongestionThreshold)
	le.PutUint32(b[20:], o.MaxWrite)
	le.PutUint32(b[24:], o.TimeGran)
	le.PutUint32(b[32:], o.Flags2)
}

// putStatfsOut writes struct fuse_statfs_out for an empty, read-only-looking file system.
func putStatfsOut(b []byte) {
	clear(b[:statfsOutSize])
	binary.LittleEndian.PutUint32(b[40:], 4096) // bsize
	binary.LittleEndian.PutUint32(b[44:], 255)  // namelen
	binary.LittleEndian.PutUint32(b[48:], 4096) // frsize
}

// uringEnt is struct fuse_uring_ent_in_out: the kernel's commit id for the request in an entry
// and the size of the payload it wrote (request) or the server wrote (reply).
type uringEnt struct {
	Flags     uint64
	CommitID  uint64
	PayloadSz uint32
}

func decodeUringEnt(hdr []byte) (uringEnt, error) {
	if len(hdr) < uringHeaderSize {
		return uringEnt{}, fmt.Errorf("uring header: %d bytes: %w", len(hdr), errShort)
	}
	b := hdr[uringEntOffset:]
	le := binary.LittleEndian
	return uringEnt{Flags: le.Uint64(b[0:]), CommitID: le.Uint64(b[8:]), PayloadSz: le.Uint32(b[16:])}, nil
}

func (e uringEnt) encode(hdr []byte) {
	b := hdr[uringEntOffset : uringEntOffset+uringEntSize]
	clear(b)
	le := binary.LittleEndian
	le.PutUint64(b[0:], e.Flags)
	le.PutUint64(b[8:], e.CommitID)
	le.PutUint32(b[16:], e.PayloadSz)
}

// putUringCmdReq writes struct fuse_uring_cmd_req into the command area of an SQE128.
func putUringCmdReq(b []byte, commitID uint64, qid uint16) {
	clear(b[:uringCmdReqSize])
	binary.LittleEndian.PutUint64(b[8:], commitID)
	binary.LittleEndian.PutUint16(b[16:], qid)
}

func putU32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.LittleEndian.PutUint64(b, v) }
func getU32(b []byte) uint32    { return binary.LittleEndian.Uint32(b) }
func getU64(b []byte) uint64    { return binary.LittleEndian.Uint64(b) }
