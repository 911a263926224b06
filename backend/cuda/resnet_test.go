package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// The gradient checks below narrow TestTrainStepsMatchCPU/resnet50 down to
// an op: the gradients of every ResNet-50 parameter after one backward
// pass, and those of each op the network uses, at the shapes it uses them,
// GPU against CPU from the same inputs.

// relErr is ‖a − b‖/‖b‖ (‖a − b‖ when b is 0).
func relErr(a, b []float64) float64 {
	var d, n float64
	for i := range b {
		d += (a[i] - b[i]) * (a[i] - b[i])
		n += b[i] * b[i]
	}
	if n == 0 {
		return math.Sqrt(d)
	}
	return math.Sqrt(d / n)
}

// resnetGradients runs ResNet-50's forward and backward pass on dev, with
// the model, batch and labels of TestTrainStepsMatchCPU, and returns the
// loss and each parameter's name and gradient.
func resnetGradients(t *testing.T, dev backend.Backend) (loss float64, names []string, grads [][]float64) {
	t.Helper()
	prev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(dev)
	defer tensor.SetDefaultDevice(prev)
	const batch, seed = 8, 7
	cfg := models.Config{InChannels: 3, Height: 64, Width: 64, NumClasses: 10}
	g := tensor.NewGenerator(seed)
	model, err := models.Build("resnet50", cfg, g)
	if err != nil {
		t.Fatal(err)
	}
	defer model.Release()
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	labels := make([]int64, batch)
	for i := range labels {
		labels[i] = int64(r.IntN(cfg.NumClasses))
	}
	lt := tensor.FromSlice(labels, tensor.Shape{batch})
	defer lt.Release()
	x := autograd.Const(g.Randn(tensor.Shape{batch, cfg.InChannels, cfg.Height, cfg.Width}))
	defer x.Release()
	logits := model.Forward(x)
	defer logits.Release()
	l := nn.CrossEntropyLoss{}.Forward(logits, lt)
	defer l.Release()
	loss = l.Value.Item()
	l.Backward()
	for _, p := range model.NamedParameters() {
		names = append(names, p.Name)
		if p.Param.Grad() == nil {
			grads = append(grads, make([]float64, p.Param.Value.NumElements()))
			continue
		}
		grads = append(grads, p.Param.Grad().Float64s())
	}
	return loss, names, grads
}

// TestResNetGradientsMatchCPU compares the gradient of every ResNet-50
// parameter after one backward pass on the GPU with the CPU's. The
// parameters are taken from the output back, as the backward pass meets
// them: the first one that differs is the one nearest the op at fault.
func TestResNetGradientsMatchCPU(t *testing.T) {
	g := gpu(t)
	wantLoss, names, want := resnetGradients(t, cpu.New())
	gotLoss, _, got := resnetGradients(t, g)
	t.Logf("loss %v on the GPU, %v on the CPU", gotLoss, wantLoss)
	const tol = 1e-3
	type bad struct {
		i   int
		err float64
	}
	var bads []bad
	for i := len(names) - 1; i >= 0; i-- {
		e := relErr(got[i], want[i])
		if math.IsNaN(e) || e > tol {
			bads = append(bads, bad{i, e})
		}
	}
	if len(bads) == 0 {
		return
	}
	first := bads[0]
	t.Errorf("%d of %d parameter gradients differ by more than %g; the first from the output: %s (relative error %.3g)",
		len(bads), len(names), tol, names[first.i], first.err)
	sort.SliceStable(bads, func(a, b int) bool { return bads[a].err > bads[b].err })
	for _, b := range bads[:min(len(bads), 12)] {
		t.Logf("  %-40s relative error %.3g", names[b.i], b.err)
	}
}

// opCase is one op of ResNet-50 at one of its shapes: f maps the inputs
// (drawn from N(0, 1), all differentiable) to an output whose gradient is
// drawn as well.
type opCase struct {
	name   string
	shapes []tensor.Shape
	f      func(in []*autograd.Var) *autograd.Var
}

// runOp returns the output of c and the gradients of its inputs on dev.
func runOp(dev backend.Backend, c opCase, seed uint64) (out []float64, grads [][]float64) {
	prev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(cpu.Default())
	gen := tensor.NewGenerator(seed)
	host := make([]*tensor.Tensor, len(c.shapes))
	for i, s := range c.shapes {
		host[i] = gen.Randn(s)
	}
	tensor.SetDefaultDevice(dev)
	defer tensor.SetDefaultDevice(prev)
	in := make([]*autograd.Var, len(host))
	for i, h := range host {
		in[i] = autograd.Param(h.To(dev))
		h.Release()
		defer in[i].Release()
	}
	y := c.f(in)
	defer y.Release()
	prevDev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(cpu.Default())
	r := gen.Randn(y.Value.Shape())
	tensor.SetDefaultDevice(prevDev)
	rd := autograd.Const(r.To(dev))
	r.Release()
	defer rd.Release()
	l := autograd.Sum(autograd.Mul(y, rd))
	defer l.Release()
	l.Backward()
	out = y.Value.Float64s()
	for _, v := range in {
		grads = append(grads, v.Grad().Float64s())
	}
	return out, grads
}

