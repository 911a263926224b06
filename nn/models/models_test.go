package models_test

import (
	"fmt"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// The parameter counts of the same networks in PyTorch: Linear(i, o) has
// i·o + o, Conv2d(i, o, 3) has 9·i·o + o.
func TestParameterCounts(t *testing.T) {
	lin := func(i, o int) int { return i*o + o }
	conv := func(i, o int) int { return 9*i*o + o }
	want := map[string]int{
		"mlp": lin(784, 256) + lin(256, 256) + lin(256, 10),
		"cnn": conv(1, 16) + conv(16, 32) + lin(32*7*7, 64) + lin(64, 10),
	}
	for name, want := range want {
		m, err := models.Build(name, models.FashionMNIST, tensor.NewGenerator(1))
		if err != nil {
			t.Fatal(err)
		}
		if got := nn.NumParameters(m); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
		m.Release()
	}
}

// TestFashionMNISTForward builds one member of each family for 1-channel
// 28×28 inputs and checks the shape of its logits.
func TestFashionMNISTForward(t *testing.T) {
	for _, name := range []string{"mlp", "cnn", "resnet20", "resnet18", "vit_tiny_p4"} {
		m, err := models.Build(name, models.FashionMNIST, tensor.NewGenerator(1))
		if err != nil {
			t.Fatal(err)
		}
		x := autograd.Const(tensor.Zeros(tensor.Shape{3, 1, 28, 28}))
		y := m.Forward(x)
		if !y.Shape().Equal(tensor.Shape{3, 10}) {
			t.Errorf("%s: output shape %v, want [3 10]", name, y.Shape())
		}
		y.Release()
		x.Release()
		m.Release()
	}
}

func TestBuildErrors(t *testing.T) {
	if _, err := models.Build("resnet9000", models.FashionMNIST, tensor.NewGenerator(1)); err == nil {
		t.Error("unknown model built")
	}
	if _, err := models.Build("cnn", models.Config{InChannels: 1, Height: 30, Width: 30, NumClasses: 10}, tensor.NewGenerator(1)); err == nil {
		t.Error("cnn built for 30×30 inputs")
	}
}

func Example() {
	m, err := models.Build("cnn", models.FashionMNIST, tensor.NewGenerator(0))
	if err != nil {
		panic(err)
	}
	defer m.Release()
	for _, p := range m.NamedParameters() {
		fmt.Println(p.Name, p.Param.Shape())
	}
	fmt.Println(nn.NumParameters(m))
	// Output:
	// 0.weight [16 1 3 3]
	// 0.bias [16]
	// 3.weight [32 16 3 3]
	// 3.bias [32]
	// 7.weight [64 1568]
	// 7.bias [64]
	// 9.weight [10 64]
	// 9.bias [10]
	// 105866
}
