//go:build !purego

#include "textflag.h"
#include "vecmath_amd64.h"

// Vector loops of softmax and layer normalisation over one contiguous row
// (softmax_amd64.go declares them).

// func maxF32AVX512(x []float32) float32
//
// The largest element of x (len(x) ≥ 1), or NaN when x holds a NaN or an
// infinity: Z1 sums x − x, which is NaN exactly for those.
TEXT ·maxF32AVX512(SB), NOSPLIT, $0-28
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	VBROADCASTSS NEGINF, Z0
	VPXORD       Z1, Z1, Z1
	CMPQ         CX, $16
	JB           tail
loop:
	VMOVUPS (SI), Z2
	VMAXPS  Z2, Z0, Z0
	VSUBPS  Z2, Z2, Z3
	VADDPS  Z3, Z1, Z1
	ADDQ    $64, SI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    reduce
	TAILMASK512
	VMOVUPS.Z (SI), K1, Z2
	VSUBPS    Z2, Z2, Z3
	VADDPS    Z3, Z1, Z1
	VBROADCASTSS NEGINF, Z2
	VMOVUPS   (SI), K1, Z2
	VMAXPS    Z2, Z0, Z0
reduce:
	VEXTRACTF64X4 $1, Z0, Y2
	VMAXPS        Y2, Y0, Y0
	VEXTRACTF128  $1, Y0, X2
	VMAXPS        X2, X0, X0
	VPERMILPS     $0x4e, X0, X2
	VMAXPS        X2, X0, X0
	VPERMILPS     $0xb1, X0, X2
	VMAXPS        X2, X0, X0
	VEXTRACTF64X4 $1, Z1, Y2
	VADDPS        Y2, Y1, Y1
	VEXTRACTF128  $1, Y1, X2
	VADDPS        X2, X1, X1
	VPERMILPS     $0x4e, X1, X2
	VADDPS        X2, X1, X1
	VPERMILPS     $0xb1, X1, X2
	VADDPS        X2, X1, X1
	VADDSS        X1, X0, X0
	VMOVSS        X0, ret+24(FP)
	VZEROUPPER
	RET

// func maxF32AVX2(x []float32) float32
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-28
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	VBROADCASTSS NEGINF, Y0
	VXORPS       Y1, Y1, Y1
	CMPQ         CX, $8
	JB           tail
loop:
	VMOVUPS (SI), Y2
	VMAXPS  Y2, Y0, Y0
	VSUBPS  Y2, Y2, Y3
	VADDPS  Y3, Y1, Y1
	ADDQ    $32, SI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    reduce
	TAILMASK256
	VMASKMOVPS   (SI), Y15, Y2
	VSUBPS       Y2, Y2, Y3
	VADDPS       Y3, Y1, Y1
	VBROADCASTSS NEGINF, Y4
	VBLENDVPS    Y15, Y2, Y4, Y2
	VMAXPS       Y2, Y0, Y0
reduce:
	VEXTRACTF128 $1, Y0, X2
	VMAXPS       X2, X0, X0
	VPERMILPS    $0x4e, X0, X2
	VMAXPS       X2, X0, X0
	VPERMILPS    $0xb1, X0, X2
	VMAXPS       X2, X0, X0
	VEXTRACTF128 $1, Y1, X2
	VADDPS       X2, X1, X1
	VPERMILPS    $0x4e, X1, X2
	VADDPS       X2, X1, X1
	VPERMILPS    $0xb1, X1, X2
	VADDPS       X2, X1, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func expSubSumAVX512(y, x []float32, m float32) float64