// resnetOps are the ops of ResNet-50 at the shapes of TestTrainStepsMatchCPU
// (batch 8, 64×64 images): the stem, a bottleneck's convolutions with and
// without stride, the downsampling shortcut, batch norm over many values
// (split into groups on the GPU) and over few, the residual sum and the
// average pool.
func resnetOps() []opCase {
	conv := func(s, p int) func(in []*autograd.Var) *autograd.Var {
		return func(in []*autograd.Var) *autograd.Var {
			return autograd.Conv2d(in[0], in[1], nil, tensor.ConvParams{StrideH: s, StrideW: s, PadH: p, PadW: p,
				DilationH: 1, DilationW: 1, Groups: 1})
		}
	}
	bn := func(relu bool) func(in []*autograd.Var) *autograd.Var {
		return func(in []*autograd.Var) *autograd.Var {
			p := tensor.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
			if relu {
				return autograd.BatchNormReLU(in[0], in[1], in[2], nil, nil, p)
			}
			return autograd.BatchNorm(in[0], in[1], in[2], nil, nil, p)
		}
	}
	sh := func(d ...int) tensor.Shape { return tensor.Shape(d) }
	return []opCase{
		{"conv 7×7/2 stem", []tensor.Shape{sh(8, 3, 64, 64), sh(64, 3, 7, 7)}, conv(2, 3)},
		{"conv 1×1 layer1", []tensor.Shape{sh(8, 64, 16, 16), sh(64, 64, 1, 1)}, conv(1, 0)},
		{"conv 3×3 layer1", []tensor.Shape{sh(8, 64, 16, 16), sh(64, 64, 3, 3)}, conv(1, 1)},
		{"conv 1×1 expand", []tensor.Shape{sh(8, 64, 16, 16), sh(256, 64, 1, 1)}, conv(1, 0)},
		{"conv 3×3/2 layer2", []tensor.Shape{sh(8, 128, 16, 16), sh(128, 128, 3, 3)}, conv(2, 1)},
		{"conv 1×1/2 downsample", []tensor.Shape{sh(8, 256, 16, 16), sh(512, 256, 1, 1)}, conv(2, 0)},
		{"conv 3×3/2 layer4", []tensor.Shape{sh(8, 512, 4, 4), sh(512, 512, 3, 3)}, conv(2, 1)},
		{"conv 1×1 layer4", []tensor.Shape{sh(8, 512, 2, 2), sh(2048, 512, 1, 1)}, conv(1, 0)},
		{"batch norm + ReLU stem", []tensor.Shape{sh(8, 64, 32, 32), sh(64), sh(64)}, bn(true)},
		{"batch norm stem", []tensor.Shape{sh(8, 64, 32, 32), sh(64), sh(64)}, bn(false)},
		{"batch norm + ReLU layer1", []tensor.Shape{sh(8, 64, 16, 16), sh(64), sh(64)}, bn(true)},
		{"batch norm layer4", []tensor.Shape{sh(8, 2048, 2, 2), sh(2048), sh(2048)}, bn(false)},
		{"max pool 3×3/2", []tensor.Shape{sh(8, 64, 32, 32)}, func(in []*autograd.Var) *autograd.Var {
			return autograd.MaxPool2d(in[0], tensor.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2,
				PadH: 1, PadW: 1, DilationH: 1, DilationW: 1})
		}},
		{"residual sum + ReLU", []tensor.Shape{sh(8, 256, 16, 16), sh(8, 256, 16, 16)}, func(in []*autograd.Var) *autograd.Var {
			return autograd.ReLU(autograd.Add(in[0], in[1]))
		}},
		{"input used twice", []tensor.Shape{sh(8, 64, 16, 16), sh(64, 64, 1, 1), sh(64, 64, 1, 1)}, func(in []*autograd.Var) *autograd.Var {
			p := tensor.ConvParams{StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1}
			return autograd.Add(autograd.Conv2d(in[0], in[1], nil, p), autograd.Conv2d(in[0], in[2], nil, p))
		}},
		{"average pool", []tensor.Shape{sh(8, 2048, 2, 2)}, func(in []*autograd.Var) *autograd.Var {
			return autograd.Mean(in[0], 2, 3)
		}},
	}
}

// compareOps runs every op of resnetOps on dev and on ref and reports each
// output or gradient whose relative difference exceeds 1e-4.
func compareOps(t *testing.T, dev, ref backend.Backend) {
	for i, c := range resnetOps() {
		t.Run(c.name, func(t *testing.T) {
			want, wantG := runOp(ref, c, uint64(100+i))
			got, gotG := runOp(dev, c, uint64(100+i))
			const tol = 1e-4
			check := func(what string, a, b []float64) {
				if e := relErr(a, b); math.IsNaN(e) || e > tol {
					t.Errorf("%s: relative error %.3g", what, e)
				}
			}
			check("output", got, want)
			for j := range wantG {
				check(fmt.Sprintf("gradient of input %d %v", j, c.shapes[j]), gotG[j], wantG[j])
			}
		})
	}
}

// TestResNetOpsMatchCPU compares the output and input gradients of each op
// of ResNet-50, at its shapes there, on the GPU with the CPU's.
func TestResNetOpsMatchCPU(t *testing.T) {
	compareOps(t, gpu(t), cpu.New())
}
