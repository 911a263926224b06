#include "textflag.h"

// VCV2 leaves in X the 8 outputs of verticalCV2 from the int32 rows at
// R0 and R1 (offset OFF): ((r0>>4)·w0>>16 + (r1>>4)·w1>>16 + 2) >> 2,
// clamped to [0, 255]. Y10 holds w0, Y11 w1, Y12 2, Y13 0, Y14 255; T is
// clobbered.
#define VCV2(OFF, X, T) \
	VMOVDQU OFF(SI), X; \
	VPSRAD $4, X, X; \
	VPMULLD Y10, X, X; \
	VPSRAD $16, X, X; \
	VMOVDQU OFF(DX), T; \
	VPSRAD $4, T, T; \
	VPMULLD Y11, T, T; \
	VPSRAD $16, T, T; \
	VPADDD T, X, X; \
	VPADDD Y12, X, X; \
	VPSRAD $2, X, X; \
	VPMAXSD Y13, X, X; \
	VPMINSD Y14, X, X

// func verticalCV2AVX2(out *uint8, r0, r1 *int32, blocks int, w0, w1 int32)
//
// blocks × 16 outputs of verticalCV2.
TEXT ·verticalCV2AVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ r0+8(FP), SI
	MOVQ r1+16(FP), DX
	MOVQ blocks+24(FP), CX
	TESTQ CX, CX
	JLE done
	MOVL w0+32(FP), AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL w1+36(FP), AX
	MOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $2, AX
	MOVD AX, X12
	VPBROADCASTD X12, Y12
	VPXOR Y13, Y13, Y13
	MOVL $255, AX
	MOVD AX, X14
	VPBROADCASTD X14, Y14

loop:
	VCV2(0, Y0, Y1)
	VCV2(32, Y2, Y3)
	// 16 int32 in [0, 255] → 16 bytes in order.
	VPACKUSDW Y2, Y0, Y4
	VPERMQ $0xd8, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPACKUSWB X5, X4, X4
	VMOVDQU X4, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $16, DI
	DECQ CX
	JNZ loop
	VZEROUPPER

done:
	RET