//
// y = e^(x − m) for x − m ≥ −86 (0 below), and returns Σ y accumulated in
// float64 in a fixed order.
TEXT ·expSubSumAVX512(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSS m+48(FP), Z9
	VXORPD       Z10, Z10, Z10
	VXORPD       Z11, Z11, Z11
	CMPQ         CX, $16
	JB           tail
loop:
	VMOVUPS       (SI), Z0
	VSUBPS        Z9, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVUPS       Z3, (DI)
	VCVTPS2PD     Y3, Z4
	VEXTRACTF64X4 $1, Z3, Y5
	VCVTPS2PD     Y5, Z5
	VADDPD        Z4, Z10, Z10
	VADDPD        Z5, Z11, Z11
	ADDQ          $64, SI
	ADDQ          $64, DI
	SUBQ          $16, CX
	CMPQ          CX, $16
	JAE           loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK512
	VMOVUPS.Z     (SI), K1, Z0
	VSUBPS        Z9, Z0, Z0
	EXP512(Z0, Z1, Z2, Z3)
	VMOVAPS.Z     Z3, K1, Z3
	VMOVUPS       Z3, K1, (DI)
	VCVTPS2PD     Y3, Z4
	VEXTRACTF64X4 $1, Z3, Y5
	VCVTPS2PD     Y5, Z5
	VADDPD        Z4, Z10, Z10
	VADDPD        Z5, Z11, Z11
done:
	VADDPD Z11, Z10, Z0
	HSUM512
	VMOVSD X0, ret+56(FP)
	VZEROUPPER
	RET

// func expSubSumAVX2(y, x []float32, m float32) float64
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSS m+48(FP), Y12
	VXORPD       Y10, Y10, Y10
	VXORPD       Y11, Y11, Y11
	CMPQ         CX, $8
	JB           tail
loop:
	VMOVUPS      (SI), Y0
	VSUBPS       Y12, Y0, Y0
	EXP256(Y0, Y1, Y2, Y3, Y4, Y5)
	VMOVUPS      Y3, (DI)
	VCVTPS2PD    X3, Y4
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD    X5, Y5
	VADDPD       Y4, Y10, Y10
	VADDPD       Y5, Y11, Y11
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $8, CX
	CMPQ         CX, $8
	JAE          loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK256
	VMASKMOVPS   (SI), Y15, Y0
	VSUBPS       Y12, Y0, Y0
	EXP256(Y0, Y1, Y2, Y3, Y4, Y5)
	VANDPS       Y15, Y3, Y3
	VMASKMOVPS   Y3, Y15, (DI)
	VCVTPS2PD    X3, Y4
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD    X5, Y5
	VADDPD       Y4, Y10, Y10
	VADDPD       Y5, Y11, Y11
done:
	VADDPD Y11, Y10, Y0
	HSUM256
	VMOVSD X0, ret+56(FP)
	VZEROUPPER
	RET

// func softmaxGradDxAVX512(dx, y, dy []float32, s float64)
//
// dx = y·(dy − s) in float64, over the first len(dx) − len(dx) mod 8
// elements.
TEXT ·softmaxGradDxAVX512(SB), NOSPLIT, $0-80
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         y_base+24(FP), SI
	MOVQ         dy_base+48(FP), BX
	VBROADCASTSD s+72(FP), Z9
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Z0
	VCVTPS2PD (BX), Z1
	VSUBPD    Z9, Z1, Z1
	VMULPD    Z1, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, BX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func softmaxGradDxAVX2(dx, y, dy []float32, s float64)
//
// softmaxGradDxAVX512 over the first len(dx) − len(dx) mod 4 elements.
TEXT ·softmaxGradDxAVX2(SB), NOSPLIT, $0-80
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         y_base+24(FP), SI
	MOVQ         dy_base+48(FP), BX
	VBROADCASTSD s+72(FP), Y9
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD  (SI), Y0
	VCVTPS2PD  (BX), Y1
	VSUBPD     Y9, Y1, Y1
	VMULPD     Y1, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)
	ADDQ       $16, SI
	ADDQ       $16, BX
	ADDQ       $16, DI
	DECQ       CX
	JNZ        loop
done:
	VZEROUPPER
	RET

