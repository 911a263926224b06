package nn_test

import (
	"fmt"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// A two-layer perceptron: its parameters are named as in PyTorch's
// nn.Sequential, and one forward and backward pass fills their gradients.
func Example() {
	g := tensor.NewGenerator(1)
	model := nn.NewSequential(
		nn.NewLinear(784, 128, true, g),
		nn.NewReLU(),
		nn.NewDropout(0.1, g),
		nn.NewLinear(128, 10, true, g),
	)
	defer model.Release()

	for _, p := range model.NamedParameters() {
		fmt.Println(p.Name, p.Param.Shape())
	}
	fmt.Println("parameters:", nn.NumParameters(model))

	x := autograd.Const(g.Randn(tensor.Shape{32, 784}))
	defer x.Release()
	labels := tensor.Zeros(tensor.Shape{32}, tensor.Of(tensor.Int64))
	defer labels.Release()

	logits := model.Forward(x)
	defer logits.Release()
	loss := nn.NewCrossEntropyLoss(0.1).Forward(logits, labels)
	defer loss.Release()
	loss.Backward()
	fmt.Println("logits:", logits.Shape(), "gradient of 3.bias:", model.NamedParameters()[3].Param.Grad().Shape())
	// Output:
	// 0.weight [128 784]
	// 0.bias [128]
	// 3.weight [10 128]
	// 3.bias [10]
	// parameters: 101770
	// logits: [32 10] gradient of 3.bias: [10]
}
