//go:build !purego

package cpu

import "math"

//go:noescape
func maxF32AVX512(x []float32) float32

//go:noescape
func maxF32AVX2(x []float32) float32

//go:noescape
func expSubSumAVX512(y, x []float32, m float32) float64

//go:noescape
func expSubSumAVX2(y, x []float32, m float32) float64

//go:noescape
func softmaxGradDxAVX512(dx, y, dy []float32, s float64)

//go:noescape
func softmaxGradDxAVX2(dx, y, dy []float32, s float64)

//go:noescape
func lnApplyAVX512(y, x, w, b []float32, mu, rs float64)

//go:noescape
func lnApplyAVX2(y, x, w, b []float32, mu, rs float64)

//go:noescape
func lnGradRowAVX512(dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) (sg, sgx float64)

//go:noescape
func lnGradRowAVX2(dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) (sg, sgx float64)

//go:noescape
func lnGradDxAVX512(dx []float32, g, xhat []float64, rs, sg, sgx float64)

//go:noescape
func lnGradDxAVX2(dx []float32, g, xhat []float64, rs, sg, sgx float64)

// softmaxRowVec writes the softmax of the row x into y with the vector
// loops of the kernel path: the exponentials in float32 (within about an
// ulp), their sum in float64. It reports false, leaving the row to the Go
// loop, where the path has no vector loops or x holds a NaN or an infinity.
func softmaxRowVec(y, x []float32) bool {
	lvl := activeVec()
	if lvl == vecGo || len(x) == 0 {
		return false
	}
	y = y[:len(x)]
	var m float32
	if lvl == vecAVX512 {
		m = maxF32AVX512(x)
	} else {
		m = maxF32AVX2(x)
	}
	if f := float64(m); math.IsNaN(f) || math.IsInf(f, 0) {
		return false
	}
	var s float64
	if lvl == vecAVX512 {
		s = expSubSumAVX512(y, x, m)
		mulScalarAVX512(y, y, float32(1/s))
	} else {
		s = expSubSumAVX2(y, x, m)
		mulScalarAVX2(y, y, float32(1/s))
	}
	return true
}

// softmaxGradRowVec writes dx = y·(dy − Σ dy·y) for one row with the vector
// loops of the kernel path, reporting false where it has none.
func softmaxGradRowVec(dx, y, dy []float32) bool {
	k := normLoopsF32()
	lvl := activeVec()
	if lvl == vecGo {
		return false
	}
	y, dy = y[:len(dx)], dy[:len(dx)]
	_, s := k.gradSums(dy, y, 0)
	n := len(dx) &^ 7
	if lvl == vecAVX512 {
		softmaxGradDxAVX512(dx[:n], y[:n], dy[:n], s)
	} else {
		softmaxGradDxAVX2(dx[:n], y[:n], dy[:n], s)
	}
	for i := n; i < len(dx); i++ {
		dx[i] = float32(float64(y[i]) * (float64(dy[i]) - s))
	}
	return true
}

// layerNormRowVec normalises one row x into y with weight w and bias b
// (both present) with the vector loops of the kernel path, returning the
// row's mean and 1/σ; ok is false where the path has none.
func layerNormRowVec(y, x, w, b []float32, eps float64) (mu, rs float64, ok bool) {
	lvl := activeVec()
	if lvl == vecGo {
		return 0, 0, false
	}
	k := normLoopsF32()
	d := float64(len(x))
	mu = k.sum(x) / d
	rs = 1 / math.Sqrt(k.sumSqDev(x, mu)/d+eps)
	y, w, b = y[:len(x)], w[:len(x)], b[:len(x)]
	n := len(x) &^ 7
	if lvl == vecAVX512 {
		lnApplyAVX512(y[:n], x[:n], w[:n], b[:n], mu, rs)
	} else {
		lnApplyAVX2(y[:n], x[:n], w[:n], b[:n], mu, rs)
	}
	for j := n; j < len(x); j++ {
		h := (float64(x[j]) - mu) * rs
		h *= float64(w[j])
		h += float64(b[j])
		y[j] = float32(h)
	}
	return mu, rs, true
}

// layerNormGradRowVec is one row of layerNormGradRows (weight present, both
// parameter gradients wanted) with the vector loops of the kernel path:
// it fills g and xhat, accumulates into pw and pb, and writes dx when it is
// not nil. It reports false where the path has none.
func layerNormGradRowVec(dx, dy, x, w []float32, pw, pb, g, xhat []float64, mu, rs float64) bool {
	lvl := activeVec()
	if lvl == vecGo {
		return false
	}
	d := len(x)
	dy, w, pw, pb, g, xhat = dy[:d], w[:d], pw[:d], pb[:d], g[:d], xhat[:d]
	n := d &^ 7
	var sg, sgx float64
	if lvl == vecAVX512 {
		sg, sgx = lnGradRowAVX512(dy[:n], x[:n], w[:n], pw[:n], pb[:n], g[:n], xhat[:n], mu, rs)
	} else {
		sg, sgx = lnGradRowAVX2(dy[:n], x[:n], w[:n], pw[:n], pb[:n], g[:n], xhat[:n], mu, rs)
	}
	for j := n; j < d; j++ {
		gj, xh := float64(dy[j]), (float64(x[j])-mu)*rs
		xhat[j] = xh
		pw[j] += gj * xh
		pb[j] += gj
		gj *= float64(w[j])
		g[j] = gj
		sg += gj
		sgx += gj * xh
	}
	if dx == nil {
		return true
	}
	sg /= float64(d)
	sgx /= float64(d)
	dx = dx[:d]
	if lvl == vecAVX512 {
		lnGradDxAVX512(dx[:n], g[:n], xhat[:n], rs, sg, sgx)
	} else {
		lnGradDxAVX2(dx[:n], g[:n], xhat[:n], rs, sg, sgx)
	}
	for j := n; j < d; j++ {
		dx[j] = float32(rs * (g[j] - sg - xhat[j]*sgx))
	}
	return true
}
