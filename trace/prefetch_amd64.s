#include "textflag.h"

// func prefetchEvent(p unsafe.Pointer)
// PREFETCHW of the four cache lines an Event at p can span (the assembler has no
// mnemonic for PREFETCHW, 0F 0D /1).
TEXT ·prefetchEvent(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08             // PREFETCHW (AX)
	BYTE $0x0F; BYTE $0x0D; BYTE $0x48; BYTE $0x40 // PREFETCHW 64(AX)
	BYTE $0x0F; BYTE $0x0D; BYTE $0x88; BYTE $0x80; BYTE $0x00; BYTE $0x00; BYTE $0x00 // PREFETCHW 128(AX)
	BYTE $0x0F; BYTE $0x0D; BYTE $0x88; BYTE $0xAF; BYTE $0x00; BYTE $0x00; BYTE $0x00 // PREFETCHW 175(AX)
	RET
