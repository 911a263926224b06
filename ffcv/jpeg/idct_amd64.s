#include "textflag.h"

// FMUL multiplies X by the 8-bit fixed-point constant at C, truncating as
// fmul does: X = (X·c) >> 8.
#define FMUL(C, X) \
	VPMULLD C, X, X; \
	VPSRAD $8, X, X

// IDCT1D is one pass of jidctfst.c's 1-D transform on the eight vectors
// Y0–Y7 (input k in Yk, eight independent transforms in the lanes), output k
// back in Yk. Y8–Y15 are clobbered.
#define IDCT1D \
	VPADDD Y4, Y0, Y8; \
	VPSUBD Y4, Y0, Y9; \
	VPADDD Y6, Y2, Y10; \
	VPSUBD Y6, Y2, Y11; \
	FMUL(idctFix1_414<>(SB), Y11); \
	VPSUBD Y10, Y11, Y11; \
	VPADDD Y10, Y8, Y12; \
	VPSUBD Y10, Y8, Y13; \
	VPADDD Y11, Y9, Y14; \
	VPSUBD Y11, Y9, Y15; \
	VPADDD Y3, Y5, Y0; \
	VPSUBD Y3, Y5, Y2; \
	VPADDD Y7, Y1, Y4; \
	VPSUBD Y7, Y1, Y6; \
	VPADDD Y0, Y4, Y8; \
	VPSUBD Y0, Y4, Y9; \
	FMUL(idctFix1_414<>(SB), Y9); \
	VPADDD Y6, Y2, Y10; \
	FMUL(idctFix1_847<>(SB), Y10); \
	VMOVDQA Y6, Y11; \
	FMUL(idctFix1_082<>(SB), Y11); \
	VPSUBD Y10, Y11, Y11; \
	VMOVDQA Y2, Y1; \
	FMUL(idctFixM2_613<>(SB), Y1); \
	VPADDD Y10, Y1, Y1; \
	VPSUBD Y8, Y1, Y3; \
	VPSUBD Y3, Y9, Y5; \
	VPADDD Y5, Y11, Y7; \
	VPADDD Y8, Y12, Y0; \
	VPSUBD Y8, Y12, Y9; \
	VPADDD Y3, Y14, Y1; \
	VPSUBD Y3, Y14, Y6; \
	VPADDD Y5, Y15, Y2; \
	VPSUBD Y5, Y15, Y10; \
	VPADDD Y7, Y13, Y4; \
	VPSUBD Y7, Y13, Y3; \
	VMOVDQA Y10, Y5; \
	VMOVDQA Y9, Y7

// TRANSPOSE transposes the 8×8 matrix of int32 whose rows are Y0–Y7.
// Y8–Y15 are clobbered.
#define TRANSPOSE \
	VPUNPCKLDQ Y1, Y0, Y8; \
	VPUNPCKHDQ Y1, Y0, Y9; \
	VPUNPCKLDQ Y3, Y2, Y10; \
	VPUNPCKHDQ Y3, Y2, Y11; \
	VPUNPCKLDQ Y5, Y4, Y12; \
	VPUNPCKHDQ Y5, Y4, Y13; \
	VPUNPCKLDQ Y7, Y6, Y14; \
	VPUNPCKHDQ Y7, Y6, Y15; \
	VPUNPCKLQDQ Y10, Y8, Y0; \
	VPUNPCKHQDQ Y10, Y8, Y1; \
	VPUNPCKLQDQ Y11, Y9, Y2; \
	VPUNPCKHQDQ Y11, Y9, Y3; \
	VPUNPCKLQDQ Y14, Y12, Y4; \
	VPUNPCKHQDQ Y14, Y12, Y5; \
	VPUNPCKLQDQ Y15, Y13, Y6; \
	VPUNPCKHQDQ Y15, Y13, Y7; \
	VPERM2I128 $0x20, Y4, Y0, Y8; \
	VPERM2I128 $0x31, Y4, Y0, Y12; \
	VPERM2I128 $0x20, Y5, Y1, Y9; \
	VPERM2I128 $0x31, Y5, Y1, Y13; \
	VPERM2I128 $0x20, Y6, Y2, Y10; \
	VPERM2I128 $0x31, Y6, Y2, Y14; \
	VPERM2I128 $0x20, Y7, Y3, Y11; \
	VPERM2I128 $0x31, Y7, Y3, Y15; \
	VMOVDQA Y8, Y0; \
	VMOVDQA Y9, Y1; \
	VMOVDQA Y10, Y2; \
	VMOVDQA Y11, Y3; \
	VMOVDQA Y12, Y4; \
	VMOVDQA Y13, Y5; \
	VMOVDQA Y14, Y6; \
	VMOVDQA Y15, Y7

