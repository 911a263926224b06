package tensor_test

import (
	"strings"
	"testing"

	"github.com/flockml/flock/internal/golden"
	"github.com/flockml/flock/tensor"
)

// Golden tests: flock's kernels against PyTorch 1.13 on the cases of
// testdata/golden/gen_golden.py, in float32 and float64, with the
// tolerances of package internal/golden. Indices compare exactly.

type goldenDType = golden.DType

type goldenFile struct {
	*golden.File
	t *testing.T
}

func openGolden(t *testing.T, name string) *goldenFile {
	t.Helper()
	return &goldenFile{File: golden.Open(t, name), t: t}
}

// params decodes the JSON parameters of case c into v.
func (g *goldenFile) params(c string, v any) { g.t.Helper(); g.Params(g.t, c, v) }

func (g *goldenFile) has(c string, d goldenDType, name string) bool {
	return g.Has(golden.Key(c, d, name))
}

// tensor loads "<c>.<dtype>.<name>" as a new tensor released when t ends.
func (g *goldenFile) tensor(t *testing.T, c string, d goldenDType, name string) *tensor.Tensor {
	t.Helper()
	return g.Load(t, golden.Key(c, d, name))
}

// optional is tensor, or nil when the case has no such tensor.
func (g *goldenFile) optional(t *testing.T, c string, d goldenDType, name string) *tensor.Tensor {
	if !g.has(c, d, name) {
		return nil
	}
	return g.tensor(t, c, d, name)
}

// check compares got (consumed) with the expected "<c>.<dtype>.<name>";
// adjust, when given, edits the expected values first.
func (g *goldenFile) check(t *testing.T, c string, d goldenDType, name string, got *tensor.Tensor, adjust func([]float64)) {
	t.Helper()
	want, shape := g.Want(t, golden.Key(c, d, name))
	if adjust != nil {
		adjust(want)
	}
	if got != nil {
		defer got.Release()
	}
	golden.Compare(t, name, got, want, shape, d)
}

// checkExact compares an integer tensor (consumed) with the expected values.
func (g *goldenFile) checkExact(t *testing.T, c string, d goldenDType, name string, got *tensor.Tensor) {
	t.Helper()
	want, shape := g.Want(t, golden.Key(c, d, name))
	defer got.Release()
	if !got.Shape().Equal(shape) {
		t.Fatalf("%s: shape %v, want %v", name, got.Shape(), shape)
	}
	for i, v := range got.Float64s() {
		if v != want[i] {
			t.Errorf("%s[%d] = %v, want %v", name, i, v, want[i])
			return
		}
	}
}

// forEach runs fn for every case of the file and both dtypes.
func (g *goldenFile) forEach(t *testing.T, fn func(t *testing.T, c string, d goldenDType)) {
	g.ForEach(t, fn)
}

func TestGoldenConv2d(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "conv2d.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		var p struct {
			Stride, Padding, Dilation [2]int
			Groups                    int
			Bias                      bool
		}
		g.params(c, &p)
		cp := tensor.ConvParams{
			StrideH: p.Stride[0], StrideW: p.Stride[1],
			PadH: p.Padding[0], PadW: p.Padding[1],
			DilationH: p.Dilation[0], DilationW: p.Dilation[1],
			Groups: p.Groups,
		}
		x, w, dy := g.tensor(t, c, d, "x"), g.tensor(t, c, d, "w"), g.tensor(t, c, d, "g")
		// flock's Conv2d has no bias: remove it from PyTorch's output.
		var unbias func([]float64)
		if p.Bias {
			b, _ := g.Want(t, golden.Key(c, d, "b"))
			_, ys := g.Want(t, golden.Key(c, d, "y"))
			unbias = func(y []float64) {
				plane := ys[2] * ys[3]
				for i := range y {
					y[i] -= b[(i/plane)%ys[1]]
				}
			}
		}
		g.check(t, c, d, "y", tensor.Conv2d(x, w, cp), unbias)
		g.check(t, c, d, "dx", tensor.Conv2dBackwardData(dy, w, x.Shape(), cp), nil)
		g.check(t, c, d, "dw", tensor.Conv2dBackwardWeight(x, dy, w.Shape(), cp), nil)
	})
}

