//go:build !purego

#include "textflag.h"
#include "vecmath_amd64.h"

// Vector loops of batch normalisation (norm_amd64.go declares them): float32
// data, float64 arithmetic. Each handles the first n − n mod 8 (AVX-512) or
// n − n mod 4 (AVX2) elements; the caller does the rest. Sums keep four
// vector accumulators, added together in a fixed order at the end.

// func sumF32AVX512(x []float32) float64
TEXT ·sumF32AVX512(SB), NOSPLIT, $0-32
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), CX
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	CMPQ   CX, $32
	JB     one
four:
	VCVTPS2PD (SI), Z4
	VCVTPS2PD 32(SI), Z5
	VCVTPS2PD 64(SI), Z6
	VCVTPS2PD 96(SI), Z7
	VADDPD    Z4, Z0, Z0
	VADDPD    Z5, Z1, Z1
	VADDPD    Z6, Z2, Z2
	VADDPD    Z7, Z3, Z3
	ADDQ      $128, SI
	SUBQ      $32, CX
	CMPQ      CX, $32
	JAE       four
one:
	CMPQ      CX, $8
	JB        done
	VCVTPS2PD (SI), Z4
	VADDPD    Z4, Z0, Z0
	ADDQ      $32, SI
	SUBQ      $8, CX
	JMP       one
done:
	VADDPD Z1, Z0, Z0
	VADDPD Z3, Z2, Z2
	VADDPD Z2, Z0, Z0
	HSUM512
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func sumF32AVX2(x []float32) float64
TEXT ·sumF32AVX2(SB), NOSPLIT, $0-32
	MOVQ   x_base+0(FP), SI
	MOVQ   x_len+8(FP), CX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	CMPQ   CX, $16
	JB     one
four:
	VCVTPS2PD (SI), Y4
	VCVTPS2PD 16(SI), Y5
	VCVTPS2PD 32(SI), Y6
	VCVTPS2PD 48(SI), Y7
	VADDPD    Y4, Y0, Y0
	VADDPD    Y5, Y1, Y1
	VADDPD    Y6, Y2, Y2
	VADDPD    Y7, Y3, Y3
	ADDQ      $64, SI
	SUBQ      $16, CX
	CMPQ      CX, $16
	JAE       four
one:
	CMPQ      CX, $4
	JB        done
	VCVTPS2PD (SI), Y4
	VADDPD    Y4, Y0, Y0
	ADDQ      $16, SI
	SUBQ      $4, CX
	JMP       one
done:
	VADDPD Y1, Y0, Y0
	VADDPD Y3, Y2, Y2
	VADDPD Y2, Y0, Y0
	HSUM256
	VMOVSD X0, ret+24(FP)
	VZEROUPPER
	RET

// func sumSqDevF32AVX512(x []float32, mean float64) float64
TEXT ·sumSqDevF32AVX512(SB), NOSPLIT, $0-40
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	VBROADCASTSD mean+24(FP), Z8
	VXORPD       Z0, Z0, Z0
	VXORPD       Z1, Z1, Z1
	VXORPD       Z2, Z2, Z2
	VXORPD       Z3, Z3, Z3
	CMPQ         CX, $32
	JB           one
four:
	VCVTPS2PD   (SI), Z4
	VCVTPS2PD   32(SI), Z5
	VCVTPS2PD   64(SI), Z6
	VCVTPS2PD   96(SI), Z7
	VSUBPD      Z8, Z4, Z4
	VSUBPD      Z8, Z5, Z5
	VSUBPD      Z8, Z6, Z6
	VSUBPD      Z8, Z7, Z7
	VFMADD231PD Z4, Z4, Z0
	VFMADD231PD Z5, Z5, Z1
	VFMADD231PD Z6, Z6, Z2
	VFMADD231PD Z7, Z7, Z3
	ADDQ        $128, SI
	SUBQ        $32, CX
	CMPQ        CX, $32
	JAE         four
one:
	CMPQ        CX, $8
	JB          done
	VCVTPS2PD   (SI), Z4
	VSUBPD      Z8, Z4, Z4
	VFMADD231PD Z4, Z4, Z0
	ADDQ        $32, SI
	SUBQ        $8, CX
	JMP         one
