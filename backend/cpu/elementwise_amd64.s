//go:build !purego

#include "textflag.h"
#include "vecmath_amd64.h"

// Vector loops of the float32 elementwise kernels (elementwise_amd64.go
// declares them). Every loop takes slices of equal length n; the last n mod
// width elements go through the same instructions under a lane mask, so an
// element's result never depends on where a slice starts or ends.

// Φ(x), the standard normal distribution function, through
// erfc(a) = t·exp(−a² + P(t)), t = 1/(1 + a/2), a = |x|/√2 (the Chebyshev
// fit of Numerical Recipes, §6.2, fractional error below 1.2·10⁻⁷), so that
// Φ(x) = erfc(a)/2 for x < 0 keeps its relative accuracy far into the
// tail, and Φ(x) = 1 − erfc(a)/2 otherwise. X is the input (kept), H
// receives x²/2 = a², F receives Φ(x); A, P, N, R are scratch. Z31 is zero.
#define PHI512(X, H, A, P, N, R, F) \
	VMULPS X, X, H; \
	VMULPS.BCST HALF, H, H; \
	VPANDD.BCST ABSMASK, X, A; \
	VMULPS.BCST RSQRT2, A, A; \
	VMULPS.BCST HALF, A, A; \
	VADDPS.BCST ONE, A, A; \
	VBROADCASTSS ONE, F; \
	VDIVPS A, F, A; \
	VBROADCASTSS C9, P; \
	VFMADD213PS.BCST C8, A, P; \
	VFMADD213PS.BCST C7, A, P; \
	VFMADD213PS.BCST C6, A, P; \
	VFMADD213PS.BCST C5, A, P; \
	VFMADD213PS.BCST C4, A, P; \
	VFMADD213PS.BCST C3, A, P; \
	VFMADD213PS.BCST C2, A, P; \
	VFMADD213PS.BCST C1, A, P; \
	VFMADD213PS.BCST C0, A, P; \
	VSUBPS H, P, P; \
	EXP512(P, N, R, F); \
	VMULPS A, F, F; \
	VMULPS.BCST HALF, F, F; \
	VBROADCASTSS ONE, R; \
	VSUBPS F, R, R; \
	VCMPPS $1, Z31, X, K2; \
	VMOVAPS F, K2, R; \
	VMOVAPS R, F

// PHI256 is PHI512 for AVX2: T is scratch for constants, EXP256's mask
// lives in Y11, and a blend on x's sign bit picks the branch of Φ.
#define PHI256(X, H, A, P, N, R, F, T) \
	VMULPS X, X, H; \
	VBROADCASTSS HALF, T; \
	VMULPS T, H, H; \
	VBROADCASTSS ABSMASK, A; \
	VANDPS X, A, A; \
	VBROADCASTSS RSQRT2, T; \
	VMULPS T, A, A; \
	VBROADCASTSS HALF, T; \
	VBROADCASTSS ONE, F; \
	VFMADD213PS F, T, A; \
	VDIVPS A, F, A; \
	VBROADCASTSS C9, P; \
	VBROADCASTSS C8, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C7, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C6, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C5, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C4, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C3, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C2, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C1, T; \
	VFMADD213PS T, A, P; \
	VBROADCASTSS C0, T; \
	VFMADD213PS T, A, P; \
	VSUBPS H, P, P; \
	EXP256(P, N, R, F, T, Y11); \
	VMULPS A, F, F; \
	VBROADCASTSS HALF, T; \
	VMULPS T, F, F; \
	VBROADCASTSS ONE, R; \
	VSUBPS F, R, R; \
	VBLENDVPS X, F, R, F

// GELUGRAD512 computes O = G·(Φ(X) + X·φ(X)), φ(x) = e^(−x²/2)/√(2π).
#define GELUGRAD512(X, G, O) \
	PHI512(X, Z2, Z3, Z4, Z5, Z6, Z7); \
	VSUBPS Z2, Z31, Z2; \
	EXP512(Z2, Z5, Z6, Z8); \
	VMULPS.BCST RSQRT2PI, Z8, Z8; \
	VFMADD213PS Z7, X, Z8; \
	VMULPS G, Z8, O

#define GELUGRAD256(X, G, O) \
	PHI256(X, Y2, Y3, Y4, Y5, Y6, Y7, Y9); \
	VXORPS Y8, Y8, Y8; \
	VSUBPS Y2, Y8, Y2; \
	EXP256(Y2, Y5, Y6, Y8, Y9, Y11); \
	VBROADCASTSS RSQRT2PI, Y9; \
	VMULPS Y9, Y8, Y8; \
	VFMADD213PS Y7, X, Y8; \
	VMULPS G, Y8, O

// func reluAVX512(d, x []float32)
TEXT ·reluAVX512(SB), NOSPLIT, $0-48
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VPXORD Z31, Z31, Z31
	CMPQ CX, $16
	JB   tail
