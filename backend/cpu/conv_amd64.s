//go:build !purego

#include "textflag.h"

// The row routines below take a block of planes: planes blocks of rows,
// the destination's dstStep and the source's srcStep elements apart.

// func rowsCopyAVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32, planes, dstStep, srcStep int)
//
// For each plane p < planes and row i < rows, writes the 16-lane block at
// dst[p·dstStep + i·ldd] under smask: lane j gets
// src[off + p·srcStep + i·lds + j] where lmask has bit j, zero elsewhere.
// Lanes outside lmask are not read, so off may point before src.
TEXT ·rowsCopyAVX512(SB), NOSPLIT, $0-112
	MOVQ  dst_base+0(FP), DI
	MOVQ  ldd+24(FP), R8
	MOVQ  src_base+32(FP), SI
	MOVQ  off+56(FP), AX
	MOVQ  lds+64(FP), R9
	MOVQ  rows+72(FP), CX
	MOVL  lmask+80(FP), DX
	MOVL  smask+84(FP), BX
	MOVQ  planes+88(FP), R10
	MOVQ  dstStep+96(FP), R11
	MOVQ  srcStep+104(FP), R12
	LEAQ  (SI)(AX*4), SI
	SHLQ  $2, R8
	SHLQ  $2, R9
	SHLQ  $2, R11
	SHLQ  $2, R12
	KMOVW DX, K1
	KMOVW BX, K2
	TESTQ CX, CX
	JLE   done
	TESTQ R10, R10
	JLE   done

plane:
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ CX, BX

loop:
	VMOVUPS.Z (R14), K1, Z0
	VMOVUPS   Z0, K2, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop
	ADDQ      R11, DI
	ADDQ      R12, SI
	DECQ      R10
	JNZ       plane

done:
	VZEROUPPER
	RET

// func rowsAddAVX512(dst []float32, off, ldd int, src []float32, lds, rows int, mask uint32, planes, dstStep, srcStep int)
//
// For each plane p < planes, row i < rows and lane j < 16 of mask, adds
// src[p·srcStep + i·lds + j] to dst[off + p·dstStep + i·ldd + j]; other
// lanes are not touched, so off may point before dst.
TEXT ·rowsAddAVX512(SB), NOSPLIT, $0-112
	MOVQ  dst_base+0(FP), DI
	MOVQ  off+24(FP), AX
	MOVQ  ldd+32(FP), R8
	MOVQ  src_base+40(FP), SI
	MOVQ  lds+64(FP), R9
	MOVQ  rows+72(FP), CX
	MOVL  mask+80(FP), DX
	MOVQ  planes+88(FP), R10
	MOVQ  dstStep+96(FP), R11
	MOVQ  srcStep+104(FP), R12
	LEAQ  (DI)(AX*4), DI
	SHLQ  $2, R8
	SHLQ  $2, R9
	SHLQ  $2, R11
	SHLQ  $2, R12
	KMOVW DX, K1
	TESTQ CX, CX
	JLE   done
	TESTQ R10, R10
	JLE   done

plane:
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ CX, BX

loop:
	VMOVUPS.Z (R13), K1, Z0
	VMOVUPS.Z (R14), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop
	ADDQ      R11, DI
	ADDQ      R12, SI
	DECQ      R10
	JNZ       plane

done:
	VZEROUPPER
	RET

// Permutation indices: the even lanes of a pair of vectors (0, 2, …, 30),
// and each of the first and the last eight lanes twice (0, 0, 1, 1, …).
DATA convEven<>+0(SB)/8, $0x0000000200000000
DATA convEven<>+8(SB)/8, $0x0000000600000004
DATA convEven<>+16(SB)/8, $0x0000000a00000008
DATA convEven<>+24(SB)/8, $0x0000000e0000000c
DATA convEven<>+32(SB)/8, $0x0000001200000010
DATA convEven<>+40(SB)/8, $0x0000001600000014
DATA convEven<>+48(SB)/8, $0x0000001a00000018
DATA convEven<>+56(SB)/8, $0x0000001e0000001c
GLOBL convEven<>(SB), RODATA|NOPTR, $64

