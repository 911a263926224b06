//go:build !purego

package cpu

import "github.com/flockml/flock/backend"

// Vector loops over float32 slices of equal length (elementwise_amd64.s).

//go:noescape
func reluAVX512(d, x []float32)

//go:noescape
func reluAVX2(d, x []float32)

//go:noescape
func reluGradAVX512(d, g, y []float32)

//go:noescape
func reluGradAVX2(d, g, y []float32)

//go:noescape
func geluAVX512(d, x []float32)

//go:noescape
func geluAVX2(d, x []float32)

//go:noescape
func geluGradAVX512(d, g, x []float32)

//go:noescape
func geluGradAVX2(d, g, x []float32)

//go:noescape
func addAVX512(d, a, b []float32)

//go:noescape
func subAVX512(d, a, b []float32)

//go:noescape
func mulAVX512(d, a, b []float32)

//go:noescape
func divAVX512(d, a, b []float32)

//go:noescape
func addAVX2(d, a, b []float32)

//go:noescape
func subAVX2(d, a, b []float32)

//go:noescape
func mulAVX2(d, a, b []float32)

//go:noescape
func divAVX2(d, a, b []float32)

//go:noescape
func addScalarAVX512(d, x []float32, s float32)

//go:noescape
func mulScalarAVX512(d, x []float32, s float32)

//go:noescape
func addScalarAVX2(d, x []float32, s float32)

//go:noescape
func mulScalarAVX2(d, x []float32, s float32)

// unaryVec computes d = op(x) with the vector loops of the kernel path,
// reporting false where the path has none for op.
func unaryVec(op backend.UnaryOp, d, x []float32, arg float64) bool {
	lvl := activeVec()
	if lvl == vecGo {
		return false
	}
	wide := lvl == vecAVX512
	x = x[:len(d)]
	switch op {
	case backend.ReLU:
		if wide {
			reluAVX512(d, x)
		} else {
			reluAVX2(d, x)
		}
	case backend.GELU:
		if wide {
			geluAVX512(d, x)
		} else {
			geluAVX2(d, x)
		}
	case backend.AddScalar:
		if wide {
			addScalarAVX512(d, x, float32(arg))
		} else {
			addScalarAVX2(d, x, float32(arg))
		}
	case backend.MulScalar:
		if wide {
			mulScalarAVX512(d, x, float32(arg))
		} else {
			mulScalarAVX2(d, x, float32(arg))
		}
	default:
		return false
	}
	return true
}

// binaryVec computes d = op(a, b) with the vector loops of the kernel path,
// reporting false where the path has none for op.
func binaryVec(op backend.BinaryOp, d, a, b []float32) bool {
	lvl := activeVec()
	if lvl == vecGo {
		return false
	}
	wide := lvl == vecAVX512
	a, b = a[:len(d)], b[:len(d)]
	switch op {
	case backend.Add:
		if wide {
			addAVX512(d, a, b)
		} else {
			addAVX2(d, a, b)
		}
	case backend.Sub:
		if wide {
			subAVX512(d, a, b)
		} else {
			subAVX2(d, a, b)
		}
	case backend.Mul:
		if wide {
			mulAVX512(d, a, b)
		} else {
			mulAVX2(d, a, b)
		}
	case backend.Div:
		if wide {
			divAVX512(d, a, b)
		} else {
			divAVX2(d, a, b)
		}
	case backend.ReLUGrad:
		if wide {
			reluGradAVX512(d, a, b)
		} else {
			reluGradAVX2(d, a, b)
		}
	case backend.GELUGrad:
		if wide {
			geluGradAVX512(d, a, b)
		} else {
			geluGradAVX2(d, a, b)
		}
	default:
		return false
	}
	return true
}