// func lnApplyAVX512(y, x, w, b []float32, mu, rs float64)
//
// y = ((x − mu)·rs)·w + b in float64, over the first len(y) − len(y) mod 8
// elements.
TEXT ·lnApplyAVX512(SB), NOSPLIT, $0-112
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	MOVQ         w_base+48(FP), BX
	MOVQ         b_base+72(FP), DX
	VBROADCASTSD mu+96(FP), Z8
	VBROADCASTSD rs+104(FP), Z9
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Z0
	VCVTPS2PD (BX), Z1
	VCVTPS2PD (DX), Z2
	VSUBPD    Z8, Z0, Z0
	VMULPD    Z9, Z0, Z0
	VMULPD    Z1, Z0, Z0
	VADDPD    Z2, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, BX
	ADDQ      $32, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func lnApplyAVX2(y, x, w, b []float32, mu, rs float64)
//
// lnApplyAVX512 over the first len(y) − len(y) mod 4 elements.
TEXT ·lnApplyAVX2(SB), NOSPLIT, $0-112
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	MOVQ         w_base+48(FP), BX
	MOVQ         b_base+72(FP), DX
	VBROADCASTSD mu+96(FP), Y8
	VBROADCASTSD rs+104(FP), Y9
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD  (SI), Y0
	VCVTPS2PD  (BX), Y1
	VCVTPS2PD  (DX), Y2
	VSUBPD     Y8, Y0, Y0
	VMULPD     Y9, Y0, Y0
	VMULPD     Y1, Y0, Y0
	VADDPD     Y2, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)
	ADDQ       $16, SI
	ADDQ       $16, BX
	ADDQ       $16, DX
	ADDQ       $16, DI
	DECQ       CX
	JNZ        loop
done:
	VZEROUPPER
	RET

// func lnGradRowAVX512(dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) (sg, sgx float64)
//
// One row of layer normalisation's backward pass over the first
// len(dy) − len(dy) mod 8 elements: x̂ = (x − mu)·rs, pw += dy·x̂,
// pb += dy, g = dy·w, and the sums Σ g and Σ g·x̂.
TEXT ·lnGradRowAVX512(SB), NOSPLIT, $0-200
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         x_base+24(FP), BX
	MOVQ         w_base+48(FP), DX
	MOVQ         pw_base+72(FP), R8
	MOVQ         pb_base+96(FP), R9
	MOVQ         g_base+120(FP), R10
	MOVQ         xhat_base+144(FP), R11
	VBROADCASTSD mu+168(FP), Z8
	VBROADCASTSD rs+176(FP), Z9
	VXORPD       Z10, Z10, Z10
	VXORPD       Z11, Z11, Z11
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Z0
	VCVTPS2PD (BX), Z1
	VSUBPD    Z8, Z1, Z1
	VMULPD    Z9, Z1, Z1
	VMOVUPD   Z1, (R11)
	VMULPD    Z1, Z0, Z2
	VADDPD    (R8), Z2, Z2
	VMOVUPD   Z2, (R8)
	VADDPD    (R9), Z0, Z3
	VMOVUPD   Z3, (R9)
	VCVTPS2PD (DX), Z4
	VMULPD    Z4, Z0, Z0
	VMOVUPD   Z0, (R10)
	VADDPD    Z0, Z10, Z10
	VMULPD    Z1, Z0, Z5
	VADDPD    Z5, Z11, Z11
	ADDQ      $32, SI
	ADDQ      $32, BX
	ADDQ      $32, DX
	ADDQ      $64, R8
	ADDQ      $64, R9
	ADDQ      $64, R10
	ADDQ      $64, R11
	DECQ      CX
	JNZ       loop
done:
	VMOVAPD Z10, Z0
	HSUM512
	VMOVSD  X0, sg+184(FP)
	VMOVAPD Z11, Z0
	HSUM512
	VMOVSD  X0, sgx+192(FP)
	VZEROUPPER
	RET

