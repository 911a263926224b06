package jpeg

// YCbCr → RGB as libjpeg's jdcolor.c (JFIF: R = Y + 1.402·(Cr−128),
// G = Y − 0.34414·(Cb−128) − 0.71414·(Cr−128), B = Y + 1.772·(Cb−128)),
// with its 16-bit fixed-point tables and rounding.
var (
	crR, cbB [256]int32
	crG, cbG [256]int32
)

func init() {
	const scaleBits = 16
	const half = 1 << (scaleBits - 1)
	fix := func(x float64) int32 { return int32(x*(1<<scaleBits) + 0.5) }
	for i := range 256 {
		x := int32(i - 128)
		crR[i] = (fix(1.40200)*x + half) >> scaleBits
		cbB[i] = (fix(1.77200)*x + half) >> scaleBits
		crG[i] = -fix(0.71414) * x
		cbG[i] = -fix(0.34414)*x + half
	}
}

func clamp255(x int32) uint8 {
	if uint32(x) > 255 {
		if x < 0 {
			return 0
		}
		return 255
	}
	return uint8(x)
}

func yccToRGB(y, cb, cr uint8) (uint8, uint8, uint8) {
	yy := int32(y)
	return clamp255(yy + crR[cr]), clamp255(yy + (cbG[cb]+crG[cr])>>16), clamp255(yy + cbB[cb])
}

// yccRow converts one row of full-resolution Y, Cb, Cr into RGB triples.
func yccRow(out, y, cb, cr []uint8) {
	out = out[:3*len(y)]
	cb = cb[:len(y)]
	cr = cr[:len(y)]
	for i, yv := range y {
		yy := int32(yv)
		b, r := cb[i], cr[i]
		o := out[3*i : 3*i+3 : 3*i+3]
		o[0] = clamp255(yy + crR[r])
		o[1] = clamp255(yy + (cbG[b]+crG[r])>>16)
		o[2] = clamp255(yy + cbB[b])
	}
}

// Chroma upsampling by 2, as libjpeg-turbo's jdsample.c. The "fancy"
// versions are its triangle filters (weights 3/4 and 1/4 from the nearer
// and farther sample, with its alternating rounding); the plain versions
// replicate samples, as image/jpeg and TJFLAG_FASTUPSAMPLE do.

// upH2Fancy is h2v1_fancy_upsample: in has the component's real width.
func upH2Fancy(out, in []uint8) {
	n := len(in)
	if n <= 2 {
		upH2(out, in)
		return
	}
	out = out[:2*n]
	out[0] = in[0]
	out[1] = uint8((int32(in[0])*3 + int32(in[1]) + 2) >> 2)
	for i := 1; i < n-1; i++ {
		v := int32(in[i]) * 3
		out[2*i] = uint8((v + int32(in[i-1]) + 1) >> 2)
		out[2*i+1] = uint8((v + int32(in[i+1]) + 2) >> 2)
	}
	out[2*n-2] = uint8((int32(in[n-1])*3 + int32(in[n-2]) + 1) >> 2)
	out[2*n-1] = in[n-1]
}

func upH2(out, in []uint8) {
	out = out[:2*len(in)]
	for i, v := range in {
		out[2*i] = v
		out[2*i+1] = v
	}
}

// upV2Fancy is h1v2_fancy_upsample for one output row: near is the
// component row covering it, far the adjacent one on the same side; upper
// says whether the output row is the upper of the two near covers.
func upV2Fancy(out, near, far []uint8, upper bool) {
	bias := int32(2)
	if upper {
		bias = 1
	}
	out = out[:len(near)]
	far = far[:len(near)]
	for i, v := range near {
		out[i] = uint8((int32(v)*3 + int32(far[i]) + bias) >> 2)
	}
}

// upH2V2Fancy is h2v2_fancy_upsample for one output row (see upV2Fancy
// for near and far).
func upH2V2Fancy(out, near, far []uint8) {
	n := len(near)
	far = far[:n]
	if n <= 2 {
		upH2(out, near)
		return
	}
	out = out[:2*n]
	this := int32(near[0])*3 + int32(far[0])
	next := int32(near[1])*3 + int32(far[1])
	out[0] = uint8((this*4 + 8) >> 4)
	out[1] = uint8((this*3 + next + 7) >> 4)
	last := this
	this = next
	for i := 1; i < n-1; i++ {
		next = int32(near[i+1])*3 + int32(far[i+1])
		out[2*i] = uint8((this*3 + last + 8) >> 4)
		out[2*i+1] = uint8((this*3 + next + 7) >> 4)
		last = this
		this = next
	}
	out[2*n-2] = uint8((this*3 + last + 8) >> 4)
	out[2*n-1] = uint8((this*4 + 7) >> 4)
}

