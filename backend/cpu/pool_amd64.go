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
	return s.sw == 2 && n < 1<<31 && activeVec() == vecAVX512
}

// maxPoolBlock max-pools outputs [oh0, oh1) × [ow0, ow1) of the plane in,
// whose windows lie inside the plane, into the plane's out and idx.
func maxPoolBlock(s *poolShape, in, out []float32, idx []int64, oh0, oh1, ow0, ow1 int) {
	if oh0 >= oh1 || ow0 >= ow1 {
		return
	}
	// The last output read and the last input tap, for the bounds checks
	// the assembly does not make.
	lastOut := (oh1-1)*s.ow + ow1 - 1
	lastIn := ((oh1-1)*s.sh-s.ph+(s.kh-1)*s.dh)*s.w + 2*(ow1-1) - s.pw + (s.kw-1)*s.dw
	_, _, _ = out[lastOut], idx[lastOut], in[lastIn]
	a := maxPoolArgs{
		off: (oh0*s.sh-s.ph)*s.w + 2*ow0 - s.pw, w: s.w,
		kh: s.kh, kw: s.kw, dh: s.dh, dw: s.dw,
		n: ow1 - ow0, rows: oh1 - oh0, ostride: s.ow, istep: s.sh * s.w,
	}
	o := oh0*s.ow + ow0
	maxPoolS2AVX512(out[o:], idx[o:], in, &a)
}
