package autograd_test

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

// Sizes of the attention block in testdata/golden/attention_*.safetensors
// (see gen_golden.py): x is [goldenB, goldenT, goldenD] with goldenH heads.
const goldenB, goldenT, goldenD, goldenH, goldenLayers = 2, 5, 8, 2, 2

// attentionBlock rebuilds gen_golden.py's attention_forward from autograd
// ops: per layer, a pre-norm self-attention and a GELU MLP, each added to
// the residual stream. Every intermediate Var is appended to *tmp for the
// caller to release.
func attentionBlock(x *autograd.Var, p map[string]*autograd.Var, tmp *[]*autograd.Var) *autograd.Var {
	keep := func(v *autograd.Var) *autograd.Var {
		*tmp = append(*tmp, v)
		return v
	}
	const dh = goldenD / goldenH
	heads := func(v *autograd.Var) *autograd.Var { // [B, T, D] → [B, H, T, dh]
		r := keep(autograd.Reshape(v, goldenB, goldenT, goldenH, dh))
		return keep(autograd.Transpose(r, 1, 2))
	}
	for l := range goldenLayers {
		P := func(name string) *autograd.Var { return p[fmt.Sprintf("layers.%d.%s", l, name)] }
		h := keep(autograd.LayerNorm(x, P("ln1.weight"), P("ln1.bias"), goldenD, 1e-5))
		qkv := keep(autograd.Linear(h, P("qkv.weight"), P("qkv.bias"))) // [B, T, 3D]
		parts := autograd.Split(qkv, -1, goldenD, goldenD, goldenD)
		for _, v := range parts {
			keep(v)
		}
		q, k, v := heads(parts[0]), heads(parts[1]), heads(parts[2])
		kt := keep(autograd.Transpose(k, -2, -1))
		s := keep(autograd.MatMul(q, kt)) // [B, H, T, T]
		s = keep(autograd.MulScalar(s, 1/math.Sqrt(dh)))
		a := keep(autograd.Softmax(s, -1))
		o := keep(autograd.MatMul(a, v)) // [B, H, T, dh]
		o = keep(autograd.Transpose(o, 1, 2))
		o = keep(autograd.Reshape(o, goldenB, goldenT, goldenD))
		x = keep(autograd.Add(x, keep(autograd.Linear(o, P("proj.weight"), P("proj.bias")))))
		h = keep(autograd.LayerNorm(x, P("ln2.weight"), P("ln2.bias"), goldenD, 1e-5))
		m := keep(autograd.GELU(keep(autograd.Linear(h, P("fc1.weight"), P("fc1.bias")))))
		x = keep(autograd.Add(x, keep(autograd.Linear(m, P("fc2.weight"), P("fc2.bias")))))
	}
	return x
}