done:
	VADDPD Z1, Z0, Z0
	VADDPD Z3, Z2, Z2
	VADDPD Z2, Z0, Z0
	HSUM512
	VMOVSD X0, ret+32(FP)
	VZEROUPPER
	RET

// func sumSqDevF32AVX2(x []float32, mean float64) float64
TEXT ·sumSqDevF32AVX2(SB), NOSPLIT, $0-40
	MOVQ         x_base+0(FP), SI
	MOVQ         x_len+8(FP), CX
	VBROADCASTSD mean+24(FP), Y8
	VXORPD       Y0, Y0, Y0
	VXORPD       Y1, Y1, Y1
	VXORPD       Y2, Y2, Y2
	VXORPD       Y3, Y3, Y3
	CMPQ         CX, $16
	JB           one
four:
	VCVTPS2PD   (SI), Y4
	VCVTPS2PD   16(SI), Y5
	VCVTPS2PD   32(SI), Y6
	VCVTPS2PD   48(SI), Y7
	VSUBPD      Y8, Y4, Y4
	VSUBPD      Y8, Y5, Y5
	VSUBPD      Y8, Y6, Y6
	VSUBPD      Y8, Y7, Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ        $64, SI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JAE         four
one:
	CMPQ        CX, $4
	JB          done
	VCVTPS2PD   (SI), Y4
	VSUBPD      Y8, Y4, Y4
	VFMADD231PD Y4, Y4, Y0
	ADDQ        $16, SI
	SUBQ        $4, CX
	JMP         one
done:
	VADDPD Y1, Y0, Y0
	VADDPD Y3, Y2, Y2
	VADDPD Y2, Y0, Y0
	HSUM256
	VMOVSD X0, ret+32(FP)
	VZEROUPPER
	RET

// func gradSumsF32AVX512(dy, x []float32, mean float64) (sdy, sdyx float64)
// sdy = Σ dy, sdyx = Σ dy·(x − mean).
TEXT ·gradSumsF32AVX512(SB), NOSPLIT, $0-72
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         x_base+24(FP), BX
	VBROADCASTSD mean+48(FP), Z8
	VXORPD       Z0, Z0, Z0
	VXORPD       Z1, Z1, Z1
	VXORPD       Z2, Z2, Z2
	VXORPD       Z3, Z3, Z3
	CMPQ         CX, $16
	JB           one
two:
	VCVTPS2PD   (SI), Z4
	VCVTPS2PD   32(SI), Z5
	VCVTPS2PD   (BX), Z6
	VCVTPS2PD   32(BX), Z7
	VSUBPD      Z8, Z6, Z6
	VSUBPD      Z8, Z7, Z7
	VADDPD      Z4, Z0, Z0
	VADDPD      Z5, Z1, Z1
	VFMADD231PD Z6, Z4, Z2
	VFMADD231PD Z7, Z5, Z3
	ADDQ        $64, SI
	ADDQ        $64, BX
	SUBQ        $16, CX
	CMPQ        CX, $16
	JAE         two
one:
	CMPQ        CX, $8
	JB          done
	VCVTPS2PD   (SI), Z4
	VCVTPS2PD   (BX), Z6
	VSUBPD      Z8, Z6, Z6
	VADDPD      Z4, Z0, Z0
	VFMADD231PD Z6, Z4, Z2
	ADDQ        $32, SI
	ADDQ        $32, BX
	SUBQ        $8, CX
	JMP         one
done:
	VADDPD  Z1, Z0, Z0
	VADDPD  Z3, Z2, Z2
	VMOVAPD Z2, Z9
	HSUM512
	VMOVSD  X0, sdy+56(FP)
	VMOVAPD Z9, Z0
	HSUM512
	VMOVSD  X0, sdyx+64(FP)
	VZEROUPPER
	RET

// func gradSumsF32AVX2(dy, x []float32, mean float64) (sdy, sdyx float64)
TEXT ·gradSumsF32AVX2(SB), NOSPLIT, $0-72
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         x_base+24(FP), BX
	VBROADCASTSD mean+48(FP), Y8
	VXORPD       Y0, Y0, Y0
	VXORPD       Y1, Y1, Y1
	VXORPD       Y2, Y2, Y2
	VXORPD       Y3, Y3, Y3
	CMPQ         CX, $8
	JB           one
