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

// Each op's vector loops, indexed by vecLevel − vecAVX2: AVX2, AVX-512.
var (
	unaryLoops = map[backend.UnaryOp][2]func(d, x []float32){
		backend.ReLU: {reluAVX2, reluAVX512},
		backend.GELU: {geluAVX2, geluAVX512},
	}
	scalarLoops = map[backend.UnaryOp][2]func(d, x []float32, s float32){
		backend.AddScalar: {addScalarAVX2, addScalarAVX512},
		backend.MulScalar: {mulScalarAVX2, mulScalarAVX512},
	}
	binaryLoops = map[backend.BinaryOp][2]func(d, a, b []float32){
		backend.Add:      {addAVX2, addAVX512},
		backend.Sub:      {subAVX2, subAVX512},
		backend.Mul:      {mulAVX2, mulAVX512},
		backend.Div:      {divAVX2, divAVX512},
		backend.ReLUGrad: {reluGradAVX2, reluGradAVX512},
		backend.GELUGrad: {geluGradAVX2, geluGradAVX512},
	}
)

// unaryVec computes d = op(x) with the vector loops of the kernel path,
// reporting false where the path has none for op.
func unaryVec(op backend.UnaryOp, d, x []float32, arg float64) bool {
	lvl := activeVec()
	if lvl == vecGo {
		return false
	}
	x = x[:len(d)]
	if f, ok := unaryLoops[op]; ok {
		f[lvl-vecAVX2](d, x)
		return true
	}
	if f, ok := scalarLoops[op]; ok {
		f[lvl-vecAVX2](d, x, float32(arg))
		return true
	}
	return false
}

// binaryVec computes d = op(a, b) with the vector loops of the kernel path,
// reporting false where the path has none for op.
func binaryVec(op backend.BinaryOp, d, a, b []float32) bool {
	lvl := activeVec()
	f, ok := binaryLoops[op]
	if lvl == vecGo || !ok {
		return false
	}
	f[lvl-vecAVX2](d, a[:len(d)], b[:len(d)])
	return true
}
