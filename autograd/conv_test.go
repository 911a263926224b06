package autograd_test

import (
	"fmt"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

func TestConv2dGrad(t *testing.T) {
	cases := []struct {
		name   string
		x, w   []int
		p      tensor.ConvParams
		nobias bool
	}{
		{name: "plain", x: []int{2, 3, 5, 5}, w: []int{4, 3, 3, 3}, p: tensor.ConvParams{StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1}},
		{name: "zero params are defaults", x: []int{1, 2, 4, 3}, w: []int{2, 2, 2, 2}},
		{name: "stride 2 pad 1", x: []int{1, 2, 6, 5}, w: []int{3, 2, 3, 2}, p: tensor.ConvParams{StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 1}},
		{name: "uneven stride and pad", x: []int{2, 1, 7, 6}, w: []int{2, 1, 3, 3}, p: tensor.ConvParams{StrideH: 3, StrideW: 2, PadH: 2, PadW: 0, DilationH: 1, DilationW: 1, Groups: 1}},
		{name: "dilation 2", x: []int{1, 2, 7, 7}, w: []int{2, 2, 3, 3}, p: tensor.ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 2, DilationH: 2, DilationW: 2, Groups: 1}},
		{name: "groups 2", x: []int{2, 4, 5, 5}, w: []int{6, 2, 3, 3}, p: tensor.ConvParams{StrideH: 1, StrideW: 2, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 2}},
		{name: "depthwise", x: []int{1, 3, 5, 4}, w: []int{3, 1, 3, 3}, p: tensor.ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 3}},
		{name: "1x1 no bias", x: []int{2, 3, 3, 3}, w: []int{5, 3, 1, 1}, p: tensor.ConvParams{StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1}, nobias: true},
	}
	var gc []gradCase
	for i, c := range cases {
		s := uint64(100 * i)
		in := []*tensor.Tensor{normal(s+1, c.x...), normal(s+2, c.w...)}
		f := func(xs []*autograd.Var) *autograd.Var { return autograd.Conv2d(xs[0], xs[1], nil, c.p) }
		if !c.nobias {
			in = append(in, normal(s+3, c.w[0]))
			f = func(xs []*autograd.Var) *autograd.Var { return autograd.Conv2d(xs[0], xs[1], xs[2], c.p) }
		}
		gc = append(gc, gradCase{name: c.name, inputs: in, f: f})
	}
	runGradCases(t, gc)
}

// TestConv2dBias checks that the bias is added per output channel.
func TestConv2dBias(t *testing.T) {
	x := autograd.Const(normal(1, 1, 2, 4, 4))
	w := autograd.Const(normal(2, 3, 2, 3, 3))
	b := autograd.Const(tensor.FromSlice([]float64{1, -2, 0.5}, nil))
	defer x.Release()
	defer w.Release()
	defer b.Release()
	p := tensor.ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 1}
	y := autograd.Conv2d(x, w, b, p)
	defer y.Release()
	y0 := autograd.Conv2d(x, w, nil, p)
	defer y0.Release()
	got, base := y.Value.Float64s(), y0.Value.Float64s()
	bias := []float64{1, -2, 0.5}
	for i := range got {
		if want := base[i] + bias[i/16]; got[i] != want {
			t.Fatalf("element %d: %v, want %v", i, got[i], want)
		}
	}
}

func TestPool2dGrad(t *testing.T) {
	cases := []struct {
		name string
		op   string
		x    []int
		p    tensor.PoolParams
	}{
		{name: "2x2", x: []int{2, 2, 4, 4}, p: tensor.PoolParams{KernelH: 2, KernelW: 2}},
		{name: "3x3 stride 2 pad 1", x: []int{1, 2, 5, 6}, p: tensor.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1}},
		{name: "overlapping 3x2 stride 1", x: []int{1, 1, 4, 5}, p: tensor.PoolParams{KernelH: 3, KernelW: 2, StrideH: 1, StrideW: 1}},
		{name: "ceil mode", x: []int{1, 2, 5, 5}, p: tensor.PoolParams{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2, CeilMode: true}},
		{name: "ceil mode pad 1", x: []int{2, 1, 6, 5}, p: tensor.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, CeilMode: true}},
		{name: "count include pad", x: []int{1, 2, 5, 5}, p: tensor.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, CountIncludePad: true}},
		{name: "count include pad ceil", x: []int{1, 1, 6, 6}, p: tensor.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, CountIncludePad: true, CeilMode: true}},
	}
	var gc []gradCase
	for i, c := range cases {
		gc = append(gc, gradCase{
			name:   "avg/" + c.name,
			inputs: []*tensor.Tensor{normal(uint64(i+1), c.x...)},
			f:      func(xs []*autograd.Var) *autograd.Var { return autograd.AvgPool2d(xs[0], c.p) },
		})
		if c.p.CountIncludePad {
			continue
		}
		gc = append(gc, gradCase{
			name:   "max/" + c.name,
			inputs: []*tensor.Tensor{normal(uint64(i+50), c.x...)},
			f:      func(xs []*autograd.Var) *autograd.Var { return autograd.MaxPool2d(xs[0], c.p) },
		})
	}
	dil := tensor.PoolParams{KernelH: 2, KernelW: 2, StrideH: 1, StrideW: 1, DilationH: 2, DilationW: 2}
	gc = append(gc, gradCase{
		name:   fmt.Sprintf("max/dilation %d", dil.DilationH),
		inputs: []*tensor.Tensor{normal(99, 1, 2, 5, 5)},
		f:      func(xs []*autograd.Var) *autograd.Var { return autograd.MaxPool2d(xs[0], dil) },
	})
	runGradCases(t, gc)
}

// TestMaxPool2dGradRoutes checks where max pooling sends the gradient: to
// each window's maximum, summed where windows overlap on one maximum.
func TestMaxPool2dGradRoutes(t *testing.T) {
	// 1×1×3×3 input with its maximum in the centre: every 2×2 window of
	// stride 1 picks it.
	x := autograd.Param(tensor.FromSlice([]float64{1, 2, 3, 4, 9, 5, 6, 7, 8}, tensor.Shape{1, 1, 3, 3}))
	defer x.Release()
	y := autograd.MaxPool2d(x, tensor.PoolParams{KernelH: 2, KernelW: 2, StrideH: 1, StrideW: 1})
	defer y.Release()
	g := tensor.FromSlice([]float64{1, 10, 100, 1000}, tensor.Shape{1, 1, 2, 2})
	defer g.Release()
	y.BackwardWith(g)
	want := []float64{0, 0, 0, 0, 1111, 0, 0, 0, 0}
	for i, v := range x.Grad().Float64s() {
		if v != want[i] {
			t.Fatalf("gradient %v, want %v", x.Grad().Float64s(), want)
		}
	}
}
