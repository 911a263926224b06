package train_test

import (
	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// tinyConfig is a run of 3 epochs of 6 steps on synthetic(96, 3, ·).
func tinyConfig() train.Config {
	cfg := train.DefaultConfig()
	cfg.Model = "mlp"
	cfg.Epochs = 3
	cfg.BatchSize = 16
	cfg.LR = 0.05
	cfg.WarmupEpochs = 0.5
	cfg.LogEvery = 1
	cfg.EvalBatchSize = 20
	return cfg
}

// forward returns the model's output for x, computed without recording
// gradients.
func forward(m nn.Layer, x *tensor.Tensor) *tensor.Tensor {
	var out *tensor.Tensor
	autograd.NoGrad(func() {
		in := autograd.Const(x.Retain())
		y := m.Forward(in)
		out = y.Value.Retain()
		y.Release()
		in.Release()
	})
	return out
}
