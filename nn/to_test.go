package nn_test

import (
	"slices"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// TestTo moves a network with a batch norm to another device: every
// parameter and buffer lands there with its name, value and whether it
// requires a gradient (the batch norm's own fields included, which are its
// registered buffers), the network computes there what it computed before,
// and moving to the device it is on changes nothing.
func TestTo(t *testing.T) {
	g := tensor.NewGenerator(1)
	net := nn.NewSequential(nn.NewConv2d(2, 3, 3, nn.Conv2dOptions{Padding: 1}, g), nn.NewBatchNorm2d(3, nn.BatchNormOptions{}), nn.NewReLU())
	defer net.Release()
	net.Layers[0].(*nn.Conv2d).Bias.SetRequiresGrad(false)
	x := g.Randn(tensor.Shape{2, 2, 4, 4})
	defer x.Release()
	nn.Eval(net)
	before := forwardValues(net, x)
	names := map[string][]float32{}
	grads := map[string]bool{}
	for _, p := range net.NamedParameters() {
		names[p.Name], grads[p.Name] = slices.Clone(p.Param.Value.Float32s()), p.Param.RequiresGrad()
	}
	for _, b := range net.NamedBuffers() {
		names[b.Name] = slices.Clone(tensor.ToSlice[float32](b.Buffer))
	}

	other := cpu.New()
	net.To(other)
	for _, p := range net.NamedParameters() {
		if p.Param.Value.Device() != other || !slices.Equal(p.Param.Value.Float32s(), names[p.Name]) || p.Param.RequiresGrad() != grads[p.Name] {
			t.Errorf("parameter %s: on %v, requires grad %v, changed %v", p.Name, p.Param.Value.Device(), p.Param.RequiresGrad(), !slices.Equal(p.Param.Value.Float32s(), names[p.Name]))
		}
	}
	for _, b := range net.NamedBuffers() {
		if b.Buffer.Device() != other || !slices.Equal(tensor.ToSlice[float32](b.Buffer), names[b.Name]) {
			t.Errorf("buffer %s: on %v, values changed %v", b.Name, b.Buffer.Device(), !slices.Equal(tensor.ToSlice[float32](b.Buffer), names[b.Name]))
		}
	}
	if bn := net.Layers[1].(*nn.BatchNorm2d); bn.RunningMean.Device() != other {
		t.Errorf("the batch norm's running mean stayed on %v", bn.RunningMean.Device())
	}
	xo := x.To(other)
	defer xo.Release()
	if after := forwardValues(net, xo); !slices.Equal(after, before) {
		t.Errorf("the moved network computes %v, before %v", after, before)
	}
	net.To(other)
	if after := forwardValues(net, xo); !slices.Equal(after, before) {
		t.Errorf("moving to the same device changed the output")
	}
}

func forwardValues(net nn.Layer, x *tensor.Tensor) []float32 {
	var out []float32
	autograd.NoGrad(func() {
		in := autograd.Const(x.Retain())
		y := net.Forward(in)
		out = tensor.ToSlice[float32](y.Value)
		y.Release()
		in.Release()
	})
	return out
}
