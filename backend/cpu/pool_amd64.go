//go:build !purego

package cpu

// maxPoolArgs describes the block of outputs one maxPoolS2AVX512 call
// pools (see pool_amd64.s); the field order is the assembly's.
type maxPoolArgs struct {
	off, w, kh, kw, dh, dw int
	n, rows                int // outputs per row, rows
	ostride, istep         int // output row stride; input offset step per row
}

//go:noescape
func maxPoolS2AVX512(out []float32, idx []int64, x []float32, a *maxPoolArgs)

// maxPoolVec reports whether the kernel path has a vector loop for max
// pooling s over planes of n elements: column stride 2, AVX-512.
func maxPoolVec(s *poolShape, n int) bool {
	return s.SW == 2 && n < 1<<31 && activeVec() == vecAVX512
}

// maxPoolBlock max-pools outputs [oh0, oh1) × [ow0, ow1) of the plane in,
// whose windows lie inside the plane, into the plane's out and idx.
func maxPoolBlock(s *poolShape, in, out []float32, idx []int64, oh0, oh1, ow0, ow1 int) {
	if oh0 >= oh1 || ow0 >= ow1 {
		return
	}
	// The last output read and the last input tap, for the bounds checks
	// the assembly does not make.
	lastOut := (oh1-1)*s.OW + ow1 - 1
	lastIn := ((oh1-1)*s.SH-s.PH+(s.KH-1)*s.DH)*s.W + 2*(ow1-1) - s.PW + (s.KW-1)*s.DW
	_, _, _ = out[lastOut], idx[lastOut], in[lastIn]
	a := maxPoolArgs{
		off: (oh0*s.SH-s.PH)*s.W + 2*ow0 - s.PW, w: s.W,
		kh: s.KH, kw: s.KW, dh: s.DH, dw: s.DW,
		n: ow1 - ow0, rows: oh1 - oh0, ostride: s.OW, istep: s.SH * s.W,
	}
	o := oh0*s.OW + ow0
	maxPoolS2AVX512(out[o:], idx[o:], in, &a)
}
