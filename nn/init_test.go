package nn

import (
	"math"
	"slices"
	"testing"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// distribution is an initialisation's law: its CDF, mean, standard
// deviation and support.
type distribution struct {
	cdf       func(float64) float64
	mean, std float64
	lo, hi    float64
}

func phi(x float64) float64 { return math.Exp(-x*x/2) / math.Sqrt(2*math.Pi) }
func Phi(x float64) float64 { return (1 + math.Erf(x/math.Sqrt2)) / 2 }

func uniformLaw(b float64) distribution {
	return distribution{
		cdf:  func(x float64) float64 { return min(max((x+b)/(2*b), 0), 1) },
		mean: 0, std: b / math.Sqrt(3), lo: -b, hi: b,
	}
}

func normalLaw(mean, std float64) distribution {
	return distribution{
		cdf:  func(x float64) float64 { return Phi((x - mean) / std) },
		mean: mean, std: std, lo: math.Inf(-1), hi: math.Inf(1),
	}
}

// truncNormalLaw is N(μ, σ²) conditioned on [a, b]: with α = (a−μ)/σ,
// β = (b−μ)/σ and Z = Φ(β) − Φ(α), the mean is μ + σ·(φ(α) − φ(β))/Z and
// the variance σ²·(1 + (α·φ(α) − β·φ(β))/Z − ((φ(α) − φ(β))/Z)²).
func truncNormalLaw(mu, sigma, a, b float64) distribution {
	al, be := (a-mu)/sigma, (b-mu)/sigma
	z := Phi(be) - Phi(al)
	d := (phi(al) - phi(be)) / z
	return distribution{
		cdf:  func(x float64) float64 { return min(max((Phi((x-mu)/sigma)-Phi(al))/z, 0), 1) },
		mean: mu + sigma*d,
		std:  sigma * math.Sqrt(1+(al*phi(al)-be*phi(be))/z-d*d),
		lo:   a, hi: b,
	}
}

type initCase struct {
	name string // the case in nn_init.safetensors
	// draw returns the initialised tensor and a function that frees it.
	draw func(g *tensor.Generator) (*tensor.Tensor, func())
	law  distribution
	// extreme is how far the sample minimum and maximum may be from
	// PyTorch's: a few expected gaps 1/(n·density) at a bound of positive
	// density, about a standard deviation for an unbounded tail.
	extreme float64
}

func initCases() []initCase {
	mod := func(build func(g *tensor.Generator) (Module, *tensor.Tensor)) func(g *tensor.Generator) (*tensor.Tensor, func()) {
		return func(g *tensor.Generator) (*tensor.Tensor, func()) {
			m, t := build(g)
			return t, m.Release
		}
	}
	raw := func(shape tensor.Shape, fill func(t *tensor.Tensor, g *tensor.Generator)) func(g *tensor.Generator) (*tensor.Tensor, func()) {
		return func(g *tensor.Generator) (*tensor.Tensor, func()) {
			t := tensor.Empty(shape)
			fill(t, g)
			return t, t.Release
		}
	}
	const n200k = 200000
	return []initCase{
		{"linear_weight", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			l := NewLinear(512, 256, true, g)
			return l, l.Weight.Value
		}), uniformLaw(1 / math.Sqrt(512)), 30 * 2 / math.Sqrt(512) / (512 * 256)},
		{"linear_bias", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			l := NewLinear(64, 8192, true, g)
			return l, l.Bias.Value
		}), uniformLaw(1.0 / 8), 30 * 0.25 / 8192},
		{"conv2d_weight", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			c := NewConv2d(64, 64, 3, Conv2dOptions{}, g)
			return c, c.Weight.Value
		}), uniformLaw(1.0 / 24), 30 * 2.0 / 24 / (64 * 64 * 9)},
		{"conv2d_bias", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			c := NewConv2d(4, 16384, 1, Conv2dOptions{}, g)
			return c, c.Bias.Value
		}), uniformLaw(0.5), 30.0 / 16384},
		{"kaiming_normal_fan_out_relu", raw(tensor.Shape{128, 64, 3, 3}, func(t *tensor.Tensor, g *tensor.Generator) {
			KaimingNormal(t, 0, FanOut, "relu", g)
		}), normalLaw(0, math.Sqrt(2.0/(128*9))), math.Sqrt(2.0 / (128 * 9))},
		{"mha_in_proj_weight", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			m := NewMultiheadAttention(256, 4, AttentionOptions{}, g)
			return m, m.InProjWeight.Value
		}), uniformLaw(math.Sqrt(6.0 / (256 + 768))), 30 * 2 * math.Sqrt(6.0/1024) / (768 * 256)},
		{"mha_out_proj_weight", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			m := NewMultiheadAttention(256, 4, AttentionOptions{}, g)
			return m, m.OutProj.Weight.Value
		}), uniformLaw(1.0 / 16), 30 * 2.0 / 16 / (256 * 256)},
		{"embedding_weight", mod(func(g *tensor.Generator) (Module, *tensor.Tensor) {
			e := NewEmbedding(1000, 64, g)
			return e, e.Weight.Value
		}), normalLaw(0, 1), 1},
		{"trunc_normal", raw(tensor.Shape{n200k}, func(t *tensor.Tensor, g *tensor.Generator) {
			TruncNormal(t, 0.5, 1, -1, 2, g)
		}), truncNormalLaw(0.5, 1, -1, 2), 30 / (n200k * phi(1.5) / (Phi(1.5) - Phi(-1.5)))},
		{"trunc_normal_vit", raw(tensor.Shape{n200k}, func(t *tensor.Tensor, g *tensor.Generator) {
			TruncNormal(t, 0, 0.02, -2, 2, g)
		}), normalLaw(0, 0.02), 0.02},
	}
}

