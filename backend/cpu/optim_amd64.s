//go:build !purego

#include "textflag.h"

// func sgdMomentumAVX512(w, g, b []float32, lr, wd, mu, damp float64, nesterov bool)
//
// One SGD step with momentum over the first len(w) − len(w) mod 8
// parameters, after the first step (optim.go's sgdStep), in float64:
// d = g + wd·w; b = mu·b + damp·d; d = d + mu·b (Nesterov) or b;
// w = w − lr·d.
TEXT ·sgdMomentumAVX512(SB), NOSPLIT, $0-105
	MOVQ         w_base+0(FP), DI
	MOVQ         w_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         b_base+48(FP), BX
	VBROADCASTSD lr+72(FP), Z8
	VBROADCASTSD wd+80(FP), Z9
	VBROADCASTSD mu+88(FP), Z10
	VBROADCASTSD damp+96(FP), Z11
	MOVBLZX      nesterov+104(FP), AX
	SHRQ         $3, CX
	JZ           done
	TESTQ        AX, AX
	JNZ          nloop
loop:
	VCVTPS2PD    (DI), Z0
	VCVTPS2PD    (SI), Z1
	VCVTPS2PD    (BX), Z2
	VFMADD231PD  Z9, Z0, Z1
	VMULPD       Z10, Z2, Z2
	VFMADD231PD  Z11, Z1, Z2
	VFNMADD231PD Z8, Z2, Z0
	VCVTPD2PS    Z2, Y2
	VCVTPD2PS    Z0, Y0
	VMOVUPS      Y2, (BX)
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         CX
	JNZ          loop
	JMP          done
nloop:
	VCVTPS2PD    (DI), Z0
	VCVTPS2PD    (SI), Z1
	VCVTPS2PD    (BX), Z2
	VFMADD231PD  Z9, Z0, Z1
	VMULPD       Z10, Z2, Z2
	VFMADD231PD  Z11, Z1, Z2
	VFMADD231PD  Z10, Z2, Z1
	VFNMADD231PD Z8, Z1, Z0
	VCVTPD2PS    Z2, Y2
	VCVTPD2PS    Z0, Y0
	VMOVUPS      Y2, (BX)
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	ADDQ         $32, BX
	DECQ         CX
	JNZ          nloop
done:
	VZEROUPPER
	RET

// func sgdMomentumAVX2(w, g, b []float32, lr, wd, mu, damp float64, nesterov bool)
//
// sgdMomentumAVX512 over the first len(w) − len(w) mod 4 parameters.
TEXT ·sgdMomentumAVX2(SB), NOSPLIT, $0-105
	MOVQ         w_base+0(FP), DI
	MOVQ         w_len+8(FP), CX
	MOVQ         g_base+24(FP), SI
	MOVQ         b_base+48(FP), BX
	VBROADCASTSD lr+72(FP), Y8
	VBROADCASTSD wd+80(FP), Y9
	VBROADCASTSD mu+88(FP), Y10
	VBROADCASTSD damp+96(FP), Y11
	MOVBLZX      nesterov+104(FP), AX
	SHRQ         $2, CX
	JZ           done
	TESTQ        AX, AX
	JNZ          nloop
loop:
	VCVTPS2PD    (DI), Y0
	VCVTPS2PD    (SI), Y1
	VCVTPS2PD    (BX), Y2
	VFMADD231PD  Y9, Y0, Y1
	VMULPD       Y10, Y2, Y2
	VFMADD231PD  Y11, Y1, Y2
	VFNMADD231PD Y8, Y2, Y0
	VCVTPD2PSY   Y2, X2
	VCVTPD2PSY   Y0, X0
	VMOVUPS      X2, (BX)
	VMOVUPS      X0, (DI)
	ADDQ         $16, DI
	ADDQ         $16, SI
	ADDQ         $16, BX
	DECQ         CX
	JNZ          loop
	JMP          done
nloop:
	VCVTPS2PD    (DI), Y0
	VCVTPS2PD    (SI), Y1
	VCVTPS2PD    (BX), Y2
	VFMADD231PD  Y9, Y0, Y1
	VMULPD       Y10, Y2, Y2
	VFMADD231PD  Y11, Y1, Y2
	VFMADD231PD  Y10, Y2, Y1
	VFNMADD231PD Y8, Y1, Y0
	VCVTPD2PSY   Y2, X2
	VCVTPD2PSY   Y0, X0
	VMOVUPS      X2, (BX)
	VMOVUPS      X0, (DI)
	ADDQ         $16, DI
	ADDQ         $16, SI
	ADDQ         $16, BX
	DECQ         CX
	JNZ          nloop
done:
	VZEROUPPER
	RET
