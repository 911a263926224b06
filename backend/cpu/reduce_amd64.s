//go:build !purego

#include "textflag.h"

// Vector loops of the float32 sums (reduce_amd64.go declares them), with
// Neumaier's compensated step in float64:
//
//	t = s + v;  c += |s| ≥ |v| ? (s − t) + v : (v − t) + s;  s = t.

DATA reduceAbs<>+0(SB)/8, $0x7fffffffffffffff
GLOBL reduceAbs<>(SB), RODATA|NOPTR, $8

// NEUMAIER512(V, S, C) folds V into the sums S with compensations C;
// Z28 holds the absolute-value mask; Z20–Z24 are scratch.
#define NEUMAIER512(V, S, C) \
	VADDPD    V, S, Z20; \
	VSUBPD    Z20, S, Z21; \
	VADDPD    V, Z21, Z21; \
	VSUBPD    Z20, V, Z22; \
	VADDPD    S, Z22, Z22; \
	VPANDQ    Z28, S, Z23; \
	VPANDQ    Z28, V, Z24; \
	VCMPPD    $13, Z24, Z23, K2; \
	VMOVAPD   Z21, K2, Z22; \
	VADDPD    Z22, C, C; \
	VMOVAPD   Z20, S

// NEUMAIER256 is NEUMAIER512 for AVX2: Y13 holds the mask; Y9–Y12, Y14 are
// scratch.
#define NEUMAIER256(V, S, C) \
	VADDPD    V, S, Y9; \
	VSUBPD    Y9, S, Y10; \
	VADDPD    V, Y10, Y10; \
	VSUBPD    Y9, V, Y11; \
	VADDPD    S, Y11, Y11; \
	VANDPD    Y13, S, Y12; \
	VANDPD    Y13, V, Y14; \
	VCMPPD    $13, Y14, Y12, Y14; \
	VBLENDVPD Y14, Y10, Y11, Y11; \
	VADDPD    Y11, C, C; \
	VMOVAPD   Y9, S

// func sumColumnsAVX512(x []float32, s, c []float64)
//
// Folds x[k] into s[k], c[k] for k below len(s) − len(s) mod 8.
TEXT ·sumColumnsAVX512(SB), NOSPLIT, $0-72
	MOVQ         x_base+0(FP), SI
	MOVQ         s_base+24(FP), DI
	MOVQ         s_len+32(FP), CX
	MOVQ         c_base+48(FP), DX
	VBROADCASTSD reduceAbs<>(SB), Z28
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Z0
	VMOVUPD   (DI), Z1
	VMOVUPD   (DX), Z2
	NEUMAIER512(Z0, Z1, Z2)
	VMOVUPD   Z1, (DI)
	VMOVUPD   Z2, (DX)
	ADDQ      $32, SI
	ADDQ      $64, DI
	ADDQ      $64, DX
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func sumColumns4AVX512(x []float32, stride int, s, c []float64)
//
// Folds four rows into s[k], c[k] for k below len(s) − len(s) mod 8: row
// r is x[r·stride : r·stride+len(s)], r = 0…3, folded in that order into
// each column, as four calls of sumColumnsAVX512 would, with s and c
// loaded and stored once.
TEXT ·sumColumns4AVX512(SB), NOSPLIT, $0-80
	MOVQ         x_base+0(FP), SI
	MOVQ         stride+24(FP), BX
	MOVQ         s_base+32(FP), DI
	MOVQ         s_len+40(FP), CX
	MOVQ         c_base+56(FP), DX
	VBROADCASTSD reduceAbs<>(SB), Z28
	SHLQ         $2, BX
	LEAQ         (BX)(BX*2), R8
	SHRQ         $3, CX
	JZ           done4
loop4:
	VMOVUPD   (DI), Z1
	VMOVUPD   (DX), Z2
	VCVTPS2PD (SI), Z0
	NEUMAIER512(Z0, Z1, Z2)
	VCVTPS2PD (SI)(BX*1), Z0
	NEUMAIER512(Z0, Z1, Z2)
	VCVTPS2PD (SI)(BX*2), Z0
	NEUMAIER512(Z0, Z1, Z2)
	VCVTPS2PD (SI)(R8*1), Z0
	NEUMAIER512(Z0, Z1, Z2)
	VMOVUPD   Z1, (DI)
	VMOVUPD   Z2, (DX)
	ADDQ      $32, SI
	ADDQ      $64, DI
	ADDQ      $64, DX
	DECQ      CX
	JNZ       loop4
done4:
	VZEROUPPER
	RET

// func sumColumnsAVX2(x []float32, s, c []float64)
//
// Folds x[k] into s[k], c[k] for k below len(s) − len(s) mod 4.
TEXT ·sumColumnsAVX2(SB), NOSPLIT, $0-72
	MOVQ         x_base+0(FP), SI
	MOVQ         s_base+24(FP), DI
	MOVQ         s_len+32(FP), CX
	MOVQ         c_base+48(FP), DX
	VBROADCASTSD reduceAbs<>(SB), Y13
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Y0
	VMOVUPD   (DI), Y1
	VMOVUPD   (DX), Y2
	NEUMAIER256(Y0, Y1, Y2)
	VMOVUPD   Y1, (DI)
	VMOVUPD   Y2, (DX)
	ADDQ      $16, SI
	ADDQ      $32, DI
	ADDQ      $32, DX
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func sumLanesAVX512(x []float32, lanes *[16]float64)
//
// Sums the first len(x) − len(x) mod 8 elements of x in 8 lanes (element i
// into lane i mod 8), writing the lanes' sums to lanes[0:8] and their
// compensations to lanes[8:16].
TEXT ·sumLanesAVX512(SB), NOSPLIT, $0-32
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	MOVQ         lanes+24(FP), DI
	VBROADCASTSD reduceAbs<>(SB), Z28
	VXORPD       Z1, Z1, Z1
	VXORPD       Z2, Z2, Z2
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Z0
	NEUMAIER512(Z0, Z1, Z2)
	ADDQ      $32, SI
	DECQ      CX
	JNZ       loop
done:
	VMOVUPD Z1, (DI)
	VMOVUPD Z2, 64(DI)
	VZEROUPPER
	RET

// func sumLanesAVX2(x []float32, lanes *[8]float64)
//
// sumLanesAVX512 with 4 lanes: sums to lanes[0:4], compensations to
// lanes[4:8].
TEXT ·sumLanesAVX2(SB), NOSPLIT, $0-32
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	MOVQ         lanes+24(FP), DI
	VBROADCASTSD reduceAbs<>(SB), Y13
	VXORPD       Y1, Y1, Y1
	VXORPD       Y2, Y2, Y2
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Y0
	NEUMAIER256(Y0, Y1, Y2)
	ADDQ      $16, SI
	DECQ      CX
	JNZ       loop
done:
	VMOVUPD Y1, (DI)
	VMOVUPD Y2, 32(DI)
	VZEROUPPER
	RET
