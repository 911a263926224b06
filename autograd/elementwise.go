package autograd

import (
	"math"

	"github.com/flockml/flock/tensor"
)

// gradTemps collects the intermediate tensors of a gradient formula so that
// one deferred call releases them all.
type gradTemps []*tensor.Tensor

// keep records t for release and returns it.
func (ts *gradTemps) keep(t *tensor.Tensor) *tensor.Tensor {
	*ts = append(*ts, t)
	return t
}

func (ts *gradTemps) release() {
	for _, t := range *ts {
		t.Release()
	}
	*ts = nil
}

// scalarFor returns a 0-dimensional tensor holding v with t's dtype and
// device, for broadcasting against t.
func scalarFor(t *tensor.Tensor, v float64) *tensor.Tensor {
	return tensor.Scalar(v, tensor.Of(t.DType()), tensor.On(t.Device()))
}

// recordUnary records an op of one input whose gradient is grad(s, g),
// where s is the one tensor the op saves (nil when it needs none).
func recordUnary(op string, x *Var, out, saved *tensor.Tensor, grad func(s, g *tensor.Tensor) *tensor.Tensor) *Var {
	var keep []*tensor.Tensor
	if saved != nil {
		keep = []*tensor.Tensor{saved}
	}
	return Record(op, out, []*Var{x}, keep, func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
		var s *tensor.Tensor
		if len(ctx.Saved) > 0 {
			s = ctx.Saved[0]
		}
		return []*tensor.Tensor{grad(s, g)}
	})
}

// reduceTo sums t, a gradient of the broadcast shape, down to shape and
// releases t.
func reduceTo(t *tensor.Tensor, shape tensor.Shape) *tensor.Tensor {
	defer t.Release()
	return t.SumTo(shape)
}

