//go:build !purego

#include "textflag.h"

// func rowsCopyAVX512(dst []float32, ldd int, src []float32, off, lds, rows int, lmask, smask uint32)
//
// For each row i < rows, writes the 16-lane block at dst[i·ldd] under
// smask: lane j gets src[off + i·lds + j] where lmask has bit j, zero
// elsewhere. Lanes outside lmask are not read, so off may point before src.
TEXT ·rowsCopyAVX512(SB), NOSPLIT, $0-88
	MOVQ  dst_base+0(FP), DI
	MOVQ  ldd+24(FP), R8
	MOVQ  src_base+32(FP), SI
	MOVQ  off+56(FP), AX
	MOVQ  lds+64(FP), R9
	MOVQ  rows+72(FP), CX
	MOVL  lmask+80(FP), DX
	MOVL  smask+84(FP), BX
	LEAQ  (SI)(AX*4), SI
	SHLQ  $2, R8
	SHLQ  $2, R9
	KMOVW DX, K1
	KMOVW BX, K2
	TESTQ CX, CX
	JLE   done

loop:
	VMOVUPS.Z (SI), K1, Z0
	VMOVUPS   Z0, K2, (DI)
	ADDQ      R9, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET

// func rowsAddAVX512(dst []float32, off, ldd int, src []float32, lds, rows int, mask uint32)
//
// For each row i < rows, adds src[i·lds + j] to dst[off + i·ldd + j] for
// the lanes j where mask has bit j; other lanes are not touched, so off may
// point before dst.
TEXT ·rowsAddAVX512(SB), NOSPLIT, $0-84
	MOVQ  dst_base+0(FP), DI
	MOVQ  off+24(FP), AX
	MOVQ  ldd+32(FP), R8
	MOVQ  src_base+40(FP), SI
	MOVQ  lds+64(FP), R9
	MOVQ  rows+72(FP), CX
	MOVL  mask+80(FP), DX
	LEAQ  (DI)(AX*4), DI
	SHLQ  $2, R8
	SHLQ  $2, R9
	KMOVW DX, K1
	TESTQ CX, CX
	JLE   done

loop:
	VMOVUPS.Z (DI), K1, Z0
	VMOVUPS.Z (SI), K1, Z1
	VADDPS    Z1, Z0, Z0
	VMOVUPS   Z0, K1, (DI)
	ADDQ      R9, SI
	ADDQ      R8, DI
	DECQ      CX
	JNZ       loop

done:
	VZEROUPPER
	RET
