package nn

import (
	"fmt"
	"math"

	"github.com/flockml/flock/tensor"
)

// FanMode selects which fan a Kaiming initialisation preserves the variance
// of: FanIn for activations in the forward pass, FanOut for gradients in
// the backward pass.
type FanMode int

// Fan modes.
const (
	FanIn FanMode = iota
	FanOut
)

// Fans returns the fan-in and fan-out of a weight of the given shape, as
// PyTorch computes them: for shape [out, in, k…], fanIn = in·Πk and
// fanOut = out·Πk. It panics for fewer than two axes.
func Fans(shape tensor.Shape) (fanIn, fanOut int) {
	if len(shape) < 2 {
		panic(fmt.Sprintf("nn: Fans: a weight of shape %v has no fan-in and fan-out (needs at least 2 axes)", shape))
	}
	receptive := 1
	for _, d := range shape[2:] {
		receptive *= d
	}
	return shape[1] * receptive, shape[0] * receptive
}

// Gain returns the recommended gain for a nonlinearity, as
// torch.nn.init.calculate_gain: 1 for "linear", "identity", "conv1d",
// "conv2d", "conv3d" and "sigmoid"; 5/3 for "tanh"; √2 for "relu";
// √(2/(1+a²)) for "leaky_relu" with negative slope a = param; 3/4 for
// "selu". It panics for other names.
func Gain(nonlinearity string, param float64) float64 {
	switch nonlinearity {
	case "linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "sigmoid":
		return 1
	case "tanh":
		return 5.0 / 3
	case "relu":
		return math.Sqrt2
	case "leaky_relu":
		return math.Sqrt(2 / (1 + param*param))
	case "selu":
		return 0.75
	}
	panic(fmt.Sprintf("nn: Gain: unknown nonlinearity %q", nonlinearity))
}

func fan(shape tensor.Shape, mode FanMode) int {
	in, out := Fans(shape)
	if mode == FanOut {
		return out
	}
	return in
}

// fill overwrites t with src, which has t's shape, and releases src.
func fill(t, src *tensor.Tensor) {
	t.CopyFrom(src)
	src.Release()
}

// Uniform fills t in place with samples of U[lo, hi) drawn from g.
func Uniform(t *tensor.Tensor, lo, hi float64, g *tensor.Generator) {
	fill(t, g.Uniform(t.Shape(), lo, hi, tensor.Of(t.DType()), tensor.On(t.Device())))
}

// Normal fills t in place with samples of N(mean, std²) drawn from g.
func Normal(t *tensor.Tensor, mean, std float64, g *tensor.Generator) {
	fill(t, g.Normal(t.Shape(), mean, std, tensor.Of(t.DType()), tensor.On(t.Device())))
}

// Constant fills t with v.
func Constant(t *tensor.Tensor, v float64) { t.Fill(v) }

// Zeros fills t with 0.
func Zeros(t *tensor.Tensor) { t.Fill(0) }

// Ones fills t with 1.
func Ones(t *tensor.Tensor) { t.Fill(1) }

// KaimingUniform fills t with samples of U(−b, b), b = gain·√(3/fan), where
// gain = Gain(nonlinearity, a) and fan is t's fan-in or fan-out (He et al.,
// "Delving deep into rectifiers", 2015), as torch.nn.init.kaiming_uniform_.
// PyTorch initialises Linear and Conv2d weights with a = √5 and
// "leaky_relu", which gives b = 1/√fanIn.
func KaimingUniform(t *tensor.Tensor, a float64, mode FanMode, nonlinearity string, g *tensor.Generator) {
	b := Gain(nonlinearity, a) * math.Sqrt(3/float64(fan(t.Shape(), mode)))
	Uniform(t, -b, b, g)
}

// KaimingNormal fills t with samples of N(0, σ²), σ = gain/√fan, as
// torch.nn.init.kaiming_normal_.
func KaimingNormal(t *tensor.Tensor, a float64, mode FanMode, nonlinearity string, g *tensor.Generator) {
	Normal(t, 0, Gain(nonlinearity, a)/math.Sqrt(float64(fan(t.Shape(), mode))), g)
}

// XavierUniform fills t with samples of U(−b, b),
// b = gain·√(6/(fanIn+fanOut)) (Glorot and Bengio, 2010), as
// torch.nn.init.xavier_uniform_.
func XavierUniform(t *tensor.Tensor, gain float64, g *tensor.Generator) {
	in, out := Fans(t.Shape())
	b := gain * math.Sqrt(6/float64(in+out))
	Uniform(t, -b, b, g)
}

// XavierNormal fills t with samples of N(0, σ²), σ = gain·√(2/(fanIn+fanOut)),
// as torch.nn.init.xavier_normal_.
func XavierNormal(t *tensor.Tensor, gain float64, g *tensor.Generator) {
	in, out := Fans(t.Shape())
	Normal(t, 0, gain*math.Sqrt(2/float64(in+out)), g)
}

// TruncNormal fills t with samples of N(mean, std²) conditioned on [lo, hi],
// by inverting the CDF as torch.nn.init.trunc_normal_ does: with
// Φ the standard normal CDF, u ~ U(2Φ(α)−1, 2Φ(β)−1) for
// α = (lo−mean)/std and β = (hi−mean)/std, the sample is
// mean + std·√2·erf⁻¹(u), clamped to [lo, hi]. The bounds are absolute
// values, not multiples of std (PyTorch's defaults are lo = −2, hi = 2).
func TruncNormal(t *tensor.Tensor, mean, std, lo, hi float64, g *tensor.Generator) {
	if !(lo < hi) || !(std > 0) {
		panic(fmt.Sprintf("nn: TruncNormal: need lo < hi and std > 0, got [%v, %v] and std %v", lo, hi, std))
	}
	cdf := func(x float64) float64 { return (1 + math.Erf(x/math.Sqrt2)) / 2 }
	l, h := cdf((lo-mean)/std), cdf((hi-mean)/std)
	u := g.Uniform(t.Shape(), 2*l-1, 2*h-1, tensor.Of(tensor.Float64), tensor.On(t.Device()))
	vals := u.Float64s()
	u.Release()
	for i, v := range vals {
		x := mean + std*math.Sqrt2*math.Erfinv(v)
		vals[i] = min(max(x, lo), hi)
	}
	fill(t, tensor.FromSlice(vals, t.Shape().Clone(), tensor.On(t.Device())))
}
