package optim_test

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// Minimise ‖w − target‖² with SGD and Nesterov momentum under a warm-up and
// cosine schedule, clipping the gradient to norm 1.
func Example() {
	target := autograd.Const(tensor.FromSlice([]float64{3, -1, 2}, tensor.Shape{3}))
	defer target.Release()
	w := autograd.Param(tensor.Zeros(tensor.Shape{3}, tensor.Of(tensor.Float64)))
	defer w.Release()

	opt := optim.NewSGD([]*optim.Group{optim.NewGroup([]*autograd.Var{w}, []string{"w"}, 0.1, 0)},
		optim.SGDOptions{Momentum: 0.9, Nesterov: true})
	sched := optim.Schedule{Base: 0.1, Decay: optim.Cosine, WarmupSteps: 5, WarmupStart: 0.2, TotalSteps: 60, Final: 1e-3}
	if err := sched.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	for step := range 60 {
		diff := autograd.Sub(w, target)
		sq := autograd.Square(diff)
		loss := autograd.Sum(sq)
		loss.Backward()
		norm := optim.ClipGradNorm([]*autograd.Var{w}, 1)
		opt.SetLR(sched.LR(step))
		opt.Step()
		opt.ZeroGrad()
		if step%15 == 0 {
			fmt.Printf("step %2d: lr %.4f, loss %.2e, gradient norm %.3f\n", step, sched.LR(step), loss.Value.Item(), norm)
		}
		for _, v := range []*autograd.Var{diff, sq, loss} {
			v.Release()
		}
	}
	fmt.Printf("w = %.3f\n", w.Value.Float64s())
	// Output:
	// step  0: lr 0.0200, loss 1.40e+01, gradient norm 7.483
	// step 15: lr 0.0921, loss 7.86e-01, gradient norm 1.773
	// step 30: lr 0.0575, loss 1.07e-02, gradient norm 0.207
	// step 45: lr 0.0181, loss 3.78e-04, gradient norm 0.039
	// w = [3.000 -1.000 2.000]
}
