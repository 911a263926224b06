package nn

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// The golden files come from testdata/golden/gen_nn.py (PyTorch, float64).
// A case NAME holds NAME/state/<key>, NAME/input, NAME/output,
// NAME/grad_output, NAME/grad/input, NAME/grad/<param> and, for modules with
// buffers, NAME/state_after/<key>.

func goldenPath(file string) string {
	return filepath.Join("..", "testdata", "golden", "nn_"+file+".safetensors")
}

// loadGolden returns the tensors of case name in file, with the "name/"
// prefix removed, in their stored dtypes.
func loadGolden(t *testing.T, file, name string) map[string]*tensor.Tensor {
	t.Helper()
	all, err := safetensors.LoadTensors(goldenPath(file))
	if err != nil {
		t.Fatalf("load golden file: %v", err)
	}
	out := map[string]*tensor.Tensor{}
	for k, v := range all {
		if rest, ok := strings.CutPrefix(k, name+"/"); ok {
			out[rest] = v
		} else {
			v.Release()
		}
	}
	if len(out) == 0 {
		t.Fatalf("no case %q in %s", name, goldenPath(file))
	}
	return out
}

// subDict returns the entries of m under prefix, without it.
func subDict(m map[string]*tensor.Tensor, prefix string) map[string]*tensor.Tensor {
	out := map[string]*tensor.Tensor{}
	for k, v := range m {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// tolerance is |got − want| ≤ atol + rtol·|want|, elementwise.
type tolerance struct{ rtol, atol float64 }

// tol64 allows for the different summation orders of two float64
// implementations; tol32 for float32 rounding, about 6e-8 relative per
// operation, accumulated over sums of up to a few hundred terms of size
// O(1) (the largest differences seen are below 1e-6).
var (
	tol64 = tolerance{1e-9, 1e-11}
	tol32 = tolerance{1e-5, 2e-6}
)

func tolFor(dt tensor.DType) tolerance {
	if dt == tensor.Float64 {
		return tol64
	}
	return tol32
}

// compare reports the first element where got and want differ by more than
// tol (NaNs must match).
func compare(what string, got, want *tensor.Tensor, tol tolerance) error {
	if !got.Shape().Equal(want.Shape()) {
		return fmt.Errorf("%s: shape %v, want %v", what, got.Shape(), want.Shape())
	}
	g, w := got.Float64s(), want.Float64s()
	worst, at := 0.0, -1
	for i := range g {
		if math.IsNaN(w[i]) || math.IsNaN(g[i]) {
			if math.IsNaN(w[i]) != math.IsNaN(g[i]) {
				return fmt.Errorf("%s[%d] = %v, want %v", what, i, g[i], w[i])
			}
			continue
		}
		if math.IsInf(w[i], 0) {
			if g[i] != w[i] {
				return fmt.Errorf("%s[%d] = %v, want %v", what, i, g[i], w[i])
			}
			continue
		}
		d := math.Abs(g[i] - w[i])
		if d > tol.atol+tol.rtol*math.Abs(w[i]) && d > worst {
			worst, at = d, i
		}
	}
	if at >= 0 {
		return fmt.Errorf("%s[%d] = %.10g, want %.10g (difference %.3g; tolerance %g + %g·|want|)", what, at, g[at], w[at], worst, tol.atol, tol.rtol)
	}
	return nil
}

// lossModule adapts a loss to the golden harness.
type lossModule struct {
	Base
	f func(x *autograd.Var) *autograd.Var
}

type goldenCase struct {
	file, name string
	train      bool
	// build makes the module; data holds the case's tensors (for targets
	// and masks).
	build func(g *tensor.Generator, data map[string]*tensor.Tensor, opts ...tensor.Option) Layer
	// forward, when set, is used instead of Layer.Forward.
	forward func(m Layer, x *autograd.Var, data map[string]*tensor.Tensor) *autograd.Var
}

func (l *lossModule) Forward(x *autograd.Var) *autograd.Var { return l.f(x) }

// layer adapts a constructor of a layer without parameters.
func layer[L Layer](build func() L) func(*tensor.Generator, map[string]*tensor.Tensor, ...tensor.Option) Layer {
	return func(*tensor.Generator, map[string]*tensor.Tensor, ...tensor.Option) Layer { return build() }
}

func goldenCases() []goldenCase {
	var cs []goldenCase
	add := func(file, name string, train bool, build func(g *tensor.Generator, data map[string]*tensor.Tensor, opts ...tensor.Option) Layer) {
		cs = append(cs, goldenCase{file: file, name: name, train: train, build: build})
	}
	add("linear", "bias", true, func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewLinear(5, 4, true, g, o...)
	})
	add("linear", "nobias", true, func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewLinear(5, 4, false, g, o...)
	})
	for _, c := range []struct {
		name       string
		in, out, k int
		opt        Conv2dOptions
	}{
		{"basic", 3, 4, 3, Conv2dOptions{}},
		{"stride_pad", 3, 6, 3, Conv2dOptions{Stride: 2, Padding: 1}},
		{"groups_dilation", 4, 6, 3, Conv2dOptions{Padding: 2, Dilation: 2, Groups: 2, NoBias: true}},
		{"depthwise", 4, 4, 3, Conv2dOptions{Padding: 1, Groups: 4}},
		{"pointwise", 5, 3, 1, Conv2dOptions{}},
	} {
		add("conv2d", c.name, true, func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
			return NewConv2d(c.in, c.out, c.k, c.opt, g, o...)
		})
	}
	for _, c := range []struct {
		name  string
		train bool
		opt   BatchNormOptions
	}{
		{"train", true, BatchNormOptions{}},
		{"eval", false, BatchNormOptions{}},
		{"noaffine_train", true, BatchNormOptions{NoAffine: true, Momentum: 0.3, Eps: 1e-3}},
		{"norunning_eval", false, BatchNormOptions{NoRunningStats: true}},
		{"norunning_train", true, BatchNormOptions{NoRunningStats: true}},
		{"cumulative_train", true, BatchNormOptions{CumulativeAverage: true}},
	} {
		add("batchnorm2d", c.name, c.train, func(_ *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
			return NewBatchNorm2d(3, c.opt, o...)
		})
	}
	add("layernorm", "last", true, func(_ *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewLayerNorm(tensor.Shape{6}, LayerNormOptions{}, o...)
	})
	add("layernorm", "two_axes", true, func(_ *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewLayerNorm(tensor.Shape{3, 4}, LayerNormOptions{Eps: 1e-3}, o...)
	})
	add("layernorm", "noaffine", true, func(_ *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewLayerNorm(tensor.Shape{5}, LayerNormOptions{NoAffine: true}, o...)
	})
	add("activation", "relu", true, layer(func() *ReLU { return NewReLU() }))
	add("activation", "gelu", true, layer(func() *GELU { return NewGELU(false) }))
	add("activation", "gelu_tanh", true, layer(func() *GELU { return NewGELU(true) }))
	add("activation", "identity", true, layer(func() *Identity { return NewIdentity() }))
	add("activation", "flatten", true, layer(func() *Flatten { return NewFlatten(1, -1) }))
	add("activation", "flatten_1_2", true, layer(func() *Flatten { return NewFlatten(1, 2) }))
	add("activation", "dropout_eval", false, func(g *tensor.Generator, _ map[string]*tensor.Tensor, _ ...tensor.Option) Layer {
		return NewDropout(0.5, g)
	})
	add("pool", "max_s2_p1", true, layer(func() *MaxPool2d { return NewMaxPool2d(3, PoolOptions{Stride: 2, Padding: 1}) }))
	add("pool", "max_ceil", true, layer(func() *MaxPool2d { return NewMaxPool2d(2, PoolOptions{CeilMode: true}) }))
	add("pool", "max_dilation", true, layer(func() *MaxPool2d { return NewMaxPool2d(2, PoolOptions{Stride: 1, Dilation: 2}) }))
	add("pool", "avg_s2_p1", true, layer(func() *AvgPool2d { return NewAvgPool2d(3, PoolOptions{Stride: 2, Padding: 1}) }))
	add("pool", "avg_exclude_pad", true, layer(func() *AvgPool2d { return NewAvgPool2d(3, PoolOptions{Stride: 2, Padding: 1, ExcludePad: true}) }))
	add("pool", "avg_ceil", true, layer(func() *AvgPool2d { return NewAvgPool2d(2, PoolOptions{CeilMode: true}) }))
	add("pool", "adaptive_1x1", true, layer(func() *AdaptiveAvgPool2d { return NewAdaptiveAvgPool2d(1, 1) }))
	add("pool", "adaptive_2x2", true, layer(func() *AdaptiveAvgPool2d { return NewAdaptiveAvgPool2d(2, 2) }))
	add("pool", "adaptive_3x2", true, layer(func() *AdaptiveAvgPool2d { return NewAdaptiveAvgPool2d(3, 2) }))
	add("embedding", "basic", true, func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewEmbedding(10, 4, g, o...)
	})
	for _, c := range []struct {
		name  string
		train bool
		opt   AttentionOptions
	}{
		{"nomask", true, AttentionOptions{}},
		{"causal", true, AttentionOptions{}},
		{"float_mask", true, AttentionOptions{}},
		{"nobias", true, AttentionOptions{NoBias: true}},
		{"dropout_eval", false, AttentionOptions{Dropout: 0.5}},
	} {
		cs = append(cs, goldenCase{file: "mha", name: c.name, train: c.train,
			build: func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
				return NewMultiheadAttention(8, 2, c.opt, g, o...)
			},
			forward: func(m Layer, x *autograd.Var, data map[string]*tensor.Tensor) *autograd.Var {
				return m.(*MultiheadAttention).Attend(x, data["mask"])
			}})
	}
	ce := func(l CrossEntropyLoss) func(*tensor.Generator, map[string]*tensor.Tensor, ...tensor.Option) Layer {
		return func(_ *tensor.Generator, data map[string]*tensor.Tensor, _ ...tensor.Option) Layer {
			return &lossModule{f: func(x *autograd.Var) *autograd.Var { return l.Forward(x, data["target"]) }}
		}
	}
	add("loss", "ce_mean", true, ce(CrossEntropyLoss{}))
	add("loss", "ce_smooth", true, ce(NewCrossEntropyLoss(0.1)))
	add("loss", "ce_sum", true, ce(CrossEntropyLoss{LabelSmoothing: 0.2, Reduction: autograd.ReductionSum}))
	add("loss", "ce_none", true, ce(CrossEntropyLoss{Reduction: autograd.ReductionNone}))
	mse := func(l MSELoss) func(*tensor.Generator, map[string]*tensor.Tensor, ...tensor.Option) Layer {
		return func(_ *tensor.Generator, data map[string]*tensor.Tensor, _ ...tensor.Option) Layer {
			return &lossModule{f: func(x *autograd.Var) *autograd.Var {
				y := autograd.Const(data["target"].Cast(x.Value.DType()))
				defer y.Release()
				return l.Forward(x, y)
			}}
		}
	}
	add("loss", "mse_mean", true, mse(MSELoss{}))
	add("loss", "mse_sum", true, mse(MSELoss{Reduction: autograd.ReductionSum}))
	add("sequential", "cnn", true, func(g *tensor.Generator, _ map[string]*tensor.Tensor, o ...tensor.Option) Layer {
		return NewSequential(
			NewConv2d(3, 4, 3, Conv2dOptions{Padding: 1, NoBias: true}, g, o...),
			NewBatchNorm2d(4, BatchNormOptions{}, o...),
			NewReLU(),
			NewMaxPool2d(2, PoolOptions{}),
			NewFlatten(1, -1),
			NewLinear(36, 5, true, g, o...),
		)
	})
	return cs
}

