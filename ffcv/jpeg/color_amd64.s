#include "textflag.h"

// UPSAMPLE leaves in EVEN and ODD (dwords) the fancy-upsampled chroma of the
// 16 output pixel pairs of the samples at NEAR and FAR (pointers to sample
// i): with b = 3·near + far at samples i−1, i, i+1, even = (3·b_i + b_{i−1}
// + 8) >> 4 and odd = (3·b_i + b_{i+1} + 7) >> 4. Z26 holds 8, Z27 7;
// Z0–Z9 are clobbered.
#define UPSAMPLE(NEAR, FAR, EVEN, ODD) \
	VPMOVZXBD -1(NEAR), Z0; \
	VPMOVZXBD (NEAR), Z1; \
	VPMOVZXBD 1(NEAR), Z2; \
	VPMOVZXBD -1(FAR), Z3; \
	VPMOVZXBD (FAR), Z4; \
	VPMOVZXBD 1(FAR), Z5; \
	VPSLLD $1, Z0, Z6; \
	VPADDD Z0, Z6, Z6; \
	VPADDD Z3, Z6, Z6; \
	VPSLLD $1, Z1, Z7; \
	VPADDD Z1, Z7, Z7; \
	VPADDD Z4, Z7, Z7; \
	VPSLLD $1, Z2, Z8; \
	VPADDD Z2, Z8, Z8; \
	VPADDD Z5, Z8, Z8; \
	VPSLLD $1, Z7, Z9; \
	VPADDD Z7, Z9, Z9; \
	VPADDD Z6, Z9, EVEN; \
	VPADDD Z26, EVEN, EVEN; \
	VPSRLD $4, EVEN, EVEN; \
	VPADDD Z8, Z9, ODD; \
	VPADDD Z27, ODD, ODD; \
	VPSRLD $4, ODD, ODD

// CONVERT leaves in OUT the pixels R | G<<8 | B<<16 of luma Y and chroma
// CB, CR (minus 128), as jdcolor.c's fixed point: R = Y + (91881·cr +
// 2¹⁵) >> 16, G = Y + (−22554·cb + 2¹⁵ − 46802·cr) >> 16, B = Y + (116130·cb
// + 2¹⁵) >> 16, each clamped to [0, 255]. T0–T2 are clobbered.
#define CONVERT(Y, CB, CR, OUT, T0, T1, T2) \
	VPMULLD Z21, CR, OUT; \
	VPADDD Z25, OUT, OUT; \
	VPSRAD $16, OUT, OUT; \
	VPADDD Y, OUT, OUT; \
	VPMULLD Z22, CB, T0; \
	VPADDD Z25, T0, T0; \
	VPSRAD $16, T0, T0; \
	VPADDD Y, T0, T0; \
	VPMULLD Z23, CB, T1; \
	VPADDD Z25, T1, T1; \
	VPMULLD Z24, CR, T2; \
	VPADDD T2, T1, T1; \
	VPSRAD $16, T1, T1; \
	VPADDD Y, T1, T1; \
	VPMAXSD Z29, OUT, OUT; \
	VPMINSD Z28, OUT, OUT; \
	VPMAXSD Z29, T0, T0; \
	VPMINSD Z28, T0, T0; \
	VPMAXSD Z29, T1, T1; \
	VPMINSD Z28, T1, T1; \
	VPSLLD $8, T1, T1; \
	VPSLLD $16, T0, T0; \
	VPORD T1, OUT, OUT; \
	VPORD T0, OUT, OUT

