package jpeg

// Inverse DCTs of libjpeg (IJG 6b, kept by libjpeg-turbo): the accurate
// integer 8×8 transform of jidctint.c (Loeffler, Ligtenberg and Moschytz,
// 13-bit constants, 2 extra bits between the passes) and the reduced-size
// transforms of jidctred.c, which compute a 4×4, 2×2 or 1×1 output
// directly from the coefficients (the 4×4 ignores row and column 4, the 2×2
// uses rows and columns 0, 1, 3, 5 and 7, the 1×1 the DC term). Integer
// arithmetic and rounding follow the C code, so that outputs match
// libjpeg-turbo's. (Out-of-range results are clamped where libjpeg wraps
// them through its range-limit table; only corrupt data gets there.)
//
// Blocks arrive dequantized, in natural (row-major) order.

const (
	constBits = 13
	pass1Bits = 2

	fix0_211164243 = 1730
	fix0_298631336 = 2446
	fix0_390180644 = 3196
	fix0_509795579 = 4176
	fix0_541196100 = 4433
	fix0_601344887 = 4926
	fix0_720959822 = 5906
	fix0_765366865 = 6270
	fix0_850430095 = 6967
	fix0_899976223 = 7373
	fix1_061594337 = 8697
	fix1_175875602 = 9633
	fix1_272758580 = 10426
	fix1_451774981 = 11893
	fix1_501321110 = 12299
	fix1_847759065 = 15137
	fix1_961570560 = 16069
	fix2_053119869 = 16819
	fix2_172734803 = 17799
	fix2_562915447 = 20995
	fix3_072711026 = 25172
	fix3_624509785 = 29692
)

// clampSample maps an IDCT output (centred on 0) to a sample.
func clampSample(x int32) uint8 {
	x += 128
	if uint32(x) > 255 {
		if x < 0 {
			return 0
		}
		return 255
	}
	return uint8(x)
}

func descale(x int32, n uint) int32 { return (x + 1<<(n-1)) >> n }

// idct8 is jpeg_idct_islow: blk to an 8×8 block at out (rows stride apart).
func idct8(blk *[64]int32, out []uint8, stride int) {
	var ws [64]int32
	for c := 0; c < 8; c++ {
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[32+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := blk[c] << pass1Bits
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			ws[32+c], ws[40+c], ws[48+c], ws[56+c] = dc, dc, dc, dc
			continue
		}
		z2, z3 := blk[16+c], blk[48+c]
		z1 := (z2 + z3) * fix0_541196100
		tmp2 := z1 - z3*fix1_847759065
		tmp3 := z1 + z2*fix0_765366865
		z2, z3 = blk[c], blk[32+c]
		tmp0 := (z2 + z3) << constBits
		tmp1 := (z2 - z3) << constBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		tmp0, tmp1, tmp2, tmp3 = blk[56+c], blk[40+c], blk[24+c], blk[8+c]
		z1, z2, z3 = tmp0+tmp3, tmp1+tmp2, tmp0+tmp2
		z4 := tmp1 + tmp3
		z5 := (z3 + z4) * fix1_175875602
		tmp0 *= fix0_298631336
		tmp1 *= fix2_053119869
		tmp2 *= fix3_072711026
		tmp3 *= fix1_501321110
		z1 *= -fix0_899976223
		z2 *= -fix2_562915447
		z3 = z3*-fix1_961570560 + z5
		z4 = z4*-fix0_390180644 + z5
		tmp0 += z1 + z3
		tmp1 += z2 + z4
		tmp2 += z2 + z3
		tmp3 += z1 + z4

		const n = constBits - pass1Bits
		ws[c] = descale(tmp10+tmp3, n)
		ws[56+c] = descale(tmp10-tmp3, n)
		ws[8+c] = descale(tmp11+tmp2, n)
		ws[48+c] = descale(tmp11-tmp2, n)
		ws[16+c] = descale(tmp12+tmp1, n)
		ws[40+c] = descale(tmp12-tmp1, n)
		ws[24+c] = descale(tmp13+tmp0, n)
		ws[32+c] = descale(tmp13-tmp0, n)
	}
	for r := 0; r < 8; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		o := out[r*stride : r*stride+8 : r*stride+8]
		if w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = v, v, v, v, v, v, v, v
			continue
		}
		z2, z3 := w[2], w[6]
		z1 := (z2 + z3) * fix0_541196100
		tmp2 := z1 - z3*fix1_847759065
		tmp3 := z1 + z2*fix0_765366865
		tmp0 := (w[0] + w[4]) << constBits
		tmp1 := (w[0] - w[4]) << constBits
		tmp10, tmp13 := tmp0+tmp3, tmp0-tmp3
		tmp11, tmp12 := tmp1+tmp2, tmp1-tmp2

		tmp0, tmp1, tmp2, tmp3 = w[7], w[5], w[3], w[1]
		z1, z2, z3 = tmp0+tmp3, tmp1+tmp2, tmp0+tmp2
		z4 := tmp1 + tmp3
		z5 := (z3 + z4) * fix1_175875602
		tmp0 *= fix0_298631336
		tmp1 *= fix2_053119869
		tmp2 *= fix3_072711026
		tmp3 *= fix1_501321110
		z1 *= -fix0_899976223
		z2 *= -fix2_562915447
		z3 = z3*-fix1_961570560 + z5
		z4 = z4*-fix0_390180644 + z5
		tmp0 += z1 + z3
		tmp1 += z2 + z4
		tmp2 += z2 + z3
		tmp3 += z1 + z4

		const n = constBits + pass1Bits + 3
		o[0] = clampSample(descale(tmp10+tmp3, n))
		o[7] = clampSample(descale(tmp10-tmp3, n))
		o[1] = clampSample(descale(tmp11+tmp2, n))
		o[6] = clampSample(descale(tmp11-tmp2, n))
		o[2] = clampSample(descale(tmp12+tmp1, n))
		o[5] = clampSample(descale(tmp12-tmp1, n))
		o[3] = clampSample(descale(tmp13+tmp0, n))
		o[4] = clampSample(descale(tmp13-tmp0, n))
	}
}

