#include "textflag.h"

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
	// cb: b = 3·near + far at samples i−1, i, i+1; even and odd chroma.
	VPMOVZXBD -1(R8), Z0
	VPMOVZXBD (R8), Z1
	VPMOVZXBD 1(R8), Z2
	VPMOVZXBD -1(R9), Z3
	VPMOVZXBD (R9), Z4
	VPMOVZXBD 1(R9), Z5
	VPSLLD $1, Z0, Z6
	VPADDD Z0, Z6, Z6
	VPADDD Z3, Z6, Z6
	VPSLLD $1, Z1, Z7
	VPADDD Z1, Z7, Z7
	VPADDD Z4, Z7, Z7
	VPSLLD $1, Z2, Z8
	VPADDD Z2, Z8, Z8
	VPADDD Z5, Z8, Z8
	VPSLLD $1, Z7, Z9
	VPADDD Z7, Z9, Z9
	VPADDD Z6, Z9, Z10
	VPADDD Z26, Z10, Z10
	VPSRLD $4, Z10, Z10
	VPADDD Z8, Z9, Z11
	VPADDD Z27, Z11, Z11
	VPSRLD $4, Z11, Z11

	// cr likewise.
	VPMOVZXBD -1(R10), Z0
	VPMOVZXBD (R10), Z1
	VPMOVZXBD 1(R10), Z2
	VPMOVZXBD -1(R11), Z3
	VPMOVZXBD (R11), Z4
	VPMOVZXBD 1(R11), Z5
	VPSLLD $1, Z0, Z6
	VPADDD Z0, Z6, Z6
	VPADDD Z3, Z6, Z6
	VPSLLD $1, Z1, Z7
	VPADDD Z1, Z7, Z7
	VPADDD Z4, Z7, Z7
	VPSLLD $1, Z2, Z8
	VPADDD Z2, Z8, Z8
	VPADDD Z5, Z8, Z8
	VPSLLD $1, Z7, Z9
	VPADDD Z7, Z9, Z9
	VPADDD Z6, Z9, Z12
	VPADDD Z26, Z12, Z12
	VPSRLD $4, Z12, Z12
	VPADDD Z8, Z9, Z13
	VPADDD Z27, Z13, Z13
	VPSRLD $4, Z13, Z13

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

	// Even pixels: Z14 luma, Z10 cb, Z12 cr → Z16 = R | G<<8 | B<<16.
	VPMULLD Z21, Z12, Z16
	VPADDD Z25, Z16, Z16
	VPSRAD $16, Z16, Z16
	VPADDD Z14, Z16, Z16
	VPMULLD Z22, Z10, Z17
	VPADDD Z25, Z17, Z17
	VPSRAD $16, Z17, Z17
	VPADDD Z14, Z17, Z17
	VPMULLD Z23, Z10, Z18
	VPADDD Z25, Z18, Z18
	VPMULLD Z24, Z12, Z19
	VPADDD Z19, Z18, Z18
	VPSRAD $16, Z18, Z18
	VPADDD Z14, Z18, Z18
	VPMAXSD Z29, Z16, Z16
	VPMINSD Z28, Z16, Z16
	VPMAXSD Z29, Z17, Z17
	VPMINSD Z28, Z17, Z17
	VPMAXSD Z29, Z18, Z18
	VPMINSD Z28, Z18, Z18
	VPSLLD $8, Z18, Z18
	VPSLLD $16, Z17, Z17
	VPORD Z18, Z16, Z16
	VPORD Z17, Z16, Z16

	// Odd pixels: Z15 luma, Z11 cb, Z13 cr → Z0.
	VPMULLD Z21, Z13, Z0
	VPADDD Z25, Z0, Z0
	VPSRAD $16, Z0, Z0
	VPADDD Z15, Z0, Z0
	VPMULLD Z22, Z11, Z1
	VPADDD Z25, Z1, Z1
	VPSRAD $16, Z1, Z1
	VPADDD Z15, Z1, Z1
	VPMULLD Z23, Z11, Z2
	VPADDD Z25, Z2, Z2
	VPMULLD Z24, Z13, Z3
	VPADDD Z3, Z2, Z2
	VPSRAD $16, Z2, Z2
	VPADDD Z15, Z2, Z2
	VPMAXSD Z29, Z0, Z0
	VPMINSD Z28, Z0, Z0
	VPMAXSD Z29, Z1, Z1
	VPMINSD Z28, Z1, Z1
	VPMAXSD Z29, Z2, Z2
	VPMINSD Z28, Z2, Z2
	VPSLLD $8, Z2, Z2
	VPSLLD $16, Z1, Z1
	VPORD Z2, Z0, Z0
	VPORD Z1, Z0, Z0

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