loop:
	VMOVUPS (SI), Z0
	VMAXPS  Z0, Z31, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK512
	VMOVUPS.Z (SI), K1, Z0
	VMAXPS    Z0, Z31, Z1
	VMOVUPS   Z1, K1, (DI)
done:
	VZEROUPPER
	RET

// func reluAVX2(d, x []float32)
TEXT ·reluAVX2(SB), NOSPLIT, $0-48
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VXORPS Y14, Y14, Y14
	CMPQ CX, $8
	JB   tail
loop:
	VMOVUPS (SI), Y0
	VMAXPS  Y0, Y14, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK256
	VMASKMOVPS (SI), Y15, Y0
	VMAXPS     Y0, Y14, Y1
	VMASKMOVPS Y1, Y15, (DI)
done:
	VZEROUPPER
	RET

// func reluGradAVX512(d, g, y []float32)
TEXT ·reluGradAVX512(SB), NOSPLIT, $0-72
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ y_base+48(FP), BX
	VPXORD Z31, Z31, Z31
	CMPQ CX, $16
	JB   tail
loop:
	VMOVUPS   (BX), Z1
	VCMPPS    $14, Z31, Z1, K2
	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $64, SI
	ADDQ      $64, BX
	ADDQ      $64, DI
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK512
	VMOVUPS.Z (BX), K1, Z1
	VCMPPS    $14, Z31, Z1, K2
	VMOVUPS.Z (SI), K2, Z0
	VMOVUPS   Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func reluGradAVX2(d, g, y []float32)
TEXT ·reluGradAVX2(SB), NOSPLIT, $0-72
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ y_base+48(FP), BX
	VXORPS Y14, Y14, Y14
	CMPQ CX, $8
	JB   tail
loop:
	VMOVUPS (BX), Y1
	VCMPPS  $14, Y14, Y1, Y2
	VANDPS  (SI), Y2, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK256
	VMASKMOVPS (BX), Y15, Y1
	VMASKMOVPS (SI), Y15, Y0
	VCMPPS     $14, Y14, Y1, Y2
	VANDPS     Y0, Y2, Y0
	VMASKMOVPS Y0, Y15, (DI)
done:
	VZEROUPPER
	RET

// func geluAVX512(d, x []float32)
TEXT ·geluAVX512(SB), NOSPLIT, $0-48
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	VPXORD Z31, Z31, Z31
	CMPQ CX, $16
	JB   tail
loop:
	VMOVUPS (SI), Z0
	PHI512(Z0, Z2, Z3, Z4, Z5, Z6, Z7)
	VMULPS  Z0, Z7, Z1
	VMOVUPS Z1, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK512
	VMOVUPS.Z (SI), K1, Z0
	PHI512(Z0, Z2, Z3, Z4, Z5, Z6, Z7)
	VMULPS  Z0, Z7, Z1
	VMOVUPS Z1, K1, (DI)
done:
	VZEROUPPER
	RET

// func geluAVX2(d, x []float32)
TEXT ·geluAVX2(SB), NOSPLIT, $0-48
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ x_base+24(FP), SI
	CMPQ CX, $8
	JB   tail
loop:
	VMOVUPS (SI), Y0
	PHI256(Y0, Y2, Y3, Y4, Y5, Y6, Y7, Y9)
	VMULPS  Y0, Y7, Y1
	VMOVUPS Y1, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK256
	VMASKMOVPS (SI), Y15, Y0
	PHI256(Y0, Y2, Y3, Y4, Y5, Y6, Y7, Y9)
	VMULPS     Y0, Y7, Y1
	VMASKMOVPS Y1, Y15, (DI)
done:
	VZEROUPPER
	RET

// func geluGradAVX512(d, g, x []float32)
TEXT ·geluGradAVX512(SB), NOSPLIT, $0-72
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ x_base+48(FP), BX
	VPXORD Z31, Z31, Z31
	CMPQ CX, $16
	JB   tail
loop:
	VMOVUPS (BX), Z0
	VMOVUPS (SI), Z1
	GELUGRAD512(Z0, Z1, Z10)
	VMOVUPS Z10, (DI)
	ADDQ    $64, SI
	ADDQ    $64, BX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK512
	VMOVUPS.Z (BX), K1, Z0
	VMOVUPS.Z (SI), K1, Z1
	GELUGRAD512(Z0, Z1, Z10)
	VMOVUPS Z10, K1, (DI)
done:
	VZEROUPPER
	RET

// func geluGradAVX2(d, g, x []float32)
TEXT ·geluGradAVX2(SB), NOSPLIT, $0-72
	MOVQ d_base+0(FP), DI
	MOVQ d_len+8(FP), CX
	MOVQ g_base+24(FP), SI
	MOVQ x_base+48(FP), BX
	CMPQ CX, $8
	JB   tail
loop:
	VMOVUPS (BX), Y0
	VMOVUPS (SI), Y1
	GELUGRAD256(Y0, Y1, Y10)
	VMOVUPS Y10, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DI
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     loop
tail:
	TESTQ CX, CX
	JZ    done
	TAILMASK256
	VMASKMOVPS (BX), Y15, Y0
	VMASKMOVPS (SI), Y15, Y1
	GELUGRAD256(Y0, Y1, Y10)
	VMASKMOVPS Y10, Y15, (DI)