DATA convTwice<>+0(SB)/8, $0x0000000000000000
DATA convTwice<>+8(SB)/8, $0x0000000100000001
DATA convTwice<>+16(SB)/8, $0x0000000200000002
DATA convTwice<>+24(SB)/8, $0x0000000300000003
DATA convTwice<>+32(SB)/8, $0x0000000400000004
DATA convTwice<>+40(SB)/8, $0x0000000500000005
DATA convTwice<>+48(SB)/8, $0x0000000600000006
DATA convTwice<>+56(SB)/8, $0x0000000700000007
DATA convTwice<>+64(SB)/8, $0x0000000800000008
DATA convTwice<>+72(SB)/8, $0x0000000900000009
DATA convTwice<>+80(SB)/8, $0x0000000a0000000a
DATA convTwice<>+88(SB)/8, $0x0000000b0000000b
DATA convTwice<>+96(SB)/8, $0x0000000c0000000c
DATA convTwice<>+104(SB)/8, $0x0000000d0000000d
DATA convTwice<>+112(SB)/8, $0x0000000e0000000e
DATA convTwice<>+120(SB)/8, $0x0000000f0000000f
GLOBL convTwice<>(SB), RODATA|NOPTR, $128

// func rowsCopyS2AVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32, planes, dstStep, srcStep int)
//
// As rowsCopyAVX512 with column stride 2: lane j of row i of plane p gets
// src[off + p·srcStep + i·lds + 2j]. lmask has a bit for each of the 32
// source lanes (those of the even lanes the row needs); lanes outside it
// are not read.
TEXT ·rowsCopyS2AVX512(SB), NOSPLIT, $0-112
	MOVQ      dst_base+0(FP), DI
	MOVQ      ldd+24(FP), R8
	MOVQ      src_base+32(FP), SI
	MOVQ      off+56(FP), AX
	MOVQ      lds+64(FP), R9
	MOVQ      rows+72(FP), CX
	MOVL      lmask+80(FP), DX
	MOVL      smask+84(FP), BX
	MOVQ      planes+88(FP), R10
	MOVQ      dstStep+96(FP), R11
	MOVQ      srcStep+104(FP), R12
	LEAQ      (SI)(AX*4), SI
	SHLQ      $2, R8
	SHLQ      $2, R9
	SHLQ      $2, R11
	SHLQ      $2, R12
	KMOVW     DX, K1
	SHRL      $16, DX
	KMOVW     DX, K3
	KMOVW     BX, K2
	VMOVDQU32 convEven<>(SB), Z28
	TESTQ     CX, CX
	JLE       done
	TESTQ     R10, R10
	JLE       done

plane:
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ CX, BX

loop:
	VMOVUPS.Z (R14), K1, Z0
	VMOVUPS.Z 64(R14), K3, Z1
	VPERMT2PS Z1, Z28, Z0
	VMOVUPS   Z0, K2, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop
	ADDQ      R11, DI
	ADDQ      R12, SI
	DECQ      R10
	JNZ       plane

done:
	VZEROUPPER
	RET

// func rowsAddS2AVX512(dst []float32, off, ldd int, src []float32, lds, rows int, smask, dmask uint32, planes, dstStep, srcStep int)
//
// As rowsAddAVX512 with column stride 2: for the lanes j of smask,
// src[p·srcStep + i·lds + j] is added to dst[off + p·dstStep + i·ldd + 2j];
// dmask has bit 2j for each bit j of smask. Other lanes are not touched.
TEXT ·rowsAddS2AVX512(SB), NOSPLIT, $0-112
	MOVQ      dst_base+0(FP), DI
	MOVQ      off+24(FP), AX
	MOVQ      ldd+32(FP), R8
	MOVQ      src_base+40(FP), SI
	MOVQ      lds+64(FP), R9
	MOVQ      rows+72(FP), CX
	MOVL      smask+80(FP), DX
	MOVL      dmask+84(FP), BX
	MOVQ      planes+88(FP), R10
	MOVQ      dstStep+96(FP), R11
	MOVQ      srcStep+104(FP), R12
	LEAQ      (DI)(AX*4), DI
	SHLQ      $2, R8
	SHLQ      $2, R9
	SHLQ      $2, R11
	SHLQ      $2, R12
	KMOVW     DX, K1
	KMOVW     BX, K2
	SHRL      $16, BX
	KMOVW     BX, K3
	VMOVDQU32 convTwice<>(SB), Z28
	VMOVDQU32 convTwice<>+64(SB), Z29
	TESTQ     CX, CX
	JLE       done
	TESTQ     R10, R10
	JLE       done

plane:
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ CX, BX