// LIMIT descales output vector X by 2^(pass1Bits+3), adds 128 and clamps
// it to [0, 255], as clampSample.
#define LIMIT(X) \
	VPSRAD $5, X, X; \
	VPADDD idct128<>(SB), X, X; \
	VPMAXSD idctZero<>(SB), X, X; \
	VPMINSD idct255<>(SB), X, X

// STORE4 packs rows A–D (int32 in [0, 255]) to bytes and stores them at
// DI, DI+stride, … (stride in SI; DI advances by four rows).
#define STORE4(A, B, C, D) \
	VPACKUSDW B, A, Y8; \
	VPACKUSDW D, C, Y9; \
	VPACKUSWB Y9, Y8, Y8; \
	VPERMD Y8, Y10, Y8; \
	VMOVQ X8, (DI); \
	ADDQ SI, DI; \
	VPEXTRQ $1, X8, (DI); \
	ADDQ SI, DI; \
	VEXTRACTI128 $1, Y8, X9; \
	VMOVQ X9, (DI); \
	ADDQ SI, DI; \
	VPEXTRQ $1, X9, (DI); \
	ADDQ SI, DI

// func idct8FastAVX2(blk *[64]int32, out *uint8, stride int)
TEXT ·idct8FastAVX2(SB), NOSPLIT, $0-24
	MOVQ blk+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ stride+16(FP), SI
	VMOVDQU 0(AX), Y0
	VMOVDQU 32(AX), Y1
	VMOVDQU 64(AX), Y2
	VMOVDQU 96(AX), Y3
	VMOVDQU 128(AX), Y4
	VMOVDQU 160(AX), Y5
	VMOVDQU 192(AX), Y6
	VMOVDQU 224(AX), Y7
	// Columns (each lane a column), then rows.
	IDCT1D
	TRANSPOSE
	IDCT1D
	LIMIT(Y0)
	LIMIT(Y1)
	LIMIT(Y2)
	LIMIT(Y3)
	LIMIT(Y4)
	LIMIT(Y5)
	LIMIT(Y6)
	LIMIT(Y7)
	// Yk holds output column k of every row: back to rows.
	TRANSPOSE
	VMOVDQU idctGather<>(SB), Y10
	STORE4(Y0, Y1, Y2, Y3)
	STORE4(Y4, Y5, Y6, Y7)
	VZEROUPPER
	RET

#define BCAST8(name, v) \
	DATA name+0(SB)/4, v; \
	DATA name+4(SB)/4, v; \
	DATA name+8(SB)/4, v; \
	DATA name+12(SB)/4, v; \
	DATA name+16(SB)/4, v; \
	DATA name+20(SB)/4, v; \
	DATA name+24(SB)/4, v; \
	DATA name+28(SB)/4, v; \
	GLOBL name(SB), RODATA|NOPTR, $32

BCAST8(idctFix1_414<>, $362)
BCAST8(idctFix1_847<>, $473)
BCAST8(idctFix1_082<>, $277)
BCAST8(idctFixM2_613<>, $-669)
BCAST8(idct128<>, $128)
BCAST8(idctZero<>, $0)
BCAST8(idct255<>, $255)

// Dword indices putting each row's two packed halves side by side.
DATA idctGather<>+0(SB)/4, $0
DATA idctGather<>+4(SB)/4, $4
DATA idctGather<>+8(SB)/4, $1
DATA idctGather<>+12(SB)/4, $5
DATA idctGather<>+16(SB)/4, $2
DATA idctGather<>+20(SB)/4, $6
DATA idctGather<>+24(SB)/4, $3
DATA idctGather<>+28(SB)/4, $7
GLOBL idctGather<>(SB), RODATA|NOPTR, $32
