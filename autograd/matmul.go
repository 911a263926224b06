package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// MatMul returns the matrix product of a and b with torch.matmul's
// semantics: a 1-D a is a row vector [1, K] and a 1-D b a column vector
// [K, 1] (the added axis is removed from the result), and the batch axes of
// higher-rank operands broadcast.
//
// With A and B the operands so promoted and G the output gradient,
// ∂L/∂A = G·Bᵀ and ∂L/∂B = Aᵀ·G, each summed over the batch axes its operand
// was broadcast along.
func MatMul(a, b *Var) *Var {
	if a.Value.Dim() == 0 || b.Value.Dim() == 0 {
		panic(fmt.Sprintf("autograd: MatMul: operands of shapes %v and %v; both need at least one axis", a.Value.Shape(), b.Value.Shape()))
	}
	out := tensor.MatMul(a.Value, b.Value)
	aShape, bShape := a.Value.Shape().Clone(), b.Value.Shape().Clone()
	return Record("MatMul", out, []*Var{a, b}, []*tensor.Tensor{a.Value, b.Value},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			av, bv := ctx.Saved[0], ctx.Saved[1]
			if av.Dim() == 1 {
				av = av.Unsqueeze(0)
			} else {
				av = av.Retain()
			}
			defer av.Release()
			if bv.Dim() == 1 {
				bv = bv.Unsqueeze(1)
			} else {
				bv = bv.Retain()
			}
			defer bv.Release()
			// g without the axes that promoting 1-D operands removed.
			gs := g.Shape().Clone()
			if len(aShape) == 1 {
				gs = insertAxis(gs, len(gs)-boolInt(len(bShape) != 1))
			}
			if len(bShape) == 1 {
				gs = insertAxis(gs, len(gs))
			}
			gf := g.Reshape(gs...)
			defer gf.Release()

			var ga, gb *tensor.Tensor
			if ctx.Needs(0) {
				bt := bv.Transpose(-1, -2)
				p := tensor.MatMul(gf, bt)
				bt.Release()
				ga = sumToShape(p, av.Shape(), aShape)
			}
			switch {
			case !ctx.Needs(1):
			case bv.Dim() == 2 && av.Dim() > 2:
				// A matrix applied to a batch: fold the batch into the rows,
				// ∂L/∂B = A'ᵀ·G' with A' [batch·M, K] and G' [batch·M, N].
				a2 := av.Reshape(-1, bv.Size(0))
				g2 := gf.Reshape(-1, bv.Size(1))
				p := tensor.MatMulTrans(a2, g2, true, false)
				a2.Release()
				g2.Release()
				gb = p.Reshape(bShape...)
				p.Release()
			default:
				at := av.Transpose(-1, -2)
				p := tensor.MatMul(at, gf)
				at.Release()
				gb = sumToShape(p, bv.Shape(), bShape)
			}
			return []*tensor.Tensor{ga, gb}
		})
}

// Linear returns x·wᵀ + b for x [..., in], w [out, in] and b [out] (b may be
// nil). With x and G flattened to matrices X [n, in] and G [n, out]:
// ∂L/∂x = G·w, ∂L/∂w = Gᵀ·X and ∂L/∂b = Σ_rows G.
func Linear(x, w, b *Var) *Var {
	var bias *tensor.Tensor
	if b != nil {
		bias = b.Value
	}
	out := tensor.Linear(x.Value, w.Value, bias)
	xShape := x.Value.Shape().Clone()
	return Record("Linear", out, []*Var{x, w, b}, []*tensor.Tensor{x.Value, w.Value},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			xv, wv := ctx.Saved[0], ctx.Saved[1]
			nOut, nIn := wv.Size(0), wv.Size(1)
			g2 := g.Reshape(-1, nOut)
			defer g2.Release()
			var gx, gw, gb *tensor.Tensor
			if ctx.Needs(0) {
				p := tensor.MatMul(g2, wv)
				gx = p.Reshape(xShape...)
				p.Release()
			}
			if ctx.Needs(1) {
				x2 := xv.Reshape(-1, nIn)
				gw = tensor.MatMulTrans(g2, x2, true, false)
				x2.Release()
			}
			if ctx.Needs(2) {
				gb = g2.Sum(0)
			}
			return []*tensor.Tensor{gx, gw, gb}
		})
}

// sumToShape sums p (of a promoted operand's broadcast shape) down to the
// promoted shape, then views it with the operand's own shape. It releases p.
func sumToShape(p *tensor.Tensor, promoted, shape tensor.Shape) *tensor.Tensor {
	s := p
	if !p.Shape().Equal(promoted) {
		s = p.SumTo(promoted)
		p.Release()
	}
	defer s.Release()
	return s.Reshape(shape...)
}

func insertAxis(s tensor.Shape, at int) tensor.Shape {
	out := make(tensor.Shape, 0, len(s)+1)
	out = append(out, s[:at]...)
	out = append(out, 1)
	return append(out, s[at:]...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