type goldenPool struct {
	Kernel, Padding, Dilation [2]int
	Stride                    *[2]int
	CeilMode                  bool `json:"ceil_mode"`
	CountIncludePad           bool `json:"count_include_pad"`
}

// poolParams converts; a null stride stays 0, PyTorch's default (the
// kernel), which flock must supply.
func (p goldenPool) poolParams() tensor.PoolParams {
	pp := tensor.PoolParams{
		KernelH: p.Kernel[0], KernelW: p.Kernel[1],
		PadH: p.Padding[0], PadW: p.Padding[1],
		DilationH: p.Dilation[0], DilationW: p.Dilation[1],
		CeilMode: p.CeilMode, CountIncludePad: p.CountIncludePad,
	}
	if p.Stride != nil {
		pp.StrideH, pp.StrideW = p.Stride[0], p.Stride[1]
	}
	return pp
}

func TestGoldenPool2d(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "pool2d.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		var p goldenPool
		g.params(c, &p)
		pp := p.poolParams()
		x, dy := g.tensor(t, c, d, "x"), g.tensor(t, c, d, "g")
		switch {
		case strings.HasPrefix(c, "max_"):
			y, idx := tensor.MaxPool2d(x, pp)
			g.check(t, c, d, "y", y, nil)
			if idx.DType() != tensor.Int64 {
				t.Errorf("indices have dtype %v, want int64", idx.DType())
			}
			g.check(t, c, d, "dx", tensor.MaxPool2dBackward(dy, idx, x.Shape(), pp), nil)
			g.checkExact(t, c, d, "indices", idx)
		case strings.HasPrefix(c, "avg_"):
			g.check(t, c, d, "y", tensor.AvgPool2d(x, pp), nil)
			g.check(t, c, d, "dx", tensor.AvgPool2dBackward(dy, x.Shape(), pp), nil)
		default:
			t.Fatalf("unknown case %s", c)
		}
	})
}

func TestGoldenNorm(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "norm.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		x, dy := g.tensor(t, c, d, "x"), g.tensor(t, c, d, "g")
		w, b := g.optional(t, c, d, "weight"), g.optional(t, c, d, "bias")
		switch {
		case strings.HasPrefix(c, "bn_"):
			var p struct {
				Affine, Running, Training bool
				Momentum, Eps             float64
			}
			g.params(c, &p)
			np := tensor.NormParams{Eps: p.Eps, Momentum: p.Momentum, Training: p.Training}
			rm, rv := g.optional(t, c, d, "rm"), g.optional(t, c, d, "rv")
			y, mean, invstd := tensor.BatchNorm(x, w, b, rm, rv, np)
			g.check(t, c, d, "y", y, nil)
			if p.Running {
				g.check(t, c, d, "rm_after", rm.Retain(), nil)
				g.check(t, c, d, "rv_after", rv.Retain(), nil)
			}
			if !p.Training {
				if mean != nil || invstd != nil {
					t.Errorf("eval-mode BatchNorm returned batch statistics")
				}
				mean.Release()
				invstd.Release()
				return
			}
			defer mean.Release()
			defer invstd.Release()
			dx, dw, db := tensor.BatchNormBackward(dy, x, w, mean, invstd, np)
			g.check(t, c, d, "dx", dx, nil)
			if p.Affine {
				g.check(t, c, d, "dweight", dw, nil)
				g.check(t, c, d, "dbias", db, nil)
			} else if dw != nil || db != nil {
				t.Errorf("BatchNormBackward without weight returned dweight/dbias")
			}
		case strings.HasPrefix(c, "ln_"):
			var p struct {
				NormalizedShape []int `json:"normalized_shape"`
				Affine          bool
				Eps             float64
			}
			g.params(c, &p)
			n := tensor.Shape(p.NormalizedShape).NumElements()
			if w != nil {
				w, b = w.Reshape(n), b.Reshape(n)
				defer w.Release()
				defer b.Release()
			}
			y, mean, rstd := tensor.LayerNorm(x, w, b, n, p.Eps)
			defer mean.Release()
			defer rstd.Release()
			g.check(t, c, d, "y", y, nil)
			dx, dw, db := tensor.LayerNormBackward(dy, x, w, mean, rstd, n)
			g.check(t, c, d, "dx", dx, nil)
			if p.Affine {
				g.check(t, c, d, "dweight", reshapeTo(dw, p.NormalizedShape), nil)
				g.check(t, c, d, "dbias", reshapeTo(db, p.NormalizedShape), nil)
			} else if dw != nil || db != nil {
				t.Errorf("LayerNormBackward without weight returned dweight/dbias")
			}
		default:
			t.Fatalf("unknown case %s", c)
		}
	})
}

