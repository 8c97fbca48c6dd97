package trace

import "encoding/binary"

// zstdBound returns how many bytes the zstd frames in b can decompress to at most, read
// from their headers without decompressing (RFC 8878): a raw or RLE block its size, a
// compressed block at most 128 KiB. It also returns the sum of the content sizes the
// frames declare (the decoder allocates for them before it decodes), and false when b is
// not a sequence of whole zstd frames. A chunk whose frame says more than the bound is
// corrupt, so a reader never allocates more for a chunk than its stored bytes can hold.
func zstdBound(b []byte) (bound, declared uint64, ok bool) {
	const (
		frameMagic   = 0xFD2FB528
		maxBlockSize = 128 << 10
	)
	for len(b) > 0 {
		if len(b) < 5 || binary.LittleEndian.Uint32(b) != frameMagic {
			return 0, 0, false
		}
		desc := b[4]
		b = b[5:]
		fcsFlag, single, dictFlag := desc>>6, desc&0x20 != 0, desc&3
		if desc&0x08 != 0 { // reserved bit
			return 0, 0, false
		}
		n := 0
		if !single {
			n++ // window descriptor
		}
		n += [4]int{0, 1, 2, 4}[dictFlag]
		fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
		if fcsFlag == 0 && single {
			fcsLen = 1
		}
		if len(b) < n+fcsLen {
			return 0, 0, false
		}
		fcs := b[n : n+fcsLen]
		switch fcsLen {
		case 1:
			declared += uint64(fcs[0])
		case 2:
			declared += uint64(binary.LittleEndian.Uint16(fcs)) + 256
		case 4:
			declared += uint64(binary.LittleEndian.Uint32(fcs))
		case 8:
			declared += binary.LittleEndian.Uint64(fcs)
		}
		b = b[n+fcsLen:]
		for last := false; !last; {
			if len(b) < 3 {
				return 0, 0, false
			}
			h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
			b = b[3:]
			last = h&1 != 0
			size := uint64(h >> 3)
			switch (h >> 1) & 3 {
			case 0: // raw: size bytes, as they are
				if uint64(len(b)) < size {
					return 0, 0, false
				}
				bound += size
				b = b[size:]
			case 1: // RLE: one byte, size times
				if len(b) < 1 {
					return 0, 0, false
				}
				bound += size
				b = b[1:]
			case 2: // compressed: size bytes, at most maxBlockSize out
				if uint64(len(b)) < size {
					return 0, 0, false
				}
				bound += maxBlockSize
				b = b[size:]
			default:
				return 0, 0, false
			}
		}
		if desc&0x04 != 0 { // content checksum
			if len(b) < 4 {
				return 0, 0, false
			}
			b = b[4:]
		}
	}
	return bound, declared, true
}