// func lnGradRowAVX2(dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) (sg, sgx float64)
//
// lnGradRowAVX512 over the first len(dy) − len(dy) mod 4 elements.
TEXT ·lnGradRowAVX2(SB), NOSPLIT, $0-200
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         x_base+24(FP), BX
	MOVQ         w_base+48(FP), DX
	MOVQ         pw_base+72(FP), R8
	MOVQ         pb_base+96(FP), R9
	MOVQ         g_base+120(FP), R10
	MOVQ         xhat_base+144(FP), R11
	VBROADCASTSD mu+168(FP), Y8
	VBROADCASTSD rs+176(FP), Y9
	VXORPD       Y10, Y10, Y10
	VXORPD       Y11, Y11, Y11
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (BX), Y1
	VSUBPD    Y8, Y1, Y1
	VMULPD    Y9, Y1, Y1
	VMOVUPD   Y1, (R11)
	VMULPD    Y1, Y0, Y2
	VADDPD    (R8), Y2, Y2
	VMOVUPD   Y2, (R8)
	VADDPD    (R9), Y0, Y3
	VMOVUPD   Y3, (R9)
	VCVTPS2PD (DX), Y4
	VMULPD    Y4, Y0, Y0
	VMOVUPD   Y0, (R10)
	VADDPD    Y0, Y10, Y10
	VMULPD    Y1, Y0, Y5
	VADDPD    Y5, Y11, Y11
	ADDQ      $16, SI
	ADDQ      $16, BX
	ADDQ      $16, DX
	ADDQ      $32, R8
	ADDQ      $32, R9
	ADDQ      $32, R10
	ADDQ      $32, R11
	DECQ      CX
	JNZ       loop
done:
	VMOVAPD Y10, Y0
	HSUM256
	VMOVSD  X0, sg+184(FP)
	VMOVAPD Y11, Y0
	HSUM256
	VMOVSD  X0, sgx+192(FP)
	VZEROUPPER
	RET

// func lnGradDxAVX512(dx []float32, g, xhat []float64, rs, sg, sgx float64)
//
// dx = rs·((g − sg) − x̂·sgx) in float64, over the first
// len(dx) − len(dx) mod 8 elements.
TEXT ·lnGradDxAVX512(SB), NOSPLIT, $0-96
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         xhat_base+48(FP), BX
	VBROADCASTSD rs+72(FP), Z8
	VBROADCASTSD sg+80(FP), Z9
	VBROADCASTSD sgx+88(FP), Z10
	SHRQ         $3, CX
	JZ           done
loop:
	VMOVUPD   (SI), Z0
	VSUBPD    Z9, Z0, Z0
	VMULPD    (BX), Z10, Z1
	VSUBPD    Z1, Z0, Z0
	VMULPD    Z8, Z0, Z0
	VCVTPD2PS Z0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $64, BX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       loop
done:
	VZEROUPPER
	RET

// func lnGradDxAVX2(dx []float32, g, xhat []float64, rs, sg, sgx float64)
//
// lnGradDxAVX512 over the first len(dx) − len(dx) mod 4 elements.
TEXT ·lnGradDxAVX2(SB), NOSPLIT, $0-96
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         xhat_base+48(FP), BX
	VBROADCASTSD rs+72(FP), Y8
	VBROADCASTSD sg+80(FP), Y9
	VBROADCASTSD sgx+88(FP), Y10
	SHRQ         $2, CX
	JZ           done
loop:
	VMOVUPD    (SI), Y0
	VSUBPD     Y9, Y0, Y0
	VMULPD     (BX), Y10, Y1
	VSUBPD     Y1, Y0, Y0
	VMULPD     Y8, Y0, Y0
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)
	ADDQ       $32, SI
	ADDQ       $32, BX
	ADDQ       $16, DI
	DECQ       CX
	JNZ        loop
done:
	VZEROUPPER
	RET
