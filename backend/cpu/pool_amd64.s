//go:build !purego

#include "textflag.h"

// Permutation indices of the even lanes of a pair of vectors, and the
// column of each even lane (0, 2, …, 30); conv_amd64.s uses them too.
DATA ·evenLanes+0(SB)/8, $0x0000000200000000
DATA ·evenLanes+8(SB)/8, $0x0000000600000004
DATA ·evenLanes+16(SB)/8, $0x0000000a00000008
DATA ·evenLanes+24(SB)/8, $0x0000000e0000000c
DATA ·evenLanes+32(SB)/8, $0x0000001200000010
DATA ·evenLanes+40(SB)/8, $0x0000001600000014
DATA ·evenLanes+48(SB)/8, $0x0000001a00000018
DATA ·evenLanes+56(SB)/8, $0x0000001e0000001c
GLOBL ·evenLanes(SB), RODATA|NOPTR, $64

DATA poolNegInf<>+0(SB)/4, $0xff800000
GLOBL poolNegInf<>(SB), RODATA|NOPTR, $4

// func maxPoolS2AVX512(out []float32, idx []int64, x []float32, a *maxPoolArgs)
//
// Max pooling of a.rows rows of a.n outputs each whose windows lie inside
// the plane x, with column stride 2: output j of row r (out[r·a.ostride+j])
// has tap (ki, kj) at element a.off + r·a.istep + 2j + ki·a.dh·a.w + kj·a.dw
// of x. Taps are visited in row-major order; a tap replaces the best so far
// when it is larger or NaN, as in the Go loop. idx receives the positions
// of the maxima in x. The plane must have fewer than 2³¹ elements.
TEXT ·maxPoolS2AVX512(SB), NOSPLIT, $32-80
	MOVQ  a+72(FP), BX
	MOVQ  out_base+0(FP), DI
	MOVQ  idx_base+24(FP), DX
	MOVQ  x_base+48(FP), SI
	MOVQ  0(BX), R8
	MOVQ  8(BX), R9
	IMULQ 32(BX), R9
	MOVQ  40(BX), R12
	MOVQ  56(BX), AX
	TESTQ AX, AX
	JZ    done
	MOVQ  48(BX), AX
	TESTQ AX, AX
	JZ    done
	MOVQ  56(BX), AX
	MOVQ  AX, rows-8(SP)
	MOVQ  DI, orow-16(SP)
	MOVQ  DX, irow-24(SP)
	VMOVDQU32    ·evenLanes(SB), Z28
	VBROADCASTSS poolNegInf<>(SB), Z26

row:
	MOVQ  48(BX), CX
	MOVQ  R8, roff-32(SP)
	MOVL  $0xffff, AX
	KMOVW AX, K1
	KMOVW AX, K4
	MOVL  $0x7fff, AX
	KMOVW AX, K5

chunk:
	CMPQ CX, $16
	JAE  body
	// The last r < 16 outputs read 2r − 1 columns.
	MOVQ  CX, R13
	LEAQ  -1(CX)(CX*1), CX
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K4
	SHRL  $16, AX
	KMOVW AX, K5
	MOVQ  R13, CX
	MOVL  $1, AX
	SHLL  CX, AX
	DECL  AX
	KMOVW AX, K1

body:
	VMOVAPS Z26, Z4
	VPBROADCASTD R8, Z6
	VPADDD  Z28, Z6, Z6
	MOVQ    R8, R10
	MOVQ    16(BX), R13

rows:
	MOVQ R10, AX
	MOVQ 24(BX), R11

cols:
	VPBROADCASTD AX, Z7
	VPADDD       Z28, Z7, Z7
	VMOVUPS.Z    (SI)(AX*4), K4, Z0
	VMOVUPS.Z    64(SI)(AX*4), K5, Z1
	VPERMT2PS    Z1, Z28, Z0
	VCMPPS       $0x1e, Z4, Z0, K2
	VCMPPS       $3, Z0, Z0, K3
	KORW         K3, K2, K2
	VMOVAPS      Z0, K2, Z4
	VMOVDQA32    Z7, K2, Z6
	ADDQ         R12, AX
	DECQ         R11
	JNZ          cols
	ADDQ         R9, R10
	DECQ         R13
	JNZ          rows

	VMOVUPS       Z4, K1, (DI)
	VPMOVSXDQ     Y6, Z8
	VEXTRACTI64X4 $1, Z6, Y9
	VPMOVSXDQ     Y9, Z9
	KMOVW         K1, AX
	KMOVW         AX, K6
	SHRL          $8, AX
	KMOVW         AX, K7
	VMOVDQU64     Z8, K6, (DX)
	VMOVDQU64     Z9, K7, 64(DX)
	ADDQ          $32, R8
	ADDQ          $64, DI
	ADDQ          $128, DX
	SUBQ          $16, CX
	JG            chunk

	// The next row.
	MOVQ roff-32(SP), R8
	ADDQ 72(BX), R8
	MOVQ 64(BX), AX
	MOVQ orow-16(SP), DI
	LEAQ (DI)(AX*4), DI
	MOVQ DI, orow-16(SP)
	MOVQ irow-24(SP), DX
	LEAQ (DX)(AX*8), DX
	MOVQ DX, irow-24(SP)
	DECQ rows-8(SP)
	JNZ  row

done:
	VZEROUPPER
	RET
