package autograd_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/internal/golden"
	"github.com/flockml/flock/tensor"
)

// Golden tests of single differentiable ops against PyTorch 1.13 on the
// cases of testdata/golden/gen_golden.py. Each case backpropagates sum(y·g)
// for the stored g and compares the output and every input gradient,
// including those with no tensor-level backward kernel (the bias of
// Conv2d, evaluation-mode BatchNorm, GELU).
//
// Tolerance: |got − want| ≤ rtol·|want| + atol·max|want|, max|want| the
// largest magnitude of the expected tensor (at least 1), with
// rtol = atol = 1e-5 in float32 and 1e-10 in float64.

type opDType = golden.DType

type opFile struct{ *golden.File }

func openOpFile(t *testing.T, name string) *opFile { return &opFile{golden.Open(t, name)} }

// leaf returns a Param holding a copy of the tensor under key, or nil when
// the file has none.
func (g *opFile) leaf(t *testing.T, key string) *autograd.Var {
	t.Helper()
	if !g.Has(key) {
		return nil
	}
	v := autograd.Param(g.Load(t, key).Clone())
	t.Cleanup(v.Release)
	return v
}

// run executes fn for every case of the file and both dtypes; fn returns
// the output and, by stored name, the leaves whose gradients to check. The
// output is checked against "y" and backpropagated with "g".
func (g *opFile) run(t *testing.T, fn func(t *testing.T, c, p string, d opDType) (*autograd.Var, map[string]*autograd.Var)) {
	for _, c := range g.Cases(t) {
		for _, d := range golden.DTypes {
			t.Run(fmt.Sprintf("%s/%s", c, d.Tag), func(t *testing.T) {
				p := c + "." + d.Tag + "."
				y, grads := fn(t, c, p, d)
				defer y.Release()
				g.Check(t, p+"y", y.Value, d)
				y.BackwardWith(g.Load(t, p+"g"))
				for name, v := range grads {
					g.Check(t, p+name, v.Grad(), d)
				}
			})
		}
	}
}

func TestGoldenOpConv2d(t *testing.T) {
	t.Parallel()
	g := openOpFile(t, "conv2d.safetensors")
	g.run(t, func(t *testing.T, c, p string, d opDType) (*autograd.Var, map[string]*autograd.Var) {
		var cp struct {
			Stride, Padding, Dilation [2]int
			Groups                    int
		}
		g.Params(t, c, &cp)
		x, w, b := g.leaf(t, p+"x"), g.leaf(t, p+"w"), g.leaf(t, p+"b")
		y := autograd.Conv2d(x, w, b, tensor.ConvParams{
			StrideH: cp.Stride[0], StrideW: cp.Stride[1], PadH: cp.Padding[0], PadW: cp.Padding[1],
			DilationH: cp.Dilation[0], DilationW: cp.Dilation[1], Groups: cp.Groups,
		})
		grads := map[string]*autograd.Var{"dx": x, "dw": w}
		if b != nil {
			grads["db"] = b
		}
		return y, grads
	})
}

func TestGoldenOpPool2d(t *testing.T) {
	t.Parallel()
	g := openOpFile(t, "pool2d.safetensors")
	g.run(t, func(t *testing.T, c, p string, d opDType) (*autograd.Var, map[string]*autograd.Var) {
		var pp struct {
			Kernel, Padding, Dilation [2]int
			Stride                    *[2]int
			CeilMode                  bool `json:"ceil_mode"`
			CountIncludePad           bool `json:"count_include_pad"`
		}
		g.Params(t, c, &pp)
		params := tensor.PoolParams{
			KernelH: pp.Kernel[0], KernelW: pp.Kernel[1], PadH: pp.Padding[0], PadW: pp.Padding[1],
			DilationH: pp.Dilation[0], DilationW: pp.Dilation[1],
			CeilMode: pp.CeilMode, CountIncludePad: pp.CountIncludePad,
		}
		if pp.Stride != nil {
			params.StrideH, params.StrideW = pp.Stride[0], pp.Stride[1]
		}
		x := g.leaf(t, p+"x")
		if strings.HasPrefix(c, "max_") {
			return autograd.MaxPool2d(x, params), map[string]*autograd.Var{"dx": x}
		}
		return autograd.AvgPool2d(x, params), map[string]*autograd.Var{"dx": x}
	})
}