loop:
	VMOVUPS.Z (R14), K1, Z2
	VPERMPS   Z2, Z28, Z3
	VPERMPS   Z2, Z29, Z4
	VMOVUPS.Z (R13), K2, Z0
	VADDPS    Z3, Z0, Z0
	VMOVUPS   Z0, K2, (R13)
	VMOVUPS.Z 64(R13), K3, Z1
	VADDPS    Z4, Z1, Z1
	VMOVUPS   Z1, K3, 64(R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop
	ADDQ      R11, DI
	ADDQ      R12, SI
	DECQ      R10
	JNZ       plane

done:
	VZEROUPPER
	RET

// func rowsAxpyAVX512(dst []float32, doff, ldd int, src []float32, soff, lds, rows int, mask uint32, a float32)
//
// For each row i < rows and each lane j < 16 of mask,
// dst[doff + i·ldd + j] += a·src[soff + i·lds + j]; other lanes are not
// touched, so either offset may point before its slice.
TEXT ·rowsAxpyAVX512(SB), NOSPLIT, $0-96
	MOVQ         dst_base+0(FP), DI
	MOVQ         doff+24(FP), AX
	MOVQ         ldd+32(FP), R8
	MOVQ         src_base+40(FP), SI
	MOVQ         soff+64(FP), BX
	MOVQ         lds+72(FP), R9
	MOVQ         rows+80(FP), CX
	MOVL         mask+88(FP), DX
	VBROADCASTSS a+92(FP), Z2
	LEAQ         (DI)(AX*4), DI
	LEAQ         (SI)(BX*4), SI
	SHLQ         $2, R8
	SHLQ         $2, R9
	KMOVW        DX, K1
	TESTQ        CX, CX
	JLE          xdone

xloop:
	VMOVUPS.Z   (DI), K1, Z0
	VMOVUPS.Z   (SI), K1, Z1
	VFMADD231PS Z1, Z2, Z0
	VMOVUPS     Z0, K1, (DI)
	ADDQ        R9, SI
	ADDQ        R8, DI
	DECQ        CX
	JNZ         xloop

xdone:
	VZEROUPPER
	RET

// func rowsDotAVX512(a []float32, aoff, lda int, b []float32, boff, ldb, rows int, mask uint32) float32
//
// Returns the sum over rows i < rows and lanes j < 16 of mask of
// a[aoff + i·lda + j]·b[boff + i·ldb + j], summed per lane down the rows
// and then across the lanes in a fixed order. Lanes outside mask are not
// read.
TEXT ·rowsDotAVX512(SB), NOSPLIT, $0-100
	MOVQ   a_base+0(FP), DI
	MOVQ   aoff+24(FP), AX
	MOVQ   lda+32(FP), R8
	MOVQ   b_base+40(FP), SI
	MOVQ   boff+64(FP), BX
	MOVQ   ldb+72(FP), R9
	MOVQ   rows+80(FP), CX
	MOVL   mask+88(FP), DX
	LEAQ   (DI)(AX*4), DI
	LEAQ   (SI)(BX*4), SI
	SHLQ   $2, R8
	SHLQ   $2, R9
	KMOVW  DX, K1
	VXORPS Z0, Z0, Z0
	TESTQ  CX, CX
	JLE    dsum

dloop:
	VMOVUPS.Z   (DI), K1, Z1
	VMOVUPS.Z   (SI), K1, Z2
	VFMADD231PS Z2, Z1, Z0
	ADDQ        R8, DI
	ADDQ        R9, SI
	DECQ        CX
	JNZ         dloop

dsum:
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	MOVSS         X0, ret+96(FP)
	VZEROUPPER
	RET

// func rowsAxpySrc2AVX512(dst []float32, doff, ldd int, src []float32, soff, lds, rows int, mask, smask uint32, a float32)
//
// As rowsAxpyAVX512 with the source at column stride 2: lane j of row i
// adds a·src[soff + i·lds + 2j]. smask has a bit for each of the 32 source
// lanes the row needs (bit 2j for each bit j of mask).
TEXT ·rowsAxpySrc2AVX512(SB), NOSPLIT, $0-100
	MOVQ         dst_base+0(FP), DI
	MOVQ         doff+24(FP), AX
	MOVQ         ldd+32(FP), R8
	MOVQ         src_base+40(FP), SI
	MOVQ         soff+64(FP), BX
	MOVQ         lds+72(FP), R9
	MOVQ         rows+80(FP), CX
	MOVL         mask+88(FP), DX
	KMOVW        DX, K1
	MOVL         smask+92(FP), DX
	KMOVW        DX, K2
	SHRL         $16, DX
	KMOVW        DX, K3
	VBROADCASTSS a+96(FP), Z5
	VMOVDQU32    convEven<>(SB), Z28
	LEAQ         (DI)(AX*4), DI
	LEAQ         (SI)(BX*4), SI
	SHLQ         $2, R8
	SHLQ         $2, R9
	TESTQ        CX, CX
	JLE          done

loop:
	VMOVUPS.Z   (SI), K2, Z1
	VMOVUPS.Z   64(SI), K3, Z2
	VPERMT2PS   Z2, Z28, Z1
	VMOVUPS.Z   (DI), K1, Z0
	VFMADD231PS Z1, Z5, Z0
	VMOVUPS     Z0, K1, (DI)
	ADDQ        R9, SI
	ADDQ        R8, DI
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	RET

// func rowsAxpyDst2AVX512(dst []float32, doff, ldd int, src []float32, soff, lds, rows int, mask, dmask uint32, a float32)
//
// As rowsAxpyAVX512 with the destination at column stride 2: for the lanes
// j of mask, a·src[soff + i·lds + j] is added to dst[doff + i·ldd + 2j];
// dmask has bit 2j for each bit j of mask.
TEXT ·rowsAxpyDst2AVX512(SB), NOSPLIT, $0-100
	MOVQ         dst_base+0(FP), DI
	MOVQ         doff+24(FP), AX
	MOVQ         ldd+32(FP), R8
	MOVQ         src_base+40(FP), SI
	MOVQ         soff+64(FP), BX
	MOVQ         lds+72(FP), R9
	MOVQ         rows+80(FP), CX
	MOVL         mask+88(FP), DX
	KMOVW        DX, K1
	MOVL         dmask+92(FP), DX
	KMOVW        DX, K2
	SHRL         $16, DX
	KMOVW        DX, K3
	VBROADCASTSS a+96(FP), Z5
	VMOVDQU32    convTwice<>(SB), Z28
	VMOVDQU32    convTwice<>+64(SB), Z29
	LEAQ         (DI)(AX*4), DI
	LEAQ         (SI)(BX*4), SI
	SHLQ         $2, R8
	SHLQ         $2, R9
	TESTQ        CX, CX
	JLE          done

loop:
	VMOVUPS.Z   (SI), K1, Z2
	VPERMPS     Z2, Z28, Z3
	VPERMPS     Z2, Z29, Z4
	VMOVUPS.Z   (DI), K2, Z0
	VFMADD231PS Z3, Z5, Z0
	VMOVUPS     Z0, K2, (DI)
	VMOVUPS.Z   64(DI), K3, Z1
	VFMADD231PS Z4, Z5, Z1
	VMOVUPS     Z1, K3, 64(DI)
	ADDQ        R9, SI
	ADDQ        R8, DI
	DECQ        CX
	JNZ         loop

done:
	VZEROUPPER
	RET

// func rowsDotS2AVX512(a []float32, aoff, lda int, b []float32, boff, ldb, rows int, mask, bmask uint32) float32
//
// As rowsDotAVX512 with b at column stride 2: lane j of row i multiplies
// a[aoff + i·lda + j] by b[boff + i·ldb + 2j]; bmask has bit 2j for each
// bit j of mask.
TEXT ·rowsDotS2AVX512(SB), NOSPLIT, $0-100
	MOVQ      a_base+0(FP), DI
	MOVQ      aoff+24(FP), AX
	MOVQ      lda+32(FP), R8
	MOVQ      b_base+40(FP), SI
	MOVQ      boff+64(FP), BX
	MOVQ      ldb+72(FP), R9
	MOVQ      rows+80(FP), CX
	MOVL      mask+88(FP), DX
	KMOVW     DX, K1
	MOVL      bmask+92(FP), DX
	KMOVW     DX, K2
	SHRL      $16, DX
	KMOVW     DX, K3
	VMOVDQU32 convEven<>(SB), Z28
	LEAQ      (DI)(AX*4), DI
	LEAQ      (SI)(BX*4), SI
	SHLQ      $2, R8
	SHLQ      $2, R9
	VXORPS    Z0, Z0, Z0
	TESTQ     CX, CX
	JLE       sum

loop:
	VMOVUPS.Z   (DI), K1, Z1
	VMOVUPS.Z   (SI), K2, Z2
	VMOVUPS.Z   64(SI), K3, Z3
	VPERMT2PS   Z3, Z28, Z2
	VFMADD231PS Z2, Z1, Z0
	ADDQ        R8, DI
	ADDQ        R9, SI
	DECQ        CX
	JNZ         loop

sum:
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VADDSS        X1, X0, X0
	MOVSS         X0, ret+96(FP)
	VZEROUPPER
	RET