// Add returns a+b with broadcasting: ∂/∂a = ∂/∂b = 1.
func Add(a, b *Var) *Var {
	as, bs := a.Shape().Clone(), b.Shape().Clone()
	return Record("Add", a.Value.Add(b.Value), []*Var{a, b}, nil,
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				ga = g.SumTo(as)
			}
			if ctx.Needs(1) {
				gb = g.SumTo(bs)
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Sub returns a−b with broadcasting: ∂/∂a = 1, ∂/∂b = −1.
func Sub(a, b *Var) *Var {
	as, bs := a.Shape().Clone(), b.Shape().Clone()
	return Record("Sub", a.Value.Sub(b.Value), []*Var{a, b}, nil,
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				ga = g.SumTo(as)
			}
			if ctx.Needs(1) {
				gb = reduceTo(g.Neg(), bs)
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Mul returns a·b with broadcasting: ∂/∂a = b, ∂/∂b = a.
func Mul(a, b *Var) *Var {
	return Record("Mul", a.Value.Mul(b.Value), []*Var{a, b},
		[]*tensor.Tensor{a.Value, b.Value},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			a, b := ctx.Saved[0], ctx.Saved[1]
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				ga = reduceTo(g.Mul(b), a.Shape())
			}
			if ctx.Needs(1) {
				gb = reduceTo(g.Mul(a), b.Shape())
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Div returns y = a/b with broadcasting: ∂/∂a = 1/b, ∂/∂b = −a/b² = −y/b.
func Div(a, b *Var) *Var {
	as := a.Shape().Clone()
	y := a.Value.Div(b.Value)
	return Record("Div", y, []*Var{a, b}, []*tensor.Tensor{b.Value, y},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			b, y := ctx.Saved[0], ctx.Saved[1]
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				ga = reduceTo(g.Div(b), as)
			}
			if ctx.Needs(1) {
				var tmp gradTemps
				defer tmp.release()
				gy := tmp.keep(g.Mul(y))
				q := tmp.keep(gy.Div(b))
				gb = reduceTo(q.Neg(), b.Shape())
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Neg returns −x.
func Neg(x *Var) *Var {
	return recordUnary("Neg", x, x.Value.Neg(), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.Neg()
	})
}

// Exp returns eˣ: ∂/∂x = eˣ.
func Exp(x *Var) *Var {
	y := x.Value.Exp()
	return recordUnary("Exp", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		return g.Mul(y)
	})
}

// Log returns ln x: ∂/∂x = 1/x.
func Log(x *Var) *Var {
	return recordUnary("Log", x, x.Value.Log(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		return g.Div(x)
	})
}

// Sqrt returns y = √x: ∂/∂x = 1/(2y).
func Sqrt(x *Var) *Var {
	y := x.Value.Sqrt()
	return recordUnary("Sqrt", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		q := g.Div(y)
		defer q.Release()
		return q.MulScalar(0.5)
	})
}

// Rsqrt returns y = 1/√x: ∂/∂x = −y³/2.
func Rsqrt(x *Var) *Var {
	y := x.Value.Rsqrt()
	return recordUnary("Rsqrt", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		var tmp gradTemps
		defer tmp.release()
		y3 := tmp.keep(y.PowScalar(3))
		d := tmp.keep(y3.MulScalar(-0.5))
		return g.Mul(d)
	})
}

// Tanh returns y = tanh x: ∂/∂x = 1 − y².
func Tanh(x *Var) *Var {
	y := x.Value.Tanh()
	return recordUnary("Tanh", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		return tensor.TanhGrad(g, y)
	})
}

// Sigmoid returns y = 1/(1+e⁻ˣ): ∂/∂x = y·(1−y).
func Sigmoid(x *Var) *Var {
	y := x.Value.Sigmoid()
	return recordUnary("Sigmoid", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		return tensor.SigmoidGrad(g, y)
	})
}

// ReLU returns y = max(x, 0): ∂/∂x = 1 where y > 0 and 0 elsewhere
// (including x = 0, as in PyTorch).
func ReLU(x *Var) *Var {
	y := x.Value.ReLU()
	return recordUnary("ReLU", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		return tensor.ReLUGrad(g, y)
	})
}

// GELU returns x·Φ(x), Φ the standard normal CDF:
// ∂/∂x = Φ(x) + x·φ(x), φ(x) = e^(−x²/2)/√(2π).
func GELU(x *Var) *Var {
	return recordUnary("GELU", x, x.Value.GELU(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		return tensor.GELUGrad(g, x)
	})
}

// GELUTanh returns the tanh approximation y = x/2·(1+tanh u),
// u = k·(x + c·x³), k = √(2/π), c = 0.044715:
// ∂/∂x = (1+tanh u)/2 + x/2·(1−tanh² u)·k·(1 + 3c·x²).
func GELUTanh(x *Var) *Var {
	return recordUnary("GELUTanh", x, x.Value.GELUTanh(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		return tensor.GELUTanhGrad(g, x)
	})
}

// Abs returns |x|: ∂/∂x = sign x (0 at x = 0, as in PyTorch).
func Abs(x *Var) *Var {
	return recordUnary("Abs", x, x.Value.Abs(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		s := x.Sign()
		defer s.Release()
		return g.Mul(s)
	})
}

// Erf returns the error function: ∂/∂x = 2/√π·e^(−x²).
func Erf(x *Var) *Var {
	return recordUnary("Erf", x, x.Value.Erf(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		var tmp gradTemps
		defer tmp.release()
		e := tmp.keep(x.Square())
		e.MulScalarInPlace(-1)
		d := tmp.keep(e.Exp())
		d.MulScalarInPlace(2 / math.Sqrt(math.Pi))
		return g.Mul(d)
	})
}

// Square returns x²: ∂/∂x = 2x.
func Square(x *Var) *Var {
	return recordUnary("Square", x, x.Value.Square(), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		gx := g.Mul(x)
		defer gx.Release()
		return gx.MulScalar(2)
	})
}

// Reciprocal returns y = 1/x: ∂/∂x = −y².
func Reciprocal(x *Var) *Var {
	y := x.Value.Reciprocal()
	return recordUnary("Reciprocal", x, y, y, func(y, g *tensor.Tensor) *tensor.Tensor {
		d := y.Square()
		defer d.Release()
		d.MulScalarInPlace(-1)
		return g.Mul(d)
	})
}