// func yccH2V2FancyAVX512(out, y, cbNear, cbFar, crNear, crFar *uint8, blocks int)
//
// blocks × 16 chroma samples of a 4:2:0 row, upsampled and converted as
// yccRowH2V2Fancy's interior loop: the chroma pointers point at sample i
// (samples i−1 … i+16 are read), y at luma 2i, out at byte 6i. Each block
// writes 32 RGB pixels.
TEXT ·yccH2V2FancyAVX512(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ cbNear+16(FP), R8
	MOVQ cbFar+24(FP), R9
	MOVQ crNear+32(FP), R10
	MOVQ crFar+40(FP), R11
	MOVQ blocks+48(FP), CX
	TESTQ CX, CX
	JLE done

	MOVL $128, AX
	VPBROADCASTD AX, Z20
	MOVL $91881, AX
	VPBROADCASTD AX, Z21
	MOVL $116130, AX
	VPBROADCASTD AX, Z22
	MOVL $-22554, AX
	VPBROADCASTD AX, Z23
	MOVL $-46802, AX
	VPBROADCASTD AX, Z24
	MOVL $32768, AX
	VPBROADCASTD AX, Z25
	MOVL $8, AX
	VPBROADCASTD AX, Z26
	MOVL $7, AX
	VPBROADCASTD AX, Z27
	MOVL $255, AX
	VPBROADCASTD AX, Z28
	VPXORD Z29, Z29, Z29
	VMOVDQU32 yccInterleaveLo<>(SB), Z30
	VMOVDQU32 yccInterleaveHi<>(SB), Z31
	MOVQ $0xffffffffffff, AX
	KMOVQ AX, K1

loop:
	UPSAMPLE(R8, R9, Z10, Z11)
	UPSAMPLE(R10, R11, Z12, Z13)

	// Luma of the even and odd pixels.
	VPMOVZXWD (DI), Z14
	VPSRLD $8, Z14, Z15
	VPSLLD $24, Z14, Z14
	VPSRLD $24, Z14, Z14

	// Chroma minus 128.
	VPSUBD Z20, Z10, Z10
	VPSUBD Z20, Z11, Z11
	VPSUBD Z20, Z12, Z12
	VPSUBD Z20, Z13, Z13

	CONVERT(Z14, Z10, Z12, Z16, Z17, Z18, Z19)
	CONVERT(Z15, Z11, Z13, Z0, Z1, Z2, Z3)

	// Pixels in order (even, odd, even, …), packed to 3 bytes each.
	VMOVDQA32 Z30, Z1
	VPERMI2D Z0, Z16, Z1
	VMOVDQA32 Z31, Z2
	VPERMI2D Z0, Z16, Z2
	VMOVDQU8 yccPack3<>(SB), Z3
	VPSHUFB Z3, Z1, Z1
	VPSHUFB Z3, Z2, Z2
	VMOVDQU32 yccCompact<>(SB), Z4
	VPERMD Z1, Z4, Z1
	VPERMD Z2, Z4, Z2
	VMOVDQU8 Z1, K1, (SI)
	VMOVDQU8 Z2, K1, 48(SI)

	ADDQ $16, R8
	ADDQ $16, R9
	ADDQ $16, R10
	ADDQ $16, R11
	ADDQ $32, DI
	ADDQ $96, SI
	DECQ CX
	JNZ loop
	VZEROUPPER

done:
	RET

// Dword indices interleaving even (0–15) and odd (16–31) pixels.
DATA yccInterleaveLo<>+0(SB)/4, $0
DATA yccInterleaveLo<>+4(SB)/4, $16
DATA yccInterleaveLo<>+8(SB)/4, $1
DATA yccInterleaveLo<>+12(SB)/4, $17
DATA yccInterleaveLo<>+16(SB)/4, $2
DATA yccInterleaveLo<>+20(SB)/4, $18
DATA yccInterleaveLo<>+24(SB)/4, $3
DATA yccInterleaveLo<>+28(SB)/4, $19
DATA yccInterleaveLo<>+32(SB)/4, $4
DATA yccInterleaveLo<>+36(SB)/4, $20
DATA yccInterleaveLo<>+40(SB)/4, $5
DATA yccInterleaveLo<>+44(SB)/4, $21
DATA yccInterleaveLo<>+48(SB)/4, $6
DATA yccInterleaveLo<>+52(SB)/4, $22
DATA yccInterleaveLo<>+56(SB)/4, $7
DATA yccInterleaveLo<>+60(SB)/4, $23
GLOBL yccInterleaveLo<>(SB), RODATA|NOPTR, $64

DATA yccInterleaveHi<>+0(SB)/4, $8
DATA yccInterleaveHi<>+4(SB)/4, $24
DATA yccInterleaveHi<>+8(SB)/4, $9
DATA yccInterleaveHi<>+12(SB)/4, $25
DATA yccInterleaveHi<>+16(SB)/4, $10
DATA yccInterleaveHi<>+20(SB)/4, $26
DATA yccInterleaveHi<>+24(SB)/4, $11
DATA yccInterleaveHi<>+28(SB)/4, $27
DATA yccInterleaveHi<>+32(SB)/4, $12
DATA yccInterleaveHi<>+36(SB)/4, $28
DATA yccInterleaveHi<>+40(SB)/4, $13
DATA yccInterleaveHi<>+44(SB)/4, $29
DATA yccInterleaveHi<>+48(SB)/4, $14
DATA yccInterleaveHi<>+52(SB)/4, $30
DATA yccInterleaveHi<>+56(SB)/4, $15
DATA yccInterleaveHi<>+60(SB)/4, $31
GLOBL yccInterleaveHi<>(SB), RODATA|NOPTR, $64

// Per 16-byte lane: bytes 0–2, 4–6, 8–10, 12–14 of its four pixels, then
// zeros.
DATA yccPack3<>+0(SB)/8, $0x0908060504020100
DATA yccPack3<>+8(SB)/8, $0x808080800e0d0c0a
DATA yccPack3<>+16(SB)/8, $0x0908060504020100
DATA yccPack3<>+24(SB)/8, $0x808080800e0d0c0a
DATA yccPack3<>+32(SB)/8, $0x0908060504020100
DATA yccPack3<>+40(SB)/8, $0x808080800e0d0c0a
DATA yccPack3<>+48(SB)/8, $0x0908060504020100
DATA yccPack3<>+56(SB)/8, $0x808080800e0d0c0a
GLOBL yccPack3<>(SB), RODATA|NOPTR, $64

// Dword indices gathering the lanes' 12 packed bytes end to end.
DATA yccCompact<>+0(SB)/4, $0
DATA yccCompact<>+4(SB)/4, $1
DATA yccCompact<>+8(SB)/4, $2
DATA yccCompact<>+12(SB)/4, $4
DATA yccCompact<>+16(SB)/4, $5
DATA yccCompact<>+20(SB)/4, $6
DATA yccCompact<>+24(SB)/4, $8
DATA yccCompact<>+28(SB)/4, $9
DATA yccCompact<>+32(SB)/4, $10
DATA yccCompact<>+36(SB)/4, $12
DATA yccCompact<>+40(SB)/4, $13
DATA yccCompact<>+44(SB)/4, $14
DATA yccCompact<>+48(SB)/4, $3
DATA yccCompact<>+52(SB)/4, $7
DATA yccCompact<>+56(SB)/4, $11
DATA yccCompact<>+60(SB)/4, $15
GLOBL yccCompact<>(SB), RODATA|NOPTR, $64
