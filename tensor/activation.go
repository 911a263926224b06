package tensor

import (
	"errors"
	"math"

	"github.com/flockml/flock/backend"
)

// The gradients of activations, each one pass over memory where the device
// has the kernel (backend.ReLUGrad and its kin) and a composition of
// elementwise ops where it does not. g is the gradient of the activation's
// output and s the tensor its forward pass saved; they broadcast together.

// ReLUGrad returns g where s > 0 and 0 elsewhere, s being ReLU's input or
// output (PyTorch's threshold_backward: a NaN in s passes no gradient).
func ReLUGrad(g, s *Tensor) *Tensor {
	return activationGrad(backend.ReLUGrad, "ReLUGrad", g, s, func() *Tensor {
		zero := Scalar(0, Of(s.dtype), On(s.Device()))
		defer zero.Release()
		pos := s.Gt(zero)
		defer pos.Release()
		return Where(pos, g, zero)
	})
}

// GELUGrad returns g·(Φ(x) + x·φ(x)), the gradient of GELU's input x,
// with Φ and φ the standard normal distribution and density.
func GELUGrad(g, x *Tensor) *Tensor {
	return activationGrad(backend.GELUGrad, "GELUGrad", g, x, func() *Tensor {
		var tmp temps
		defer tmp.release()
		u := tmp.keep(x.MulScalar(1 / math.Sqrt2))
		cdf := tmp.keep(u.Erf())
		cdf.AddScalarInPlace(1)
		cdf.MulScalarInPlace(0.5)
		e := tmp.keep(x.Square())
		e.MulScalarInPlace(-0.5)
		pdf := tmp.keep(e.Exp())
		pdf.MulScalarInPlace(1 / math.Sqrt(2*math.Pi))
		d := tmp.keep(x.Mul(pdf))
		d.AddInPlace(cdf)
		return g.Mul(d)
	})
}

// GELUTanhGrad returns g times the derivative of GELUTanh at x:
// (1 + tanh u)/2 + x/2·(1 − tanh² u)·k·(1 + 3c·x²), u = k·(x + c·x³),
// k = √(2/π), c = 0.044715.
func GELUTanhGrad(g, x *Tensor) *Tensor {
	return activationGrad(backend.GELUTanhGrad, "GELUTanhGrad", g, x, func() *Tensor {
		const c = 0.044715
		k := math.Sqrt(2 / math.Pi)
		var tmp temps
		defer tmp.release()
		x2 := tmp.keep(x.Square())
		inner := tmp.keep(x2.MulScalar(c)) // c·x²
		inner.AddScalarInPlace(1)
		u := tmp.keep(x.Mul(inner)) // x + c·x³
		u.MulScalarInPlace(k)
		t := tmp.keep(u.Tanh())
		sech2 := tmp.keep(t.Square()) // 1 − tanh² u
		sech2.MulScalarInPlace(-1)
		sech2.AddScalarInPlace(1)
		du := tmp.keep(x2.MulScalar(3 * c * k)) // k·(1 + 3c·x²)
		du.AddScalarInPlace(k)
		d := tmp.keep(x.Mul(sech2))
		d.MulInPlace(du)
		d.AddInPlace(t)
		d.AddScalarInPlace(1)
		d.MulScalarInPlace(0.5)
		return g.Mul(d)
	})
}

// TanhGrad returns g·(1 − y²), the gradient of Tanh's input from its
// output y.
func TanhGrad(g, y *Tensor) *Tensor {
	return activationGrad(backend.TanhGrad, "TanhGrad", g, y, func() *Tensor {
		d := y.Square()
		defer d.Release()
		d.MulScalarInPlace(-1)
		d.AddScalarInPlace(1)
		return g.Mul(d)
	})
}

// SigmoidGrad returns g·y·(1 − y), the gradient of Sigmoid's input from its
// output y.
func SigmoidGrad(g, y *Tensor) *Tensor {
	return activationGrad(backend.SigmoidGrad, "SigmoidGrad", g, y, func() *Tensor {
		d := y.Square()
		defer d.Release()
		d.SubInPlace(y)
		d.MulScalarInPlace(-1)
		return g.Mul(d)
	})
}

// activationGrad runs the gradient kernel op on g and s, or compose when the
// device does not have it.
func activationGrad(op backend.BinaryOp, name string, g, s *Tensor, compose func() *Tensor) *Tensor {
	dev := sameDevice(name, g, s)
	sameDType(name, g, s)
	floatOnly(name, g, s)
	shape := broadcastShape(name, g, s)
	out := empty(dev, g.dtype, shape)
	err := dev.Binary(op, out.Raw(), g.broadcastRaw(name, shape), s.broadcastRaw(name, shape))
	if errors.Is(err, backend.ErrUnimplemented) {
		out.Release()
		return compose()
	}
	must(name, err, g, s)
	return out
}

// temps collects intermediate tensors for one deferred release.
type temps []*Tensor

func (ts *temps) keep(t *Tensor) *Tensor {
	*ts = append(*ts, t)
	return t
}

func (ts *temps) release() {
	for _, t := range *ts {
		t.Release()
	}
	*ts = nil
}
