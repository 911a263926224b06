//go:build !purego

package cpu

// Vector loops of batch normalisation (norm_amd64.s). Each covers the first
// len − len mod 8 (AVX-512) or len − len mod 4 (AVX2) elements.

//go:noescape
func sumF32AVX512(x []float32) float64

//go:noescape
func sumF32AVX2(x []float32) float64

//go:noescape
func sumSqDevF32AVX512(x []float32, mean float64) float64

//go:noescape
func sumSqDevF32AVX2(x []float32, mean float64) float64

//go:noescape
func gradSumsF32AVX512(dy, x []float32, mean float64) (sdy, sdyx float64)

//go:noescape
func gradSumsF32AVX2(dy, x []float32, mean float64) (sdy, sdyx float64)

//go:noescape
func affineF32AVX512(y, x []float32, scale, shift float64)

//go:noescape
func affineF32AVX2(y, x []float32, scale, shift float64)

//go:noescape
func gradDxF32AVX512(dx, dy, x []float32, scale, a, b, mean float64)

//go:noescape
func gradDxF32AVX2(dx, dy, x []float32, scale, a, b, mean float64)

//go:noescape
func affineReLUF32AVX512(y, x []float32, scale, shift float64)

//go:noescape
func affineReLUF32AVX2(y, x []float32, scale, shift float64)

//go:noescape
func gradSumsMaskedF32AVX512(dy, y, x []float32, mean float64) (sdy, sdyx float64)

//go:noescape
func gradSumsMaskedF32AVX2(dy, y, x []float32, mean float64) (sdy, sdyx float64)

//go:noescape
func gradDxMaskedF32AVX512(dx, dy, y, x []float32, scale, a, b, mean float64)

//go:noescape
func gradDxMaskedF32AVX2(dx, dy, y, x []float32, scale, a, b, mean float64)

// normVecF32 is one instruction set's vector loops of batch
// normalisation, each taking a multiple of block elements.
type normVecF32 struct {
	block          int
	sum            func(x []float32) float64
	sumSqDev       func(x []float32, mean float64) float64
	gradSums       func(dy, x []float32, mean float64) (float64, float64)
	affine         func(y, x []float32, scale, shift float64)
	gradDx         func(dx, dy, x []float32, scale, a, b, mean float64)
	affineReLU     func(y, x []float32, scale, shift float64)
	gradSumsMasked func(dy, y, x []float32, mean float64) (float64, float64)
	gradDxMasked   func(dx, dy, y, x []float32, scale, a, b, mean float64)
}

var (
	normAVX512 = normVecF32{8, sumF32AVX512, sumSqDevF32AVX512, gradSumsF32AVX512, affineF32AVX512,
		gradDxF32AVX512, affineReLUF32AVX512, gradSumsMaskedF32AVX512, gradDxMaskedF32AVX512}
	normAVX2 = normVecF32{4, sumF32AVX2, sumSqDevF32AVX2, gradSumsF32AVX2, affineF32AVX2,
		gradDxF32AVX2, affineReLUF32AVX2, gradSumsMaskedF32AVX2, gradDxMaskedF32AVX2}
)

// loops returns the loops of v, each running the vector loop over the
// whole blocks and the Go loop over the rest.
func (v normVecF32) loops() normLoops[float32] {
	head := func(n int) int { return n - n%v.block }
	return normLoops[float32]{
		sum: func(x []float32) float64 {
			n := head(len(x))
			return v.sum(x[:n]) + sumGo(x[n:])
		},
		sumSqDev: func(x []float32, mean float64) float64 {
			n := head(len(x))
			return v.sumSqDev(x[:n], mean) + sumSqDevGo(x[n:], mean)
		},
		gradSums: func(dy, x []float32, mean float64) (float64, float64) {
			n := head(len(dy))
			s, sx := v.gradSums(dy[:n], x[:n], mean)
			ts, tsx := gradSumsGo(dy[n:], x[n:], mean)
			return s + ts, sx + tsx
		},
		affine: func(y, x []float32, scale, shift float64) {
			n := head(len(y))
			v.affine(y[:n], x[:n], scale, shift)
			affineGo(y[n:], x[n:len(y)], scale, shift)
		},
		gradDx: func(dx, dy, x []float32, scale, a, b, mean float64) {
			n := head(len(dx))
			v.gradDx(dx[:n], dy[:n], x[:n], scale, a, b, mean)
			gradDxGo(dx[n:], dy[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
		},
		affineReLU: func(y, x []float32, scale, shift float64) {
			n := head(len(y))
			v.affineReLU(y[:n], x[:n], scale, shift)
			affineReLUGo(y[n:], x[n:len(y)], scale, shift)
		},
		gradSumsMasked: func(dy, y, x []float32, mean float64) (float64, float64) {
			n := head(len(dy))
			s, sx := v.gradSumsMasked(dy[:n], y[:n], x[:n], mean)
			ts, tsx := gradSumsMaskedGo(dy[n:], y[n:], x[n:], mean)
			return s + ts, sx + tsx
		},
		gradDxMasked: func(dx, dy, y, x []float32, scale, a, b, mean float64) {
			n := head(len(dx))
			v.gradDxMasked(dx[:n], dy[:n], y[:n], x[:n], scale, a, b, mean)
			gradDxMaskedGo(dx[n:], dy[n:len(dx)], y[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
		},
	}
}

// The loops of each path, made once: the row kernels (layer norm,
// softmax) ask for them at every row.
var (
	normLoopsAVX512 = normAVX512.loops()
	normLoopsAVX2   = normAVX2.loops()
	normLoopsGo     = goNormLoops[float32]()
)

// normLoopsF32 returns the batch-normalisation loops of the kernel path.
func normLoopsF32() normLoops[float32] {
	switch activeVec() {
	case vecAVX512:
		return normLoopsAVX512
	case vecAVX2:
		return normLoopsAVX2
	}
	return normLoopsGo
}