// Pow returns y = aᵇ with broadcasting: ∂/∂a = b·aᵇ⁻¹, ∂/∂b = y·ln a.
// As in PyTorch, ∂/∂a is taken as 0 where b = 0, and ∂/∂b as 0 where a = 0
// and b ≥ 0, rather than the NaN of 0·∞.
func Pow(a, b *Var) *Var {
	y := a.Value.Pow(b.Value)
	return Record("Pow", y, []*Var{a, b}, []*tensor.Tensor{a.Value, b.Value, y},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			a, b, y := ctx.Saved[0], ctx.Saved[1], ctx.Saved[2]
			var ga, gb *tensor.Tensor
			var tmp gradTemps
			defer tmp.release()
			if ctx.Needs(0) {
				bm1 := tmp.keep(b.AddScalar(-1))
				p := tmp.keep(a.Pow(bm1))
				d := tmp.keep(p.Mul(b))
				zero := tmp.keep(scalarFor(a, 0))
				bZero := tmp.keep(b.Eq(zero))
				masked := tmp.keep(tensor.Where(bZero, zero, d))
				ga = reduceTo(g.Mul(masked), a.Shape())
			}
			if ctx.Needs(1) {
				la := tmp.keep(a.Log())
				d := tmp.keep(y.Mul(la))
				d.MulInPlace(g)
				zero := tmp.keep(scalarFor(a, 0))
				aZero := tmp.keep(a.Eq(zero))
				bNonNeg := tmp.keep(b.Ge(zero))
				inner := tmp.keep(tensor.Where(bNonNeg, zero, d))
				gb = reduceTo(tensor.Where(aZero, inner, d), b.Shape())
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Maximum returns the elementwise max(a, b) with broadcasting. The gradient
// goes to the larger operand; on a tie each gets half, as in PyTorch.
func Maximum(a, b *Var) *Var {
	return extremum("Maximum", a, b, a.Value.Maximum(b.Value), 1)
}

// Minimum returns the elementwise min(a, b) with broadcasting. The gradient
// goes to the smaller operand; on a tie each gets half, as in PyTorch.
func Minimum(a, b *Var) *Var {
	return extremum("Minimum", a, b, a.Value.Minimum(b.Value), -1)
}

// extremum records Maximum (dir = 1) or Minimum (dir = −1). With
// s = sign(a−b), a's share of the gradient is (1 + dir·s)/2 (1, ½ or 0) and
// b's is the rest.
func extremum(op string, a, b *Var, out *tensor.Tensor, dir float64) *Var {
	return Record(op, out, []*Var{a, b}, []*tensor.Tensor{a.Value, b.Value},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			a, b := ctx.Saved[0], ctx.Saved[1]
			var tmp gradTemps
			defer tmp.release()
			diff := tmp.keep(a.Sub(b))
			s := tmp.keep(diff.Sign())
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				w := tmp.keep(s.MulScalar(dir / 2))
				w.AddScalarInPlace(0.5)
				ga = reduceTo(g.Mul(w), a.Shape())
			}
			if ctx.Needs(1) {
				w := tmp.keep(s.MulScalar(-dir / 2))
				w.AddScalarInPlace(0.5)
				gb = reduceTo(g.Mul(w), b.Shape())
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// PowScalar returns xᵖ: ∂/∂x = p·xᵖ⁻¹ (0 for p = 0).
func PowScalar(x *Var, p float64) *Var {
	return recordUnary("PowScalar", x, x.Value.PowScalar(p), x.Value, func(x, g *tensor.Tensor) *tensor.Tensor {
		if p == 0 {
			return tensor.ZerosLike(g)
		}
		d := x.PowScalar(p - 1)
		defer d.Release()
		d.MulScalarInPlace(p)
		return g.Mul(d)
	})
}

// AddScalar returns x+s: ∂/∂x = 1.
func AddScalar(x *Var, s float64) *Var {
	return recordUnary("AddScalar", x, x.Value.AddScalar(s), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.Retain()
	})
}

// MulScalar returns s·x: ∂/∂x = s.
func MulScalar(x *Var, s float64) *Var {
	return recordUnary("MulScalar", x, x.Value.MulScalar(s), nil, func(_, g *tensor.Tensor) *tensor.Tensor {
		return g.MulScalar(s)
	})
}

// Where returns a where cond is true and b elsewhere, with cond, a and b
// broadcast together. The gradient goes to a where cond holds and to b
// elsewhere; cond (Bool) is not differentiable.
func Where(cond *tensor.Tensor, a, b *Var) *Var {
	as, bs := a.Shape().Clone(), b.Shape().Clone()
	return Record("Where", tensor.Where(cond, a.Value, b.Value), []*Var{a, b}, []*tensor.Tensor{cond},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			cond := ctx.Saved[0]
			zero := scalarFor(g, 0)
			defer zero.Release()
			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				ga = reduceTo(tensor.Where(cond, g, zero), as)
			}
			if ctx.Needs(1) {
				gb = reduceTo(tensor.Where(cond, zero, g), bs)
			}
			return []*tensor.Tensor{ga, gb}
		})
}