// idct4 is jpeg_idct_4x4.
func idct4(blk *[64]int32, out []uint8, stride int) {
	var ws [32]int32 // 4 rows of 8 columns (column 4 unused)
	for c := 0; c < 8; c++ {
		if c == 4 {
			continue
		}
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := blk[c] << pass1Bits
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			continue
		}
		tmp0 := blk[c] << (constBits + 1)
		tmp2 := blk[16+c]*fix1_847759065 - blk[48+c]*fix0_765366865
		tmp10, tmp12 := tmp0+tmp2, tmp0-tmp2
		z1, z2, z3, z4 := blk[56+c], blk[40+c], blk[24+c], blk[8+c]
		tmp0 = -z1*fix0_211164243 + z2*fix1_451774981 - z3*fix2_172734803 + z4*fix1_061594337
		tmp2 = -z1*fix0_509795579 - z2*fix0_601344887 + z3*fix0_899976223 + z4*fix2_562915447
		const n = constBits - pass1Bits + 1
		ws[c] = descale(tmp10+tmp2, n)
		ws[24+c] = descale(tmp10-tmp2, n)
		ws[8+c] = descale(tmp12+tmp0, n)
		ws[16+c] = descale(tmp12-tmp0, n)
	}
	for r := 0; r < 4; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		o := out[r*stride : r*stride+4 : r*stride+4]
		if w[1]|w[2]|w[3]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			o[0], o[1], o[2], o[3] = v, v, v, v
			continue
		}
		tmp0 := w[0] << (constBits + 1)
		tmp2 := w[2]*fix1_847759065 - w[6]*fix0_765366865
		tmp10, tmp12 := tmp0+tmp2, tmp0-tmp2
		z1, z2, z3, z4 := w[7], w[5], w[3], w[1]
		tmp0 = -z1*fix0_211164243 + z2*fix1_451774981 - z3*fix2_172734803 + z4*fix1_061594337
		tmp2 = -z1*fix0_509795579 - z2*fix0_601344887 + z3*fix0_899976223 + z4*fix2_562915447
		const n = constBits + pass1Bits + 3 + 1
		o[0] = clampSample(descale(tmp10+tmp2, n))
		o[3] = clampSample(descale(tmp10-tmp2, n))
		o[1] = clampSample(descale(tmp12+tmp0, n))
		o[2] = clampSample(descale(tmp12-tmp0, n))
	}
}