two:
	VCVTPS2PD   (SI), Y4
	VCVTPS2PD   16(SI), Y5
	VCVTPS2PD   (BX), Y6
	VCVTPS2PD   16(BX), Y7
	VSUBPD      Y8, Y6, Y6
	VSUBPD      Y8, Y7, Y7
	VADDPD      Y4, Y0, Y0
	VADDPD      Y5, Y1, Y1
	VFMADD231PD Y6, Y4, Y2
	VFMADD231PD Y7, Y5, Y3
	ADDQ        $32, SI
	ADDQ        $32, BX
	SUBQ        $8, CX
	CMPQ        CX, $8
	JAE         two
one:
	CMPQ        CX, $4
	JB          done
	VCVTPS2PD   (SI), Y4
	VCVTPS2PD   (BX), Y6
	VSUBPD      Y8, Y6, Y6
	VADDPD      Y4, Y0, Y0
	VFMADD231PD Y6, Y4, Y2
	ADDQ        $16, SI
	ADDQ        $16, BX
	SUBQ        $4, CX
	JMP         one
done:
	VADDPD  Y1, Y0, Y0
	VADDPD  Y3, Y2, Y2
	VMOVAPD Y2, Y9
	HSUM256
	VMOVSD  X0, sdy+56(FP)
	VMOVAPD Y9, Y0
	HSUM256
	VMOVSD  X0, sdyx+64(FP)
	VZEROUPPER
	RET

