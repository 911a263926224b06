//go:build !purego

#include "textflag.h"

// Permutation indices of each of the first and the last eight lanes twice
// (0, 0, 1, 1, …); the even lanes of a pair of vectors are ·evenLanes (in
// pool_amd64.s).
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

// The routines below move blocks of rows of 16 lanes under lane masks;
// lanes outside the masks are neither read nor written, so a block may
// start before its slice when its low lanes are masked off. Where a side
// has column stride 2, its mask covers 32 lanes (bit 2j for lane j).

// func rowsCopyAVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32, planes, dstStep, srcStep, sw int)
//
// For each plane p < planes and row i < rows, writes the lanes j of smask
// of dst[p·dstStep + i·ldd + j]: src[off + p·srcStep + i·lds + sw·j] where
// lmask has the lane, zero elsewhere; sw is 1 or 2.
TEXT ·rowsCopyAVX512(SB), NOSPLIT, $0-120
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
	VMOVDQU32 ·evenLanes(SB), Z28 // before R15, which a global access may use
	MOVQ      sw+112(FP), R15
	LEAQ      (SI)(AX*4), SI
	SHLQ      $2, R8
	SHLQ      $2, R9
	SHLQ      $2, R11
	SHLQ      $2, R12
	KMOVW     DX, K1
	SHRL      $16, DX
	KMOVW     DX, K3
	KMOVW     BX, K2
	TESTQ     CX, CX
	JLE       done
	TESTQ     R10, R10
	JLE       done

plane:
	MOVQ DI, R13
	MOVQ SI, R14
	MOVQ CX, BX
	CMPQ R15, $2
	JEQ  loop2

loop1:
	VMOVUPS.Z (R14), K1, Z0
	VMOVUPS   Z0, K2, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop1
	JMP       next

loop2:
	VMOVUPS.Z (R14), K1, Z0
	VMOVUPS.Z 64(R14), K3, Z1
	VPERMT2PS Z1, Z28, Z0
	VMOVUPS   Z0, K2, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop2

next:
	ADDQ R11, DI
	ADDQ R12, SI
	DECQ R10
	JNZ  plane

done:
	VZEROUPPER
	RET

// func rowsAddAVX512(dst []float32, off, ldd int, src []float32, lds, rows int, smask, dmask uint32, planes, dstStep, srcStep, sw int)
//
// For each plane p < planes, row i < rows and lane j of smask, adds
// src[p·srcStep + i·lds + j] to dst[off + p·dstStep + i·ldd + sw·j]; dmask
// is the destination's mask (smask itself when sw is 1).
TEXT ·rowsAddAVX512(SB), NOSPLIT, $0-120
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
	MOVQ      sw+112(FP), R15
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
	CMPQ R15, $2
	JEQ  loop2

loop1:
	VMOVUPS.Z (R13), K1, Z0
	VMOVUPS.Z (R14), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (R13)
	ADDQ      R9, R14
	ADDQ      R8, R13
	DECQ      BX
	JNZ       loop1
	JMP       next

loop2:
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
	JNZ       loop2

next:
	ADDQ R11, DI
	ADDQ R12, SI
	DECQ R10
	JNZ  plane

done:
	VZEROUPPER
	RET

// func rowsAxpyAVX512(dst []float32, doff, ldd int, src []float32, soff, lds, rows int, mask, wide uint32, w []float32, mode, planes, dstStep, srcStep, wStep int)
//
// For each plane p < planes, row i < rows and lane j of mask, adds
// w[p·wStep]·src[soff + p·srcStep + i·lds + s·j] to
// dst[doff + p·dstStep + i·ldd + d·j], where (d, s) is (1, 1) for mode 0,
// (1, 2) for mode 1 and (2, 1) for mode 2; wide is the mask of the side
// with stride 2.
TEXT ·rowsAxpyAVX512(SB), NOSPLIT, $0-160
	VMOVDQU32 ·evenLanes(SB), Z28 // before R15, which a global access may use
	VMOVDQU32 convTwice<>(SB), Z29
	VMOVDQU32 convTwice<>+64(SB), Z30
	MOVQ      dst_base+0(FP), DI
	MOVQ      doff+24(FP), AX
	MOVQ      ldd+32(FP), R8
	MOVQ      src_base+40(FP), SI
	MOVQ      soff+64(FP), BX
	MOVQ      lds+72(FP), R9
	MOVQ      rows+80(FP), CX
	MOVL      mask+88(FP), DX
	KMOVW     DX, K1
	MOVL      wide+92(FP), DX
	KMOVW     DX, K2
	SHRL      $16, DX
	KMOVW     DX, K3
	MOVQ      w_base+96(FP), R12
	MOVQ      mode+120(FP), R15
	MOVQ      planes+128(FP), R10
	MOVQ      dstStep+136(FP), R11
	MOVQ      srcStep+144(FP), R13
	MOVQ      wStep+152(FP), R14
	LEAQ      (DI)(AX*4), DI
	LEAQ      (SI)(BX*4), SI
	SHLQ      $2, R8
	SHLQ      $2, R9
	SHLQ      $2, R11
	SHLQ      $2, R13
	SHLQ      $2, R14
	TESTQ     CX, CX
	JLE       done
	TESTQ     R10, R10
	JLE       done

