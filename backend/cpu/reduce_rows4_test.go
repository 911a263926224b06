package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/backend"
)

// TestSumRows4 checks the four-rows-at-a-time column sums against folding
// the rows one by one (sweepColumns), bit for bit, on sizes that leave
// tails of rows and of columns, a row stride wider than the row, an offset,
// and values of very different magnitudes (the compensations matter).
func TestSumRows4(t *testing.T) {
	if !hasColumns4Vec() {
		t.Skip("no four-row kernel on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, m, stride, offset int }{
		{4, 8, 8, 0}, {7, 13, 13, 0}, {9, 768, 768, 3}, {130, 37, 41, 5}, {4160, 192, 192, 0}, {3, 16, 16, 0},
	} {
		x := make([]float32, c.offset+c.n*c.stride)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6)))
		}
		rd := &reduction{kept: backend.Shape{c.m}, keptStrides: []int{1}, red: backend.Shape{c.n}, redStrides: []int{c.stride},
			offset: c.offset, k: c.m, r: c.n}
		s, cc := make([]float64, c.m), make([]float64, c.m)
		if !sumRows4(rd, x, s, cc) {
			t.Fatalf("%+v: the four-row path did not apply", c)
		}
		ws, wc := make([]float64, c.m), make([]float64, c.m)
		for r := range c.n {
			sweepColumns(passSum, x, c.offset+r*c.stride, 1, ws, wc, nil, nil, r)
		}
		for k := range s {
			if math.Float64bits(s[k]) != math.Float64bits(ws[k]) || math.Float64bits(cc[k]) != math.Float64bits(wc[k]) {
				t.Fatalf("%+v: column %d: %v + %v, row by row %v + %v", c, k, s[k], cc[k], ws[k], wc[k])
			}
		}
	}
}

// BenchmarkSumRows sums a bias gradient's [4160, 768] over its rows, four
// rows at a time and row by row.
func BenchmarkSumRows(b *testing.B) {
	const n, m = 4160, 768
	x := make([]float32, n*m)
	for i := range x {
		x[i] = float32(i%97) * 0.01
	}
	rd := &reduction{kept: backend.Shape{m}, keptStrides: []int{1}, red: backend.Shape{n}, redStrides: []int{m}, k: m, r: n}
	b.Run("rows4", func(b *testing.B) {
		if !hasColumns4Vec() {
			b.Skip("no four-row kernel on this CPU")
		}
		b.SetBytes(n * m * 4)
		for b.Loop() {
			sumRows4(rd, x, make([]float64, m), make([]float64, m))
		}
	})
	b.Run("rowByRow", func(b *testing.B) {
		b.SetBytes(n * m * 4)
		for b.Loop() {
			s, c := make([]float64, m), make([]float64, m)
			parallelFor(m, max(1, grainElems/n), func(k0, k1 int) {
				for r := range n {
					sweepColumns(passSum, x, r*m+k0, 1, s[k0:k1], c[k0:k1], nil, nil, r)
				}
			})
		}
	})
}