// TestGolden loads each PyTorch module state into the flock layer, runs the
// forward and backward passes in float64 and float32, and compares the
// output, the input gradient, every parameter gradient and the buffers
// after the pass with PyTorch's.
func TestGolden(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		for _, dt := range []tensor.DType{tensor.Float64, tensor.Float32} {
			t.Run(fmt.Sprintf("%s/%s/%v", c.file, c.name, dt), func(t *testing.T) {
				t.Parallel()
				data := loadGolden(t, c.file, c.name)
				defer ReleaseAll(data)
				if err := runGolden(c, data, dt); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

func runGolden(c goldenCase, data map[string]*tensor.Tensor, dt tensor.DType) error {
	tol := tolFor(dt)
	m := c.build(tensor.NewGenerator(99), data, tensor.Of(dt))
	defer m.Release()
	if err := LoadStateDict(m, subDict(data, "state/"), true); err != nil {
		return err
	}
	m.SetTraining(c.train)

	in := data["input"]
	var x *autograd.Var
	if in.DType() == tensor.Float64 {
		x = autograd.Param(in.Cast(dt))
	} else {
		x = autograd.Const(in.Retain())
	}
	defer x.Release()
	var y *autograd.Var
	if c.forward != nil {
		y = c.forward(m, x, data)
	} else {
		y = m.Forward(x)
	}
	defer y.Release()
	if y.Value.DType() != dt {
		return fmt.Errorf("output dtype %v, want %v", y.Value.DType(), dt)
	}
	var errs []string
	if err := compare("output", y.Value, data["output"], tol); err != nil {
		errs = append(errs, err.Error())
	}
	g := data["grad_output"].Cast(dt)
	defer g.Release()
	y.BackwardWith(g)
	if want, ok := data["grad/input"]; ok {
		if x.Grad() == nil {
			errs = append(errs, "no input gradient")
		} else if err := compare("grad input", x.Grad(), want, tol); err != nil {
			errs = append(errs, err.Error())
		}
	}
	grads := subDict(data, "grad/")
	delete(grads, "input")
	for _, p := range m.NamedParameters() {
		want, ok := grads[p.Name]
		delete(grads, p.Name)
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("parameter %q has no golden gradient", p.Name))
		case p.Param.Grad() == nil:
			errs = append(errs, fmt.Sprintf("parameter %q got no gradient", p.Name))
		default:
			if err := compare("grad "+p.Name, p.Param.Grad(), want, tol); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	for name := range grads {
		errs = append(errs, fmt.Sprintf("golden gradient %q has no parameter", name))
	}
	after := subDict(data, "state_after/")
	if len(after) > 0 {
		sd := StateDict(m)
		defer ReleaseAll(sd)
		keys := make([]string, 0, len(after))
		for k := range after {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			got, ok := sd[k]
			if !ok {
				errs = append(errs, fmt.Sprintf("no state %q after the pass", k))
				continue
			}
			if err := compare("state after "+k, got, after[k], tol); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
