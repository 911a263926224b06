// Shared by the vector loops of package cpu: float32 constants, lane masks
// for tails, horizontal sums and e^x.

// Constants, one float32 each (bit patterns).
DATA vecConst<>+0(SB)/4, $0x3f000000  // 0.5
DATA vecConst<>+4(SB)/4, $0x3f800000  // 1
DATA vecConst<>+8(SB)/4, $0x3f3504f3  // 1/√2
DATA vecConst<>+12(SB)/4, $0x3fb8aa3b // log₂e
DATA vecConst<>+16(SB)/4, $0x3f318000 // ln 2, high part (0.693359375)
DATA vecConst<>+20(SB)/4, $0xb95e8083 // ln 2, low part (−2.12194440e−4)
DATA vecConst<>+24(SB)/4, $0xc2ac0000 // −86, the least argument of exp
DATA vecConst<>+28(SB)/4, $0x3ecc422a // 1/√(2π)
DATA vecConst<>+32(SB)/4, $0xbfa1fc4e // erfc: −1.26551223
DATA vecConst<>+36(SB)/4, $0x3f8000c7 // 1.00002368
DATA vecConst<>+40(SB)/4, $0x3ebf88fb // 0.37409196
DATA vecConst<>+44(SB)/4, $0x3dc636c9 // 0.09678418
DATA vecConst<>+48(SB)/4, $0xbe3ec24c // −0.18628806
DATA vecConst<>+52(SB)/4, $0x3e8ec7cc // 0.27886807
DATA vecConst<>+56(SB)/4, $0xbf914e5d // −1.13520398
DATA vecConst<>+60(SB)/4, $0x3fbe87b0 // 1.48851587
DATA vecConst<>+64(SB)/4, $0xbf527892 // −0.82215223
DATA vecConst<>+68(SB)/4, $0x3e2ef945 // 0.17087277
DATA vecConst<>+72(SB)/4, $0x3f000000 // exp: 5.0000001201e−1
DATA vecConst<>+76(SB)/4, $0x3e2aaaaa // 1.6666665459e−1
DATA vecConst<>+80(SB)/4, $0x3d2aa9c1 // 4.1665795894e−2
DATA vecConst<>+84(SB)/4, $0x3c088908 // 8.3334519073e−3
DATA vecConst<>+88(SB)/4, $0x3ab743ce // 1.3981999507e−3
DATA vecConst<>+92(SB)/4, $0x39506967 // 1.9875691500e−4
DATA vecConst<>+96(SB)/4, $0x7fffffff // mask of all but the sign bit
DATA vecConst<>+100(SB)/4, $0xff800000 // −∞
GLOBL vecConst<>(SB), RODATA|NOPTR, $104

#define HALF vecConst<>+0(SB)
#define ONE vecConst<>+4(SB)
#define RSQRT2 vecConst<>+8(SB)
#define LOG2E vecConst<>+12(SB)
#define LN2HI vecConst<>+16(SB)
#define LN2LO vecConst<>+20(SB)
#define EXPLO vecConst<>+24(SB)
#define RSQRT2PI vecConst<>+28(SB)
#define C0 vecConst<>+32(SB)
#define C1 vecConst<>+36(SB)
#define C2 vecConst<>+40(SB)
#define C3 vecConst<>+44(SB)
#define C4 vecConst<>+48(SB)
#define C5 vecConst<>+52(SB)
#define C6 vecConst<>+56(SB)
#define C7 vecConst<>+60(SB)
#define C8 vecConst<>+64(SB)
#define C9 vecConst<>+68(SB)
#define E0 vecConst<>+72(SB)
#define E1 vecConst<>+76(SB)
#define E2 vecConst<>+80(SB)
#define E3 vecConst<>+84(SB)
#define E4 vecConst<>+88(SB)
#define E5 vecConst<>+92(SB)
#define ABSMASK vecConst<>+96(SB)
#define NEGINF vecConst<>+100(SB)