// TestInitStatistics checks each default initialisation against its law
// (a Kolmogorov–Smirnov test of the whole distribution, the moments and
// the support) and against the moments of PyTorch's initialisation of the
// same layer, stored by gen_nn.py.
func TestInitStatistics(t *testing.T) {
	t.Parallel()
	ref, err := safetensors.LoadTensors(goldenPath("init"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ReleaseAll(ref) })
	for i, c := range initCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w, free := c.draw(tensor.NewGenerator(uint64(100 + i)))
			xs := w.Float64s()
			free()
			n := float64(len(xs))
			if pn := ref[c.name+"/n"].Item(); pn != n {
				t.Fatalf("%v samples; PyTorch's case has %v", n, pn)
			}
			slices.Sort(xs)
			law := c.law

			// Kolmogorov–Smirnov: sup |F_n − F| ≤ 1.95/√n at level 0.001.
			d := 0.0
			for j, x := range xs {
				f := law.cdf(x)
				d = max(d, math.Abs(float64(j+1)/n-f), math.Abs(f-float64(j)/n))
			}
			if d > 1.95/math.Sqrt(n) {
				t.Errorf("Kolmogorov–Smirnov distance %.4g > %.4g", d, 1.95/math.Sqrt(n))
			}

			mean, std := moments(xs)
			se := law.std / math.Sqrt(n)
			if math.Abs(mean-law.mean) > 5*se {
				t.Errorf("mean %.6g, law's %.6g (±%.2g)", mean, law.mean, 5*se)
			}
			if math.Abs(std-law.std) > 5*se {
				t.Errorf("std %.6g, law's %.6g (±%.2g)", std, law.std, 5*se)
			}
			if xs[0] < law.lo || xs[len(xs)-1] > law.hi {
				t.Errorf("samples span [%v, %v], outside the support [%v, %v]", xs[0], xs[len(xs)-1], law.lo, law.hi)
			}

			for _, m := range []struct {
				name string
				got  float64
				tol  float64
			}{
				{"mean", mean, 7 * se},
				{"std", std, 7 * se},
				{"min", xs[0], c.extreme},
				{"max", xs[len(xs)-1], c.extreme},
			} {
				want := ref[c.name+"/"+m.name].Item()
				if math.Abs(m.got-want) > m.tol {
					t.Errorf("%s %.6g, PyTorch's %.6g (±%.2g)", m.name, m.got, want, m.tol)
				}
			}
		})
	}
}

func moments(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

func TestGainAndFans(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		param float64
		want  float64
	}{
		{"linear", 0, 1},
		{"conv2d", 0, 1},
		{"sigmoid", 0, 1},
		{"tanh", 0, 5.0 / 3},
		{"relu", 0, math.Sqrt2},
		{"leaky_relu", 0, math.Sqrt2},
		{"leaky_relu", math.Sqrt(5), math.Sqrt(1.0 / 3)},
		{"selu", 0, 0.75},
	} {
		if got := Gain(c.name, c.param); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("Gain(%q, %v) = %v, want %v", c.name, c.param, got, c.want)
		}
	}
	for _, c := range []struct {
		shape   tensor.Shape
		in, out int
	}{
		{tensor.Shape{3, 5}, 5, 3},
		{tensor.Shape{8, 4, 3, 3}, 36, 72},
		{tensor.Shape{6, 1, 5, 7}, 35, 210},
	} {
		if in, out := Fans(c.shape); in != c.in || out != c.out {
			t.Errorf("Fans(%v) = %d, %d; want %d, %d", c.shape, in, out, c.in, c.out)
		}
	}
	for _, f := range []func(){
		func() { Fans(tensor.Shape{4}) },
		func() { Gain("swish", 0) },
		func() { TruncNormal(tensor.Zeros(tensor.Shape{2}), 0, 1, 1, -1, tensor.NewGenerator(1)) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		}()
	}
}

// TestInitSeeded checks that a layer is a function of its generator's seed.
func TestInitSeeded(t *testing.T) {
	t.Parallel()
	a, b, c := NewConv2d(3, 4, 3, Conv2dOptions{}, tensor.NewGenerator(1)),
		NewConv2d(3, 4, 3, Conv2dOptions{}, tensor.NewGenerator(1)),
		NewConv2d(3, 4, 3, Conv2dOptions{}, tensor.NewGenerator(2))
	defer a.Release()
	defer b.Release()
	defer c.Release()
	if !slices.Equal(a.Weight.Value.Float32s(), b.Weight.Value.Float32s()) || !slices.Equal(a.Bias.Value.Float32s(), b.Bias.Value.Float32s()) {
		t.Errorf("one seed gave two initialisations")
	}
	if slices.Equal(a.Weight.Value.Float32s(), c.Weight.Value.Float32s()) {
		t.Errorf("two seeds gave one initialisation")
	}
}
