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

// normLoopsF32 returns the batch-normalisation loops of the kernel path.
func normLoopsF32() normLoops[float32] {
	switch activeVec() {
	case vecAVX512:
		return normLoops[float32]{
			sum: func(x []float32) float64 {
				n := len(x) &^ 7
				return sumF32AVX512(x[:n]) + sumGo(x[n:])
			},
			sumSqDev: func(x []float32, mean float64) float64 {
				n := len(x) &^ 7
				return sumSqDevF32AVX512(x[:n], mean) + sumSqDevGo(x[n:], mean)
			},
			gradSums: func(dy, x []float32, mean float64) (float64, float64) {
				n := len(dy) &^ 7
				s, sx := gradSumsF32AVX512(dy[:n], x[:n], mean)
				ts, tsx := gradSumsGo(dy[n:], x[n:], mean)
				return s + ts, sx + tsx
			},
			affine: func(y, x []float32, scale, shift float64) {
				n := len(y) &^ 7
				affineF32AVX512(y[:n], x[:n], scale, shift)
				affineGo(y[n:], x[n:len(y)], scale, shift)
			},
			gradDx: func(dx, dy, x []float32, scale, a, b, mean float64) {
				n := len(dx) &^ 7
				gradDxF32AVX512(dx[:n], dy[:n], x[:n], scale, a, b, mean)
				gradDxGo(dx[n:], dy[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
			},
			affineReLU: func(y, x []float32, scale, shift float64) {
				n := len(y) &^ 7
				affineReLUF32AVX512(y[:n], x[:n], scale, shift)
				affineReLUGo(y[n:], x[n:len(y)], scale, shift)
			},
			gradSumsMasked: func(dy, y, x []float32, mean float64) (float64, float64) {
				n := len(dy) &^ 7
				s, sx := gradSumsMaskedF32AVX512(dy[:n], y[:n], x[:n], mean)
				ts, tsx := gradSumsMaskedGo(dy[n:], y[n:], x[n:], mean)
				return s + ts, sx + tsx
			},
			gradDxMasked: func(dx, dy, y, x []float32, scale, a, b, mean float64) {
				n := len(dx) &^ 7
				gradDxMaskedF32AVX512(dx[:n], dy[:n], y[:n], x[:n], scale, a, b, mean)
				gradDxMaskedGo(dx[n:], dy[n:len(dx)], y[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
			},
		}
	case vecAVX2:
		return normLoops[float32]{
			sum: func(x []float32) float64 {
				n := len(x) &^ 3
				return sumF32AVX2(x[:n]) + sumGo(x[n:])
			},
			sumSqDev: func(x []float32, mean float64) float64 {
				n := len(x) &^ 3
				return sumSqDevF32AVX2(x[:n], mean) + sumSqDevGo(x[n:], mean)
			},
			gradSums: func(dy, x []float32, mean float64) (float64, float64) {
				n := len(dy) &^ 3
				s, sx := gradSumsF32AVX2(dy[:n], x[:n], mean)
				ts, tsx := gradSumsGo(dy[n:], x[n:], mean)
				return s + ts, sx + tsx
			},
			affine: func(y, x []float32, scale, shift float64) {
				n := len(y) &^ 3
				affineF32AVX2(y[:n], x[:n], scale, shift)
				affineGo(y[n:], x[n:len(y)], scale, shift)
			},
			gradDx: func(dx, dy, x []float32, scale, a, b, mean float64) {
				n := len(dx) &^ 3
				gradDxF32AVX2(dx[:n], dy[:n], x[:n], scale, a, b, mean)
				gradDxGo(dx[n:], dy[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
			},
			affineReLU: func(y, x []float32, scale, shift float64) {
				n := len(y) &^ 3
				affineReLUF32AVX2(y[:n], x[:n], scale, shift)
				affineReLUGo(y[n:], x[n:len(y)], scale, shift)
			},
			gradSumsMasked: func(dy, y, x []float32, mean float64) (float64, float64) {
				n := len(dy) &^ 3
				s, sx := gradSumsMaskedF32AVX2(dy[:n], y[:n], x[:n], mean)
				ts, tsx := gradSumsMaskedGo(dy[n:], y[n:], x[n:], mean)
				return s + ts, sx + tsx
			},
			gradDxMasked: func(dx, dy, y, x []float32, scale, a, b, mean float64) {
				n := len(dx) &^ 3
				gradDxMaskedF32AVX2(dx[:n], dy[:n], y[:n], x[:n], scale, a, b, mean)
				gradDxMaskedGo(dx[n:], dy[n:len(dx)], y[n:len(dx)], x[n:len(dx)], scale, a, b, mean)
			},
		}
	}
	return goNormLoops[float32]()
}