// idct2 is jpeg_idct_2x2.
func idct2(blk *[64]int32, out []uint8, stride int) {
	var ws [16]int32 // 2 rows of 8 columns (columns 2, 4, 6 unused)
	for c := 0; c < 8; c++ {
		if c == 2 || c == 4 || c == 6 {
			continue
		}
		if blk[8+c]|blk[24+c]|blk[40+c]|blk[56+c] == 0 {
			dc := blk[c] << pass1Bits
			ws[c], ws[8+c] = dc, dc
			continue
		}
		tmp10 := blk[c] << (constBits + 2)
		tmp0 := -blk[56+c]*fix0_720959822 + blk[40+c]*fix0_850430095 -
			blk[24+c]*fix1_272758580 + blk[8+c]*fix3_624509785
		const n = constBits - pass1Bits + 2
		ws[c] = descale(tmp10+tmp0, n)
		ws[8+c] = descale(tmp10-tmp0, n)
	}
	for r := 0; r < 2; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		o := out[r*stride : r*stride+2 : r*stride+2]
		if w[1]|w[3]|w[5]|w[7] == 0 {
			v := clampSample(descale(w[0], pass1Bits+3))
			o[0], o[1] = v, v
			continue
		}
		tmp10 := w[0] << (constBits + 2)
		tmp0 := -w[7]*fix0_720959822 + w[5]*fix0_850430095 - w[3]*fix1_272758580 + w[1]*fix3_624509785
		const n = constBits + pass1Bits + 3 + 2
		o[0] = clampSample(descale(tmp10+tmp0, n))
		o[1] = clampSample(descale(tmp10-tmp0, n))
	}
}

// idct1 is jpeg_idct_1x1: the block's mean.
func idct1(blk *[64]int32, out []uint8, _ int) {
	out[0] = clampSample(descale(blk[0], 3))
}

// idctDC writes a block whose AC coefficients are all zero: every output
// sample is the DC term's, as each transform's zero shortcuts give.
func idctDC(dc int32, size int, out []uint8, stride int) {
	v := clampSample(descale(dc<<pass1Bits, pass1Bits+3))
	if size == 1 {
		v = clampSample(descale(dc, 3))
	}
	for r := 0; r < size; r++ {
		o := out[r*stride : r*stride+size]
		for i := range o {
			o[i] = v
		}
	}
}

// The fast integer transform of jidctfst.c (Arai, Agui and Nakajima's
// scaled DCT; 8-bit constants, products truncated, as libjpeg builds it by
// default). It is what libjpeg-turbo runs with TJFLAG_FASTDCT, and so what
// FFCV decodes with. Its dequantization table folds in the AAN scale
// factors: qFast = round(q · aanScale / 2¹²).
const (
	fastConstBits      = 8
	fastFix1_082392200 = 277
	fastFix1_414213562 = 362
	fastFix1_847759065 = 473
	fastFix2_613125930 = 669
)

// aanScale[i] = 2¹⁴ · s(row) · s(col), s(0) = 1, s(k) = √2·cos(kπ/16), in
// natural order (jddctmgr.c).
var aanScale = [64]int32{
	16384, 22725, 21407, 19266, 16384, 12873, 8867, 4520,
	22725, 31521, 29692, 26722, 22725, 17855, 12299, 6270,
	21407, 29692, 27969, 25172, 21407, 16819, 11585, 5906,
	19266, 26722, 25172, 22654, 19266, 15137, 10426, 5315,
	16384, 22725, 21407, 19266, 16384, 12873, 8867, 4520,
	12873, 17855, 16819, 15137, 12873, 10114, 6967, 3552,
	8867, 12299, 11585, 10426, 8867, 6967, 4799, 2446,
	4520, 6270, 5906, 5315, 4520, 3552, 2446, 1247,
}

func fmul(x, c int32) int32 { return (x * c) >> fastConstBits }

// idct8Fast is jpeg_idct_ifast; blk is dequantized with the fast table.
func idct8Fast(blk *[64]int32, out []uint8, stride int) {
	if idctVector {
		_ = out[7*stride+7]
		idct8FastAVX2(blk, &out[0], stride)
		return
	}
	idct8FastGo(blk, out, stride)
}