func TestGoldenOpNorm(t *testing.T) {
	t.Parallel()
	g := openOpFile(t, "norm.safetensors")
	g.run(t, func(t *testing.T, c, p string, d opDType) (*autograd.Var, map[string]*autograd.Var) {
		x, w, b := g.leaf(t, p+"x"), g.leaf(t, p+"weight"), g.leaf(t, p+"bias")
		grads := map[string]*autograd.Var{"dx": x}
		if w != nil {
			grads["dweight"], grads["dbias"] = w, b
		}
		if strings.HasPrefix(c, "bn_") {
			var np struct {
				Running, Training bool
				Momentum, Eps     float64
			}
			g.Params(t, c, &np)
			var rm, rv *tensor.Tensor
			if np.Running {
				rm, rv = g.Load(t, p+"rm").Clone(), g.Load(t, p+"rv").Clone()
				t.Cleanup(rm.Release)
				t.Cleanup(rv.Release)
			}
			y := autograd.BatchNorm(x, w, b, rm, rv, tensor.NormParams{Eps: np.Eps, Momentum: np.Momentum, Training: np.Training})
			if np.Running {
				g.Check(t, p+"rm_after", rm, d)
				g.Check(t, p+"rv_after", rv, d)
			}
			return y, grads
		}
		var lp struct {
			NormalizedShape []int `json:"normalized_shape"`
			Eps             float64
		}
		g.Params(t, c, &lp)
		n := tensor.Shape(lp.NormalizedShape).NumElements()
		wf, bf := w, b
		if w != nil {
			wf, bf = autograd.Reshape(w, n), autograd.Reshape(b, n)
			t.Cleanup(wf.Release)
			t.Cleanup(bf.Release)
		}
		return autograd.LayerNorm(x, wf, bf, n, lp.Eps), grads
	})
}

func TestGoldenOpSoftmax(t *testing.T) {
	t.Parallel()
	g := openOpFile(t, "softmax.safetensors")
	g.run(t, func(t *testing.T, c, p string, d opDType) (*autograd.Var, map[string]*autograd.Var) {
		var sp struct{ Axis int }
		g.Params(t, c, &sp)
		x := g.leaf(t, p+"x")
		return autograd.Softmax(x, sp.Axis), map[string]*autograd.Var{"dx": x}
	})
	for _, c := range g.Cases(t) {
		for _, d := range golden.DTypes {
			t.Run(fmt.Sprintf("log/%s/%s", c, d.Tag), func(t *testing.T) {
				var sp struct{ Axis int }
				g.Params(t, c, &sp)
				p := c + "." + d.Tag + "."
				x := g.leaf(t, p+"x")
				y := autograd.LogSoftmax(x, sp.Axis)
				defer y.Release()
				g.Check(t, p+"log_y", y.Value, d)
				y.BackwardWith(g.Load(t, p+"log_g"))
				g.Check(t, p+"log_dx", x.Grad(), d)
			})
		}
	}
}

func TestGoldenOpGELU(t *testing.T) {
	t.Parallel()
	g := openOpFile(t, "gelu.safetensors")
	for _, d := range golden.DTypes {
		for _, form := range []struct {
			tag string
			fn  func(*autograd.Var) *autograd.Var
		}{{"erf", autograd.GELU}, {"tanh", autograd.GELUTanh}} {
			t.Run(form.tag+"/"+d.Tag, func(t *testing.T) {
				p := "gelu." + d.Tag + "."
				x := g.leaf(t, p+"x")
				y := form.fn(x)
				defer y.Release()
				g.Check(t, p+form.tag+"_y", y.Value, d)
				y.BackwardWith(g.Load(t, p+form.tag+"_g"))
				g.Check(t, p+form.tag+"_dx", x.Grad(), d)
			})
		}
	}
}
