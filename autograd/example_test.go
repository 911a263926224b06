package autograd_test

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Fit y = 2x + 1 by gradient descent on a linear layer.
func Example() {
	x := autograd.Const(tensor.FromSlice([]float32{0, 1, 2, 3}, tensor.Shape{4, 1}))
	y := autograd.Const(tensor.FromSlice([]float32{1, 3, 5, 7}, tensor.Shape{4, 1}))
	w := autograd.Param(tensor.Zeros(tensor.Shape{1, 1}))
	b := autograd.Param(tensor.Zeros(tensor.Shape{1}))
	for step := 0; step < 500; step++ {
		pred := autograd.Linear(x, w, b)
		diff := autograd.Sub(pred, y)
		loss := autograd.Mean(autograd.Square(diff))
		loss.Backward()
		for _, p := range []*autograd.Var{w, b} {
			p.Value.AddScaledInPlace(-0.1, p.Grad())
			p.ZeroGrad()
		}
		for _, v := range []*autograd.Var{pred, diff, loss} {
			v.Release()
		}
	}
	fmt.Printf("w=%.3f b=%.3f\n", w.Value.Item(), b.Value.Item())
	// Output: w=2.000 b=1.000
}