// idct8FastGo is idct8Fast in Go.
func idct8FastGo(blk *[64]int32, out []uint8, stride int) {
	var ws [64]int32
	for c := 0; c < 8; c++ {
		if blk[8+c]|blk[16+c]|blk[24+c]|blk[32+c]|blk[40+c]|blk[48+c]|blk[56+c] == 0 {
			dc := blk[c]
			ws[c], ws[8+c], ws[16+c], ws[24+c] = dc, dc, dc, dc
			ws[32+c], ws[40+c], ws[48+c], ws[56+c] = dc, dc, dc, dc
			continue
		}
		tmp0, tmp1, tmp2, tmp3 := blk[c], blk[16+c], blk[32+c], blk[48+c]
		tmp10, tmp11 := tmp0+tmp2, tmp0-tmp2
		tmp13 := tmp1 + tmp3
		tmp12 := fmul(tmp1-tmp3, fastFix1_414213562) - tmp13
		tmp0, tmp3 = tmp10+tmp13, tmp10-tmp13
		tmp1, tmp2 = tmp11+tmp12, tmp11-tmp12

		tmp4, tmp5, tmp6, tmp7 := blk[8+c], blk[24+c], blk[40+c], blk[56+c]
		z13, z10 := tmp6+tmp5, tmp6-tmp5
		z11, z12 := tmp4+tmp7, tmp4-tmp7
		tmp7 = z11 + z13
		tmp11 = fmul(z11-z13, fastFix1_414213562)
		z5 := fmul(z10+z12, fastFix1_847759065)
		tmp10 = fmul(z12, fastFix1_082392200) - z5
		tmp12 = fmul(z10, -fastFix2_613125930) + z5
		tmp6 = tmp12 - tmp7
		tmp5 = tmp11 - tmp6
		tmp4 = tmp10 + tmp5

		ws[c], ws[56+c] = tmp0+tmp7, tmp0-tmp7
		ws[8+c], ws[48+c] = tmp1+tmp6, tmp1-tmp6
		ws[16+c], ws[40+c] = tmp2+tmp5, tmp2-tmp5
		ws[32+c], ws[24+c] = tmp3+tmp4, tmp3-tmp4
	}
	const shift = pass1Bits + 3
	for r := 0; r < 8; r++ {
		w := ws[8*r : 8*r+8 : 8*r+8]
		o := out[r*stride : r*stride+8 : r*stride+8]
		if w[1]|w[2]|w[3]|w[4]|w[5]|w[6]|w[7] == 0 {
			v := clampSample(w[0] >> shift)
			o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = v, v, v, v, v, v, v, v
			continue
		}
		tmp10, tmp11 := w[0]+w[4], w[0]-w[4]
		tmp13 := w[2] + w[6]
		tmp12 := fmul(w[2]-w[6], fastFix1_414213562) - tmp13
		tmp0, tmp3 := tmp10+tmp13, tmp10-tmp13
		tmp1, tmp2 := tmp11+tmp12, tmp11-tmp12

		z13, z10 := w[5]+w[3], w[5]-w[3]
		z11, z12 := w[1]+w[7], w[1]-w[7]
		tmp7 := z11 + z13
		tmp11 = fmul(z11-z13, fastFix1_414213562)
		z5 := fmul(z10+z12, fastFix1_847759065)
		tmp10 = fmul(z12, fastFix1_082392200) - z5
		tmp12 = fmul(z10, -fastFix2_613125930) + z5
		tmp6 := tmp12 - tmp7
		tmp5 := tmp11 - tmp6
		tmp4 := tmp10 + tmp5

		o[0] = clampSample((tmp0 + tmp7) >> shift)
		o[7] = clampSample((tmp0 - tmp7) >> shift)
		o[1] = clampSample((tmp1 + tmp6) >> shift)
		o[6] = clampSample((tmp1 - tmp6) >> shift)
		o[2] = clampSample((tmp2 + tmp5) >> shift)
		o[5] = clampSample((tmp2 - tmp5) >> shift)
		o[4] = clampSample((tmp3 + tmp4) >> shift)
		o[3] = clampSample((tmp3 - tmp4) >> shift)
	}
}

// idctFastDC writes a block with no AC coefficients through the fast
// transform's shortcuts.
func idctFastDC(dc int32, out []uint8, stride int) {
	v := clampSample(dc >> (pass1Bits + 3))
	for r := 0; r < 8; r++ {
		o := out[r*stride : r*stride+8 : r*stride+8]
		o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = v, v, v, v, v, v, v, v
	}
}