plane:
	VBROADCASTSS (R12), Z5
	MOVQ         DI, AX
	MOVQ         SI, BX
	MOVQ         CX, DX
	CMPQ         R15, $1
	JEQ          src2loop
	JGT          dst2loop

loop:
	VMOVUPS.Z   (AX), K1, Z0
	VMOVUPS.Z   (BX), K1, Z1
	VFMADD231PS Z1, Z5, Z0
	VMOVUPS     Z0, K1, (AX)
	ADDQ        R9, BX
	ADDQ        R8, AX
	DECQ        DX
	JNZ         loop
	JMP         next

src2loop:
	VMOVUPS.Z   (BX), K2, Z1
	VMOVUPS.Z   64(BX), K3, Z2
	VPERMT2PS   Z2, Z28, Z1
	VMOVUPS.Z   (AX), K1, Z0
	VFMADD231PS Z1, Z5, Z0
	VMOVUPS     Z0, K1, (AX)
	ADDQ        R9, BX
	ADDQ        R8, AX
	DECQ        DX
	JNZ         src2loop
	JMP         next

dst2loop:
	VMOVUPS.Z   (BX), K1, Z2
	VPERMPS     Z2, Z29, Z3
	VPERMPS     Z2, Z30, Z4
	VMOVUPS.Z   (AX), K2, Z0
	VFMADD231PS Z3, Z5, Z0
	VMOVUPS     Z0, K2, (AX)
	VMOVUPS.Z   64(AX), K3, Z1
	VFMADD231PS Z4, Z5, Z1
	VMOVUPS     Z1, K3, 64(AX)
	ADDQ        R9, BX
	ADDQ        R8, AX
	DECQ        DX
	JNZ         dst2loop

next:
	ADDQ R11, DI
	ADDQ R13, SI
	ADDQ R14, R12
	DECQ R10
	JNZ  plane

done:
	VZEROUPPER
	RET

// func rowsDotAccAVX512(acc []float32, a []float32, aoff, lda int, b []float32, boff, ldb, rows int, mask, wide uint32, bsw, planes, accStep, aStep, bStep int)
//
// For each plane p < planes, adds to acc[p·accStep + j], for each lane j of
// mask, the sum over rows i < rows of
// a[aoff + p·aStep + i·lda + j]·b[boff + p·bStep + i·ldb + bsw·j], in row
// order; bsw is 1 or 2, and wide is b's mask when it is 2.
TEXT ·rowsDotAccAVX512(SB), NOSPLIT, $0-160
	VMOVDQU32 ·evenLanes(SB), Z28 // before R15, which a global access may use
	MOVQ      acc_base+0(FP), R10
	MOVQ      a_base+24(FP), DI
	MOVQ      aoff+48(FP), AX
	MOVQ      lda+56(FP), R8
	MOVQ      b_base+64(FP), SI
	MOVQ      boff+88(FP), BX
	MOVQ      ldb+96(FP), R9
	MOVQ      rows+104(FP), CX
	MOVL      mask+112(FP), DX
	KMOVW     DX, K1
	MOVL      wide+116(FP), DX
	KMOVW     DX, K2
	SHRL      $16, DX
	KMOVW     DX, K3
	MOVQ      bsw+120(FP), R15
	MOVQ      planes+128(FP), R11
	MOVQ      accStep+136(FP), R12
	MOVQ      aStep+144(FP), R13
	MOVQ      bStep+152(FP), R14
	LEAQ      (DI)(AX*4), DI
	LEAQ      (SI)(BX*4), SI
	SHLQ      $2, R8
	SHLQ      $2, R9
	SHLQ      $2, R12
	SHLQ      $2, R13
	SHLQ      $2, R14
	TESTQ     CX, CX
	JLE       done
	TESTQ     R11, R11
	JLE       done

plane:
	VMOVUPS (R10), Z0
	MOVQ    DI, AX
	MOVQ    SI, BX
	MOVQ    CX, DX
	CMPQ    R15, $2
	JEQ     loop2

loop1:
	VMOVUPS.Z   (AX), K1, Z1
	VMOVUPS.Z   (BX), K1, Z2
	VFMADD231PS Z2, Z1, Z0
	ADDQ        R8, AX
	ADDQ        R9, BX
	DECQ        DX
	JNZ         loop1
	JMP         next

loop2:
	VMOVUPS.Z   (AX), K1, Z1
	VMOVUPS.Z   (BX), K2, Z2
	VMOVUPS.Z   64(BX), K3, Z3
	VPERMT2PS   Z3, Z28, Z2
	VFMADD231PS Z2, Z1, Z0
	ADDQ        R8, AX
	ADDQ        R9, BX
	DECQ        DX
	JNZ         loop2

next:
	VMOVUPS Z0, (R10)
	ADDQ    R12, R10
	ADDQ    R13, DI
	ADDQ    R14, SI
	DECQ    R11
	JNZ     plane

done:
	VZEROUPPER
	RET