// Lane masks for AVX2 tails: the 32 bytes at tailMask<>+32−4r enable the
// first r lanes.
DATA tailMask<>+0(SB)/8, $-1
DATA tailMask<>+8(SB)/8, $-1
DATA tailMask<>+16(SB)/8, $-1
DATA tailMask<>+24(SB)/8, $-1
DATA tailMask<>+32(SB)/8, $0
DATA tailMask<>+40(SB)/8, $0
DATA tailMask<>+48(SB)/8, $0
DATA tailMask<>+56(SB)/8, $0
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// TAILMASK512 sets K1 to enable the first CX (< 16) lanes.
#define TAILMASK512 \
	MOVL $1, AX; \
	SHLL CX, AX; \
	DECL AX; \
	KMOVW AX, K1

// TAILMASK256 sets Y15 to enable the first CX (< 8) lanes.
#define TAILMASK256 \
	LEAQ tailMask<>+32(SB), AX; \
	MOVQ CX, DX; \
	SHLQ $2, DX; \
	SUBQ DX, AX; \
	VMOVDQU (AX), Y15

// e^u for float32, after Cephes's expf: n = round(u·log₂e),
// r = u − n·ln 2 (in two parts), e^r by a degree-7 polynomial, times 2ⁿ;
// relative error about 1 ulp. Below u = −86 the result is 0 (values under
// 2⁻¹²⁴ are not needed here). U is overwritten (it becomes r); N and R are
// scratch; P receives e^u.
#define EXP512(U, N, R, P) \
	VCMPPS.BCST $13, EXPLO, U, K3; \
	VMAXPS.BCST EXPLO, U, U; \
	VMULPS.BCST LOG2E, U, N; \
	VRNDSCALEPS $0, N, N; \
	VFNMADD231PS.BCST LN2HI, N, U; \
	VFNMADD231PS.BCST LN2LO, N, U; \
	VBROADCASTSS E5, P; \
	VFMADD213PS.BCST E4, U, P; \
	VFMADD213PS.BCST E3, U, P; \
	VFMADD213PS.BCST E2, U, P; \
	VFMADD213PS.BCST E1, U, P; \
	VFMADD213PS.BCST E0, U, P; \
	VMULPS U, U, R; \
	VFMADD213PS U, R, P; \
	VADDPS.BCST ONE, P, P; \
	VSCALEFPS N, P, P; \
	VMOVAPS.Z P, K3, P

// EXP256 is EXP512 for AVX2: constants come through the scratch register
// T, 2ⁿ is added to the exponent field, and M receives the mask of the
// arguments at or above −86.
#define EXP256(U, N, R, P, T, M) \
	VBROADCASTSS EXPLO, T; \
	VCMPPS $13, T, U, M; \
	VMAXPS T, U, U; \
	VBROADCASTSS LOG2E, T; \
	VMULPS T, U, N; \
	VROUNDPS $0, N, N; \
	VBROADCASTSS LN2HI, T; \
	VFNMADD231PS T, N, U; \
	VBROADCASTSS LN2LO, T; \
	VFNMADD231PS T, N, U; \
	VBROADCASTSS E5, P; \
	VBROADCASTSS E4, T; \
	VFMADD213PS T, U, P; \
	VBROADCASTSS E3, T; \
	VFMADD213PS T, U, P; \
	VBROADCASTSS E2, T; \
	VFMADD213PS T, U, P; \
	VBROADCASTSS E1, T; \
	VFMADD213PS T, U, P; \
	VBROADCASTSS E0, T; \
	VFMADD213PS T, U, P; \
	VMULPS U, U, R; \
	VFMADD213PS U, R, P; \
	VBROADCASTSS ONE, T; \
	VADDPS T, P, P; \
	VCVTPS2DQ N, N; \
	VPSLLD $23, N, N; \
	VPADDD N, P, P; \
	VANDPS M, P, P


// HSUM512 adds the eight float64 lanes of Z0 into X0, in a fixed order.
#define HSUM512 \
	VEXTRACTF64X4 $1, Z0, Y1; \
	VADDPD        Y1, Y0, Y0; \
	VEXTRACTF128  $1, Y0, X1; \
	VADDPD        X1, X0, X0; \
	VUNPCKHPD     X0, X0, X1; \
	VADDSD        X1, X0, X0

// HSUM256 adds the four float64 lanes of Y0 into X0.
#define HSUM256 \
	VEXTRACTF128 $1, Y0, X1; \
	VADDPD       X1, X0, X0; \
	VUNPCKHPD    X0, X0, X1; \
	VADDSD       X1, X0, X0

