package main

import (
	"encoding/binary"
	"errors"
	"testing"
)

func TestInHeaderRoundTrip(t *testing.T) {
	h := inHeader{Len: 45, Opcode: opLookup, Unique: 1 << 40, NodeID: 1, UID: 1000, GID: 100, PID: 4242, TotalExtLen: 3}
	b := make([]byte, inHeaderSize)
	h.encode(b)
	if got := binary.LittleEndian.Uint64(b[16:]); got != 1 {
		t.Errorf("nodeid at offset 16 = %d, want 1", got)
	}
	got, err := decodeInHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if got != h {
		t.Errorf("decode(encode(%+v)) = %+v", h, got)
	}
	if _, err := decodeInHeader(b[:inHeaderSize-1]); !errors.Is(err, errShort) {
		t.Errorf("short in header: err = %v, want errShort", err)
	}
}

// TestURingHeaderLayout checks struct fuse_uring_req_header's offsets as the kernel reads them:
// fuse_uring_ent_in_out after two 128-byte areas, commit id at +8, payload size at +16.
func TestURingHeaderLayout(t *testing.T) {
	if uringHeaderSize != 288 {
		t.Fatalf("sizeof(struct fuse_uring_req_header) = %d, want 288", uringHeaderSize)
	}
	hdr := make([]byte, 4096)
	e := uringEnt{Flags: 1, CommitID: 0xdeadbeef01, PayloadSz: 4096}
	e.encode(hdr)
	if got := binary.LittleEndian.Uint64(hdr[264:]); got != e.CommitID {
		t.Errorf("commit_id at 264 = %#x, want %#x", got, e.CommitID)
	}
	if got := binary.LittleEndian.Uint32(hdr[272:]); got != e.PayloadSz {
		t.Errorf("payload_sz at 272 = %d, want %d", got, e.PayloadSz)
	}
	got, err := decodeUringEnt(hdr)
	if err != nil {
		t.Fatal(err)
	}
	if got != e {
		t.Errorf("decode(encode(%+v)) = %+v", e, got)
	}
	if _, err := decodeUringEnt(hdr[:uringHeaderSize-1]); !errors.Is(err, errShort) {
		t.Errorf("short uring header: err = %v, want errShort", err)
	}
}

func TestURingCmdReq(t *testing.T) {
	b := make([]byte, 80) // the command area of a 128-byte SQE
	for i := range b {
		b[i] = 0xff
	}
	putUringCmdReq(b, 77, 3)
	le := binary.LittleEndian
	if le.Uint64(b[0:]) != 0 || le.Uint64(b[8:]) != 77 || le.Uint16(b[16:]) != 3 {
		t.Errorf("fuse_uring_cmd_req = flags %d commit %d qid %d, want 0 77 3", le.Uint64(b[0:]), le.Uint64(b[8:]), le.Uint16(b[16:]))
	}
	for i := 18; i < uringCmdReqSize; i++ {
		if b[i] != 0 {
			t.Errorf("padding byte %d = %#x, want 0", i, b[i])
		}
	}
	if b[uringCmdReqSize] != 0xff {
		t.Error("putUringCmdReq wrote past struct fuse_uring_cmd_req")
	}
}

func TestReplyLayouts(t *testing.T) {
	le := binary.LittleEndian
	out := make([]byte, 256)
	putOutHeader(out, 16, -2, 99)
	if le.Uint32(out[0:]) != 16 || int32(le.Uint32(out[4:])) != -2 || le.Uint64(out[8:]) != 99 {
		t.Errorf("out header = % x", out[:16])
	}
	a := attr{Ino: 2, Size: 4096, Blocks: 8, Mode: 0o100644, Nlink: 1, Blksize: 4096}
	putEntryOut(out, 2, a)
	if le.Uint64(out[0:]) != 2 || le.Uint64(out[40+8:]) != 4096 || le.Uint32(out[40+60:]) != 0o100644 {
		t.Errorf("entry out: nodeid %d size %d mode %o", le.Uint64(out[0:]), le.Uint64(out[48:]), le.Uint32(out[100:]))
	}
	o := initOut{Major: 7, Minor: 45, Flags: initExt, Flags2: init2OverIOUring, MaxWrite: maxWriteForTest}
	o.encode(out)
	if le.Uint32(out[20:]) != maxWriteForTest || le.Uint32(out[32:]) != 1<<9 || le.Uint32(out[12:]) != 1<<30 {
		t.Errorf("init out = % x", out[:initOutSize])
	}
}

const maxWriteForTest = 128 << 10

func TestDecodeRequests(t *testing.T) {
	b := make([]byte, 40)
	binary.LittleEndian.PutUint64(b[8:], 8192)
	binary.LittleEndian.PutUint32(b[16:], 4096)
	in, err := decodeReadIn(b)
	if err != nil || in.Offset != 8192 || in.Size != 4096 {
		t.Errorf("decodeReadIn = %+v, %v", in, err)
	}
	if _, err := decodeReadIn(b[:39]); !errors.Is(err, errShort) {
		t.Errorf("short read in: err = %v", err)
	}
	ib := make([]byte, 64)
	binary.LittleEndian.PutUint32(ib[4:], 45)
	binary.LittleEndian.PutUint32(ib[12:], initExt)
	binary.LittleEndian.PutUint32(ib[16:], init2OverIOUring)
	ii, err := decodeInitIn(ib)
	if err != nil || ii.Minor != 45 || ii.Flags2 != init2OverIOUring {
		t.Errorf("decodeInitIn = %+v, %v", ii, err)
	}
	for _, tc := range []struct {
		name string
		op   uint32
		want int
	}{
		{"lookup name goes to the payload", opLookup, 0},
		{"getattr", opGetattr, 16},
		{"read", opRead, 40},
		{"release", opRelease, 24},
		{"init", opInit, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := opHeaderSize(tc.op); got != tc.want {
				t.Errorf("opHeaderSize(%d) = %d, want %d", tc.op, got, tc.want)
			}
		})
	}
}