// func affineF32AVX512(y, x []float32, scale, shift float64)
// y = x·scale + shift.
TEXT ·affineF32AVX512(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSD scale+48(FP), Z8
	VBROADCASTSD shift+56(FP), Z9
	CMPQ         CX, $16
	JB           one
two:
	VCVTPS2PD   (SI), Z0
	VCVTPS2PD   32(SI), Z1
	VFMADD213PD Z9, Z8, Z0
	VFMADD213PD Z9, Z8, Z1
	VCVTPD2PS   Z0, Y0
	VCVTPD2PS   Z1, Y1
	VMOVUPS     Y0, (DI)
	VMOVUPS     Y1, 32(DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	SUBQ        $16, CX
	CMPQ        CX, $16
	JAE         two
one:
	CMPQ        CX, $8
	JB          done
	VCVTPS2PD   (SI), Z0
	VFMADD213PD Z9, Z8, Z0
	VCVTPD2PS   Z0, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	JMP         one
done:
	VZEROUPPER
	RET

// func affineF32AVX2(y, x []float32, scale, shift float64)
TEXT ·affineF32AVX2(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSD scale+48(FP), Y8
	VBROADCASTSD shift+56(FP), Y9
	CMPQ         CX, $8
	JB           one
two:
	VCVTPS2PD   (SI), Y0
	VCVTPS2PD   16(SI), Y1
	VFMADD213PD Y9, Y8, Y0
	VFMADD213PD Y9, Y8, Y1
	VCVTPD2PSY  Y0, X0
	VCVTPD2PSY  Y1, X1
	VMOVUPS     X0, (DI)
	VMOVUPS     X1, 16(DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	SUBQ        $8, CX
	CMPQ        CX, $8
	JAE         two
one:
	CMPQ        CX, $4
	JB          done
	VCVTPS2PD   (SI), Y0
	VFMADD213PD Y9, Y8, Y0
	VCVTPD2PSY  Y0, X0
	VMOVUPS     X0, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	SUBQ        $4, CX
	JMP         one
done:
	VZEROUPPER
	RET

// func gradDxF32AVX512(dx, dy, x []float32, scale, a, b, mean float64)
// dx = scale·dy − a − b·(x − mean).
TEXT ·gradDxF32AVX512(SB), NOSPLIT, $0-104
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         dy_base+24(FP), SI
	MOVQ         x_base+48(FP), BX
	VBROADCASTSD scale+72(FP), Z8
	VBROADCASTSD a+80(FP), Z9
	VBROADCASTSD b+88(FP), Z10
	VBROADCASTSD mean+96(FP), Z11
	CMPQ         CX, $8
	JB           done
one:
	VCVTPS2PD    (SI), Z0
	VCVTPS2PD    (BX), Z1
	VSUBPD       Z11, Z1, Z1
	VFMSUB213PD  Z9, Z8, Z0
	VFNMADD231PD Z10, Z1, Z0
	VCVTPD2PS    Z0, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, SI
	ADDQ         $32, BX
	ADDQ         $32, DI
	SUBQ         $8, CX
	CMPQ         CX, $8
	JAE          one
done:
	VZEROUPPER
	RET

// func gradDxF32AVX2(dx, dy, x []float32, scale, a, b, mean float64)
TEXT ·gradDxF32AVX2(SB), NOSPLIT, $0-104
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         dy_base+24(FP), SI
	MOVQ         x_base+48(FP), BX
	VBROADCASTSD scale+72(FP), Y8
	VBROADCASTSD a+80(FP), Y9
	VBROADCASTSD b+88(FP), Y10
	VBROADCASTSD mean+96(FP), Y11
	CMPQ         CX, $4
	JB           done
one:
	VCVTPS2PD    (SI), Y0
	VCVTPS2PD    (BX), Y1
	VSUBPD       Y11, Y1, Y1
	VFMSUB213PD  Y9, Y8, Y0
	VFNMADD231PD Y10, Y1, Y0
	VCVTPD2PSY   Y0, X0
	VMOVUPS      X0, (DI)
	ADDQ         $16, SI
	ADDQ         $16, BX
	ADDQ         $16, DI
	SUBQ         $4, CX
	CMPQ         CX, $4
	JAE          one
done:
	VZEROUPPER
	RET

// func affineReLUF32AVX512(y, x []float32, scale, shift float64)
// y = max(x·scale + shift, 0), NaN kept.
TEXT ·affineReLUF32AVX512(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSD scale+48(FP), Z8
	VBROADCASTSD shift+56(FP), Z9
	VXORPD       Z10, Z10, Z10
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD   (SI), Z0
	VFMADD213PD Z9, Z8, Z0
	VMAXPD      Z0, Z10, Z0
	VCVTPD2PS   Z0, Y0
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         loop
done:
	VZEROUPPER
	RET

// func affineReLUF32AVX2(y, x []float32, scale, shift float64)
TEXT ·affineReLUF32AVX2(SB), NOSPLIT, $0-64
	MOVQ         y_base+0(FP), DI
	MOVQ         y_len+8(FP), CX
	MOVQ         x_base+24(FP), SI
	VBROADCASTSD scale+48(FP), Y8
	VBROADCASTSD shift+56(FP), Y9
	VXORPD       Y10, Y10, Y10
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD   (SI), Y0
	VFMADD213PD Y9, Y8, Y0
	VMAXPD      Y0, Y10, Y0
	VCVTPD2PSY  Y0, X0
	VMOVUPS     X0, (DI)
	ADDQ        $16, SI
	ADDQ        $16, DI
	DECQ        CX
	JNZ         loop
done:
	VZEROUPPER
	RET

// func gradSumsMaskedF32AVX512(dy, y, x []float32, mean float64) (sdy, sdyx float64)
// gradSumsF32AVX512 of g = y > 0 ? dy : 0.
TEXT ·gradSumsMaskedF32AVX512(SB), NOSPLIT, $0-96
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         y_base+24(FP), DX
	MOVQ         x_base+48(FP), BX
	VBROADCASTSD mean+72(FP), Z8
	VXORPD       Z0, Z0, Z0
	VXORPD       Z2, Z2, Z2
	VXORPD       Z10, Z10, Z10
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD   (DX), Z5
	VCMPPD      $14, Z10, Z5, K2
	VCVTPS2PD.Z (SI), K2, Z4
	VCVTPS2PD   (BX), Z6
	VSUBPD      Z8, Z6, Z6
	VADDPD      Z4, Z0, Z0
	VFMADD231PD Z6, Z4, Z2
	ADDQ        $32, SI
	ADDQ        $32, DX
	ADDQ        $32, BX
	DECQ        CX
	JNZ         loop
done:
	VMOVAPD Z2, Z9
	HSUM512
	VMOVSD  X0, sdy+80(FP)
	VMOVAPD Z9, Z0
	HSUM512
	VMOVSD  X0, sdyx+88(FP)
	VZEROUPPER
	RET

// func gradSumsMaskedF32AVX2(dy, y, x []float32, mean float64) (sdy, sdyx float64)
TEXT ·gradSumsMaskedF32AVX2(SB), NOSPLIT, $0-96
	MOVQ         dy_base+0(FP), SI
	MOVQ         dy_len+8(FP), CX
	MOVQ         y_base+24(FP), DX
	MOVQ         x_base+48(FP), BX
	VBROADCASTSD mean+72(FP), Y8
	VXORPD       Y0, Y0, Y0
	VXORPD       Y2, Y2, Y2
	VXORPD       Y10, Y10, Y10
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD   (DX), Y5
	VCMPPD      $14, Y10, Y5, Y5
	VCVTPS2PD   (SI), Y4
	VANDPD      Y5, Y4, Y4
	VCVTPS2PD   (BX), Y6
	VSUBPD      Y8, Y6, Y6
	VADDPD      Y4, Y0, Y0
	VFMADD231PD Y6, Y4, Y2
	ADDQ        $16, SI
	ADDQ        $16, DX
	ADDQ        $16, BX
	DECQ        CX
	JNZ         loop
done:
	VMOVAPD Y2, Y9
	HSUM256
	VMOVSD  X0, sdy+80(FP)
	VMOVAPD Y9, Y0
	HSUM256
	VMOVSD  X0, sdyx+88(FP)
	VZEROUPPER
	RET

// func gradDxMaskedF32AVX512(dx, dy, y, x []float32, scale, a, b, mean float64)
// gradDxF32AVX512 of g = y > 0 ? dy : 0.
TEXT ·gradDxMaskedF32AVX512(SB), NOSPLIT, $0-128
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         dy_base+24(FP), SI
	MOVQ         y_base+48(FP), DX
	MOVQ         x_base+72(FP), BX
	VBROADCASTSD scale+96(FP), Z8
	VBROADCASTSD a+104(FP), Z9
	VBROADCASTSD b+112(FP), Z10
	VBROADCASTSD mean+120(FP), Z11
	VXORPD       Z12, Z12, Z12
	SHRQ         $3, CX
	JZ           done
loop:
	VCVTPS2PD    (DX), Z2
	VCMPPD       $14, Z12, Z2, K2
	VCVTPS2PD.Z  (SI), K2, Z0
	VCVTPS2PD    (BX), Z1
	VSUBPD       Z11, Z1, Z1
	VFMSUB213PD  Z9, Z8, Z0
	VFNMADD231PD Z10, Z1, Z0
	VCVTPD2PS    Z0, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, SI
	ADDQ         $32, DX
	ADDQ         $32, BX
	ADDQ         $32, DI
	DECQ         CX
	JNZ          loop
done:
	VZEROUPPER
	RET

// func gradDxMaskedF32AVX2(dx, dy, y, x []float32, scale, a, b, mean float64)
TEXT ·gradDxMaskedF32AVX2(SB), NOSPLIT, $0-128
	MOVQ         dx_base+0(FP), DI
	MOVQ         dx_len+8(FP), CX
	MOVQ         dy_base+24(FP), SI
	MOVQ         y_base+48(FP), DX
	MOVQ         x_base+72(FP), BX
	VBROADCASTSD scale+96(FP), Y8
	VBROADCASTSD a+104(FP), Y9
	VBROADCASTSD b+112(FP), Y10
	VBROADCASTSD mean+120(FP), Y11
	VXORPD       Y12, Y12, Y12
	SHRQ         $2, CX
	JZ           done
loop:
	VCVTPS2PD    (DX), Y2
	VCMPPD       $14, Y12, Y2, Y2
	VCVTPS2PD    (SI), Y0
	VANDPD       Y2, Y0, Y0
	VCVTPS2PD    (BX), Y1
	VSUBPD       Y11, Y1, Y1
	VFMSUB213PD  Y9, Y8, Y0
	VFNMADD231PD Y10, Y1, Y0
	VCVTPD2PSY   Y0, X0
	VMOVUPS      X0, (DI)
	ADDQ         $16, SI
	ADDQ         $16, DX
	ADDQ         $16, BX
	ADDQ         $16, DI
	DECQ         CX
	JNZ          loop
done:
	VZEROUPPER
	RET