// TestAttentionGolden runs the two-layer attention block on PyTorch's
// inputs and parameters and compares the output, the MSE loss and the
// gradient of every input and parameter with PyTorch's, in float64 and in
// float32. Each element must satisfy |got − want| ≤ atol + rtol·|want|:
// rtol 1e-5 throughout, atol 1e-12 in float64 and 1e-6 in float32 (where
// PyTorch's and flock's summation orders differ by a few ulps of values
// of order 1, and small gradient entries are differences of such sums).
func TestAttentionGolden(t *testing.T) {
	cases := []struct {
		file       string
		dt         tensor.DType
		rtol, atol float64
	}{
		{"attention_f64.safetensors", tensor.Float64, 1e-5, 1e-12},
		{"attention_f32.safetensors", tensor.Float32, 1e-5, 1e-6},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			ts, err := safetensors.LoadTensors(filepath.Join("..", "testdata", "golden", c.file))
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, v := range ts {
					v.Release()
				}
			}()
			get := func(name string) *tensor.Tensor {
				v, ok := ts[name]
				if !ok {
					t.Fatalf("%s has no tensor %q", c.file, name)
				}
				if v.DType() != c.dt {
					t.Fatalf("%s: %q is %v, want %v", c.file, name, v.DType(), c.dt)
				}
				return v
			}

			x := autograd.Param(get("x").Retain())
			defer x.Release()
			target := autograd.Const(get("target").Retain())
			defer target.Release()
			params := map[string]*autograd.Var{}
			var names []string
			for name := range ts {
				if strings.HasPrefix(name, "layers.") {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			if len(names) != 12*goldenLayers {
				t.Fatalf("%s holds %d parameters, want %d", c.file, len(names), 12*goldenLayers)
			}
			for _, name := range names {
				params[name] = autograd.Param(get(name).Retain())
			}
			defer func() {
				for _, p := range params {
					p.Release()
				}
			}()

			var tmp []*autograd.Var
			defer func() {
				for _, v := range tmp {
					v.Release()
				}
			}()
			out := attentionBlock(x, params, &tmp)
			loss := autograd.MSELoss(out, target, autograd.ReductionMean)
			tmp = append(tmp, loss)
			loss.Backward()

			// margin is the largest |got − want|/(atol + rtol·|want|) seen.
			var margin float64
			defer func() { t.Logf("largest error: %.3g of the tolerance", margin) }()
			check := func(name string, got *tensor.Tensor) {
				t.Helper()
				want := get(name)
				if got == nil {
					t.Errorf("%s: no value", name)
					return
				}
				if got.DType() != c.dt || !got.Shape().Equal(want.Shape()) {
					t.Errorf("%s: got %v%v, want %v%v", name, got.DType(), got.Shape(), want.DType(), want.Shape())
					return
				}
				g, w := got.Float64s(), want.Float64s()
				bad, worst, at := 0, 0.0, -1
				for i := range w {
					d := math.Abs(g[i] - w[i])
					r := d / (c.atol + c.rtol*math.Abs(w[i]))
					if !(r <= 1) {
						bad++
					}
					if !(r <= worst) {
						worst, at = r, i
					}
				}
				margin = max(margin, worst)
				if bad > 0 {
					t.Errorf("%s: %d of %d elements out of tolerance; worst element %d: %v, want %v", name, bad, len(w), at, g[at], w[at])
				}
			}
			check("out", out.Value)
			check("loss", loss.Value)
			check("grad.x", x.Grad())
			for _, name := range names {
				check("grad."+name, params[name].Grad())
			}
		})
	}
}

// TestCrossEntropyGolden checks CrossEntropy's mean reduction with label
// smoothing and ignored rows against PyTorch's F.cross_entropy
// (testdata/golden/cross_entropy.safetensors): the loss and the gradient of
// g·loss, within 1e-5 relative plus 1e-12 (float64) or 1e-6 (float32)
// absolute.
func TestCrossEntropyGolden(t *testing.T) {
	ts, err := safetensors.LoadTensors(filepath.Join("..", "testdata", "golden", "cross_entropy.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, v := range ts {
			v.Release()
		}
	}()
	cases := []struct {
		name string
		opt  autograd.CrossEntropyOptions
	}{
		{"smooth_ignore", autograd.CrossEntropyOptions{LabelSmoothing: 0.1, IgnoreIndex: -100}},
		{"plain", autograd.CrossEntropyOptions{}},
		{"ignore2_smooth", autograd.CrossEntropyOptions{LabelSmoothing: 0.2, IgnoreIndex: 2}},
	}
	for _, c := range cases {
		for _, d := range []struct {
			tag  string
			atol float64
		}{{"f64", 1e-12}, {"f32", 1e-6}} {
			t.Run(c.name+"/"+d.tag, func(t *testing.T) {
				get := func(name string) *tensor.Tensor {
					v, ok := ts[c.name+"."+d.tag+"."+name]
					if !ok {
						t.Fatalf("no tensor %s.%s.%s", c.name, d.tag, name)
					}
					return v
				}
				logits := autograd.Param(get("logits").Retain())
				defer logits.Release()
				loss := autograd.CrossEntropy(logits, get("target"), c.opt)
				defer loss.Release()
				g := get("g").Reshape()
				defer g.Release()
				loss.BackwardWith(g)
				for _, cmp := range []struct {
					name      string
					got, want *tensor.Tensor
				}{{"loss", loss.Value, get("loss")}, {"dlogits", logits.Grad(), get("dlogits")}} {
					g, w := cmp.got.Float64s(), cmp.want.Float64s()
					if len(g) != len(w) {
						t.Fatalf("%s: %d values, want %d", cmp.name, len(g), len(w))
					}
					for i := range w {
						if !(math.Abs(g[i]-w[i]) <= d.atol+1e-5*math.Abs(w[i])) {
							t.Errorf("%s[%d] = %v, want %v", cmp.name, i, g[i], w[i])
						}
					}
				}
			})
		}
	}
}
