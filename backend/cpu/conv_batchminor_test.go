package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvBatchMinor checks the batch-minor lowering (forward pass, data
// and weight gradients) against the column-matrix lowering on shapes that
// cover its edges: output channels over one block, batches not a multiple
// of the kernels' columns, batches taken in several chunks, kernels wider
// than the plane (positions with few taps inside), non-square kernels and
// planes, and padding of rows only.
func TestConvBatchMinor(t *testing.T) {
	if KernelPath() != "avx512" {
		t.Skip("the batch-minor lowering runs on the AVX-512 path")
	}
	cases := []convShape{
		{n: 33, c: 20, h: 4, w: 4, o: 30, kh: 3, kw: 3, ph: 1, pw: 1},
		{n: 32, c: 16, h: 3, w: 5, o: 400, kh: 3, kw: 3, ph: 1, pw: 1},
		{n: 40, c: 24, h: 6, w: 6, o: 17, kh: 5, kw: 5, ph: 2, pw: 2},
		{n: 32, c: 16, h: 5, w: 4, o: 16, kh: 3, kw: 1, ph: 1, pw: 0},
		{n: 35, c: 17, h: 2, w: 2, o: 19, kh: 5, kw: 5, ph: 2, pw: 2},
		{n: 2*convBatchMinorMaxN + 5, c: 16, h: 3, w: 3, o: 20, kh: 3, kw: 3, ph: 1, pw: 1}, // three chunks
	}
	savedMinor, savedWeight, savedDirect := convBatchMinorPlanes, convBatchMinorWeightPlanes, convDirectPlanes
	t.Cleanup(func() {
		convBatchMinorPlanes, convBatchMinorWeightPlanes, convDirectPlanes = savedMinor, savedWeight, savedDirect
	})
	convDirectPlanes = func(int) bool { return false }
	r := rand.New(rand.NewPCG(7, 8))
	fill := func(n int) []float32 { return randF32(r, n, -1, 1, false) }
	for _, s := range cases {
		s = unitStrides(s)
		name := fmt.Sprintf("x[%d %d %d %d]/w[%d %d %d %d]/p%d,%d", s.n, s.c, s.h, s.w, s.o, s.cg, s.kh, s.kw, s.ph, s.pw)
		x, w, dy := fill(s.n*s.c*s.h*s.w+3), fill(s.o*s.cg*s.kh*s.kw+2), fill(s.n*s.o*s.oh*s.ow+1)
		run := func(minor bool) (y, dx, dw []float32) {
			convBatchMinorPlanes = func(int) bool { return minor }
			convBatchMinorWeightPlanes = convBatchMinorPlanes
			if tr, _ := s.transposed(); s.batchMinor() != minor || tr.batchMinor() != minor || s.batchMinorWeight() != minor {
				t.Fatalf("%s: batchMinor() does not follow the policy", name)
			}
			y, dx = make([]float32, len(dy)), make([]float32, len(x))
			for i := range y {
				y[i] = float32(math.NaN()) // every element must be written
			}
			convForward(&s, 3, 2, 1, x, w, y)
			convBackwardDataVia(&s, 3, 2, 1, dx, w, dy)
			dw = make([]float32, len(w))
			convBackwardWeight(&s, 3, 2, 1, x, dw, dy)
			return y, dx, dw
		}
		wantY, wantDx, wantDw := run(false)
		gotY, gotDx, gotDw := run(true)
		tol := 1e-5 * float64(s.cg*s.kh*s.kw)
		for i := range wantDw[2:] {
			if d := math.Abs(float64(gotDw[2+i] - wantDw[2+i])); !(d <= 1e-5*float64(s.n*s.oh*s.ow)) {
				t.Fatalf("%s: weight gradient [%d] = %v, want %v", name, i, gotDw[2+i], wantDw[2+i])
			}
		}
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"forward", gotY[1:], wantY[1:]}, {"data gradient", gotDx[3:], wantDx[3:]}} {
			for i := range c.want {
				if d := math.Abs(float64(c.got[i] - c.want[i])); !(d <= tol) {
					t.Fatalf("%s: %s [%d] = %v, want %v", name, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
}
