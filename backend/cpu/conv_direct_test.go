package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvDirect checks the direct convolution (forward pass and data
// gradient) against the column-matrix lowering on shapes that cover its
// edges: vectors past the end of a plane, an odd number of them, planes
// smaller than a vector, channels not a multiple of the unrolling, output
// channels not a multiple of the tile's rows and blocks of several panels,
// groups, non-square kernels and padding of rows only.
func TestConvDirect(t *testing.T) {
	if convDirectKernels == nil || KernelPath() != "avx512" {
		t.Skip("the direct convolution needs the AVX-512 path")
	}
	cases := []convShape{
		{n: 3, c: 18, h: 5, w: 7, o: 30, kh: 3, kw: 3, ph: 1, pw: 1},
		{n: 2, c: 32, h: 6, w: 9, o: 40, kh: 5, kw: 3, ph: 2, pw: 1, groups: 2},
		{n: 1, c: 16, h: 3, w: 3, o: 17, kh: 3, kw: 3, ph: 1, pw: 1},
		{n: 2, c: 16, h: 7, w: 10, o: 16, kh: 3, kw: 3, ph: 0, pw: 1},
		{n: 5, c: 64, h: 4, w: 4, o: 150, kh: 3, kw: 3, ph: 1, pw: 1},
		{n: 2, c: 20, h: 8, w: 8, o: 29, kh: 1, kw: 3, ph: 0, pw: 1},
	}
	saved, savedBlock := convDirectPlanes, convDirectBlockBytes
	t.Cleanup(func() { convDirectPlanes, convDirectBlockBytes = saved, savedBlock })
	convDirectBlockBytes = 64 << 10 // several blocks of panels
	r := rand.New(rand.NewPCG(5, 6))
	fill := func(n int) []float32 { return randF32(r, n, -1, 1, false) }
	for _, s := range cases {
		s = unitStrides(s)
		name := fmt.Sprintf("x[%d %d %d %d]/w[%d %d %d %d]/p%d,%d/g%d", s.n, s.c, s.h, s.w, s.o, s.cg, s.kh, s.kw, s.ph, s.pw, s.groups)
		x, w, dy := fill(s.n*s.c*s.h*s.w+3), fill(s.o*s.cg*s.kh*s.kw+2), fill(s.n*s.o*s.oh*s.ow+1)
		run := func(direct bool) (y, dx []float32) {
			convDirectPlanes = func(int) bool { return direct }
			if tr, _ := s.transposed(); s.direct() != direct || tr.direct() != (direct && tr.cg >= convDirectMinChannels) {
				t.Fatalf("%s: direct() does not follow the policy", name)
			}
			y, dx = make([]float32, len(dy)), make([]float32, len(x))
			convForward(&s, 3, 2, 1, x, w, y)
			convBackwardDataVia(&s, 3, 2, 1, dx, w, dy)
			return y, dx
		}
		wantY, wantDx := run(false)
		gotY, gotDx := run(true)
		tol := 1e-5 * float64(s.cg*s.kh*s.kw)
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"forward", gotY, wantY}, {"data gradient", gotDx, wantDx}} {
			for i := range c.want {
				if d := math.Abs(float64(c.got[i] - c.want[i])); !(d <= tol) {
					t.Fatalf("%s: %s [%d] = %v, want %v", name, c.what, i, c.got[i], c.want[i])
				}
			}
		}
	}
}

// unitStrides completes a test's convolution of unit strides and
// dilations: groups (at least 1), channels per group and output size.
func unitStrides(s convShape) convShape {
	s.sh, s.sw, s.dh, s.dw = 1, 1, 1, 1
	s.groups = max(1, s.groups)
	s.cg, s.og = s.c/s.groups, s.o/s.groups
	s.oh, s.ow = s.h+2*s.ph-s.kh+1, s.w+2*s.pw-s.kw+1
	return s
}