done:
	VZEROUPPER
	RET

// BINARY512 and BINARY256 define func name(d, a, b []float32) computing
// d = a op b with the packed instruction op.
#define BINARY512(name, op) \
TEXT name(SB), NOSPLIT, $0-72; \
	MOVQ d_base+0(FP), DI; \
	MOVQ d_len+8(FP), CX; \
	MOVQ a_base+24(FP), SI; \
	MOVQ b_base+48(FP), BX; \
	CMPQ CX, $16; \
	JB   tail; \
loop: \
	VMOVUPS (SI), Z0; \
	op      (BX), Z0, Z1; \
	VMOVUPS Z1, (DI); \
	ADDQ    $64, SI; \
	ADDQ    $64, BX; \
	ADDQ    $64, DI; \
	SUBQ    $16, CX; \
	CMPQ    CX, $16; \
	JAE     loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK512; \
	VMOVUPS.Z (SI), K1, Z0; \
	VMOVUPS.Z (BX), K1, Z2; \
	op        Z2, Z0, Z1; \
	VMOVUPS   Z1, K1, (DI); \
done: \
	VZEROUPPER; \
	RET

#define BINARY256(name, op) \
TEXT name(SB), NOSPLIT, $0-72; \
	MOVQ d_base+0(FP), DI; \
	MOVQ d_len+8(FP), CX; \
	MOVQ a_base+24(FP), SI; \
	MOVQ b_base+48(FP), BX; \
	CMPQ CX, $8; \
	JB   tail; \
loop: \
	VMOVUPS (SI), Y0; \
	op      (BX), Y0, Y1; \
	VMOVUPS Y1, (DI); \
	ADDQ    $32, SI; \
	ADDQ    $32, BX; \
	ADDQ    $32, DI; \
	SUBQ    $8, CX; \
	CMPQ    CX, $8; \
	JAE     loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK256; \
	VMASKMOVPS (SI), Y15, Y0; \
	VMASKMOVPS (BX), Y15, Y2; \
	op         Y2, Y0, Y1; \
	VMASKMOVPS Y1, Y15, (DI); \
done: \
	VZEROUPPER; \
	RET

BINARY512(·addAVX512, VADDPS)
BINARY512(·subAVX512, VSUBPS)
BINARY512(·mulAVX512, VMULPS)
BINARY512(·divAVX512, VDIVPS)
BINARY256(·addAVX2, VADDPS)
BINARY256(·subAVX2, VSUBPS)
BINARY256(·mulAVX2, VMULPS)
BINARY256(·divAVX2, VDIVPS)

// SCALAR512 and SCALAR256 define func name(d, x []float32, s float32)
// computing d = x op s.
#define SCALAR512(name, op) \
TEXT name(SB), NOSPLIT, $0-52; \
	MOVQ d_base+0(FP), DI; \
	MOVQ d_len+8(FP), CX; \
	MOVQ x_base+24(FP), SI; \
	VBROADCASTSS s+48(FP), Z2; \
	CMPQ CX, $16; \
	JB   tail; \
loop: \
	VMOVUPS (SI), Z0; \
	op      Z2, Z0, Z1; \
	VMOVUPS Z1, (DI); \
	ADDQ    $64, SI; \
	ADDQ    $64, DI; \
	SUBQ    $16, CX; \
	CMPQ    CX, $16; \
	JAE     loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK512; \
	VMOVUPS.Z (SI), K1, Z0; \
	op        Z2, Z0, Z1; \
	VMOVUPS   Z1, K1, (DI); \
done: \
	VZEROUPPER; \
	RET

#define SCALAR256(name, op) \
TEXT name(SB), NOSPLIT, $0-52; \
	MOVQ d_base+0(FP), DI; \
	MOVQ d_len+8(FP), CX; \
	MOVQ x_base+24(FP), SI; \
	VBROADCASTSS s+48(FP), Y2; \
	CMPQ CX, $8; \
	JB   tail; \
loop: \
	VMOVUPS (SI), Y0; \
	op      Y2, Y0, Y1; \
	VMOVUPS Y1, (DI); \
	ADDQ    $32, SI; \
	ADDQ    $32, DI; \
	SUBQ    $8, CX; \
	CMPQ    CX, $8; \
	JAE     loop; \
tail: \
	TESTQ CX, CX; \
	JZ    done; \
	TAILMASK256; \
	VMASKMOVPS (SI), Y15, Y0; \
	op         Y2, Y0, Y1; \
	VMASKMOVPS Y1, Y15, (DI); \
done: \
	VZEROUPPER; \
	RET

SCALAR512(·addScalarAVX512, VADDPS)
SCALAR512(·mulScalarAVX512, VMULPS)
SCALAR256(·addScalarAVX2, VADDPS)
SCALAR256(·mulScalarAVX2, VMULPS)