// yccRowH2V2Fancy converts one output row of a 4:2:0 image: the chroma of
// output pixels 2i and 2i+1 is upH2V2Fancy's, computed in place. y may be
// one pixel shorter than twice the chroma width (odd image widths).
func yccRowH2V2Fancy(out, y, cbNear, cbFar, crNear, crFar []uint8) {
	n := len(cbNear)
	cbFar = cbFar[:n]
	crNear = crNear[:n]
	crFar = crFar[:n]
	w := len(y)
	out = out[:3*w]
	put := func(x int, cb, cr int32) {
		if x >= w {
			return
		}
		yy := int32(y[x])
		o := out[3*x : 3*x+3 : 3*x+3]
		o[0] = clamp255(yy + crR[cr])
		o[1] = clamp255(yy + (cbG[cb]+crG[cr])>>16)
		o[2] = clamp255(yy + cbB[cb])
	}
	bThis := int32(cbNear[0])*3 + int32(cbFar[0])
	rThis := int32(crNear[0])*3 + int32(crFar[0])
	bNext := int32(cbNear[1])*3 + int32(cbFar[1])
	rNext := int32(crNear[1])*3 + int32(crFar[1])
	put(0, (bThis*4+8)>>4, (rThis*4+8)>>4)
	put(1, (bThis*3+bNext+7)>>4, (rThis*3+rNext+7)>>4)
	bLast, rLast := bThis, rThis
	bThis, rThis = bNext, rNext
	// Interior columns: both output pixels exist while 2i+1 < w.
	i := 1
	if last := min(n-2, (w-2)/2); yccVector && last >= 16 {
		// Samples 1 … last have both neighbours and both pixels inside
		// the row: blocks of 16 from sample 1, then one more ending at
		// last, overlapping the one before (which it writes again, the
		// same).
		blocks := last / 16
		yccH2V2FancyAVX512(&out[6], &y[2], &cbNear[1], &cbFar[1], &crNear[1], &crFar[1], blocks)
		if j := last - 15; j > 16*blocks-15 {
			yccH2V2FancyAVX512(&out[6*j], &y[2*j], &cbNear[j], &cbFar[j], &crNear[j], &crFar[j], 1)
		}
		i = last + 1
		bLast = int32(cbNear[i-1])*3 + int32(cbFar[i-1])
		rLast = int32(crNear[i-1])*3 + int32(crFar[i-1])
		bThis = int32(cbNear[i])*3 + int32(cbFar[i])
		rThis = int32(crNear[i])*3 + int32(crFar[i])
	}
	for ; i < n-1 && 2*i+1 < w; i++ {
		bNext = int32(cbNear[i+1])*3 + int32(cbFar[i+1])
		rNext = int32(crNear[i+1])*3 + int32(crFar[i+1])
		b0, r0 := (bThis*3+bLast+8)>>4, (rThis*3+rLast+8)>>4
		b1, r1 := (bThis*3+bNext+7)>>4, (rThis*3+rNext+7)>>4
		y0, y1 := int32(y[2*i]), int32(y[2*i+1])
		o := out[6*i : 6*i+6 : 6*i+6]
		o[0] = clamp255(y0 + crR[r0])
		o[1] = clamp255(y0 + (cbG[b0]+crG[r0])>>16)
		o[2] = clamp255(y0 + cbB[b0])
		o[3] = clamp255(y1 + crR[r1])
		o[4] = clamp255(y1 + (cbG[b1]+crG[r1])>>16)
		o[5] = clamp255(y1 + cbB[b1])
		bLast, rLast = bThis, rThis
		bThis, rThis = bNext, rNext
	}
	for ; i < n-1; i++ {
		bNext = int32(cbNear[i+1])*3 + int32(cbFar[i+1])
		rNext = int32(crNear[i+1])*3 + int32(crFar[i+1])
		put(2*i, (bThis*3+bLast+8)>>4, (rThis*3+rLast+8)>>4)
		put(2*i+1, (bThis*3+bNext+7)>>4, (rThis*3+rNext+7)>>4)
		bLast, rLast = bThis, rThis
		bThis, rThis = bNext, rNext
	}
	put(2*n-2, (bThis*3+bLast+8)>>4, (rThis*3+rLast+8)>>4)
	put(2*n-1, (bThis*4+7)>>4, (rThis*4+7)>>4)
}