// reshapeTo returns x reshaped (a new reference; x is released), or nil.
func reshapeTo(x *tensor.Tensor, shape []int) *tensor.Tensor {
	if x == nil {
		return nil
	}
	defer x.Release()
	return x.Reshape(shape...)
}

func TestGoldenSoftmax(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "softmax.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		var p struct{ Axis int }
		g.params(c, &p)
		x := g.tensor(t, c, d, "x")

		y := x.Softmax(p.Axis)
		defer y.Release()
		g.check(t, c, d, "y", y.Retain(), nil)
		g.check(t, c, d, "dx", tensor.SoftmaxBackward(y, g.tensor(t, c, d, "g"), p.Axis, false), nil)

		ly := x.LogSoftmax(p.Axis)
		defer ly.Release()
		g.check(t, c, d, "log_y", ly.Retain(), nil)
		g.check(t, c, d, "log_dx", tensor.SoftmaxBackward(ly, g.tensor(t, c, d, "log_g"), p.Axis, true), nil)
	})
}

func TestGoldenCrossEntropy(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "cross_entropy.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		var p struct {
			LabelSmoothing float64 `json:"label_smoothing"`
			IgnoreIndex    int64   `json:"ignore_index"`
		}
		g.params(c, &p)
		cp := tensor.CrossEntropyParams{LabelSmoothing: p.LabelSmoothing, IgnoreIndex: p.IgnoreIndex}
		logits, target := g.tensor(t, c, d, "logits"), g.tensor(t, c, d, "target")
		targets := target.Int64s()

		rows := tensor.CrossEntropy(logits, target, cp)
		// The mean reduction divides by the number of rows not ignored.
		var sum float64
		count := 0
		for i, v := range rows.Float64s() {
			if targets[i] != p.IgnoreIndex {
				sum += v
				count++
			}
		}
		g.check(t, c, d, "rows", rows, nil)
		g.check(t, c, d, "loss", tensor.Scalar(sum/float64(count), tensor.Of(d.DT)), nil)

		t32 := target.Cast(tensor.Int32)
		defer t32.Release()
		g.check(t, c, d, "rows", tensor.CrossEntropy(logits, t32, cp), nil)

		scale := g.tensor(t, c, d, "g").Item() / float64(count)
		dl := make([]float64, len(targets))
		for i, tg := range targets {
			if tg != p.IgnoreIndex {
				dl[i] = scale
			}
		}
		dloss := tensor.FromSlice(dl, nil, tensor.Of(d.DT))
		defer dloss.Release()
		g.check(t, c, d, "dlogits", tensor.CrossEntropyBackward(logits, target, dloss, cp), nil)
	})
}

func TestGoldenGELU(t *testing.T) {
	t.Parallel()
	g := openGolden(t, "gelu.safetensors")
	g.forEach(t, func(t *testing.T, c string, d goldenDType) {
		x := g.tensor(t, c, d, "x")
		g.check(t, c, d, "erf_y", x.GELU(), nil)
		g.check(t, c, d, "tanh_y", x.GELUTanh(), nil)
	})
}
