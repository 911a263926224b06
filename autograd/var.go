package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// Var is a tensor in a differentiable computation. A leaf Var is created by
// the user (parameters, inputs); every other Var is the result of an op and
// remembers the node that made it, so Backward can walk the graph back to the
// leaves.
//
// A Var owns its Value: Release frees it (and the accumulated gradient).
type Var struct {
	// Value is the tensor the Var stands for.
	Value *tensor.Tensor

	grad         *tensor.Tensor
	requiresGrad bool
	fn           *node
	hooks        []func(*Var)
	name         string
}

// NewVar wraps t, taking ownership of it. A leaf that requires a gradient
// accumulates one in Grad each time Backward reaches it.
func NewVar(t *tensor.Tensor, requiresGrad bool) *Var {
	if t == nil {
		panic("autograd: NewVar of a nil tensor")
	}
	if requiresGrad && t.DType() != tensor.Float32 && t.DType() != tensor.Float64 {
		panic(fmt.Sprintf("autograd: NewVar: only float tensors can require gradients, got %v", t.DType()))
	}
	return &Var{Value: t, requiresGrad: requiresGrad}
}

// Param wraps t as a leaf that requires a gradient (a trainable parameter).
func Param(t *tensor.Tensor) *Var { return NewVar(t, true) }

// Const wraps t as a leaf that needs no gradient (an input, a label).
func Const(t *tensor.Tensor) *Var { return NewVar(t, false) }

// Named sets a name used in error messages and returns v.
func (v *Var) Named(name string) *Var {
	v.name = name
	return v
}

// Name is the name set by Named, or "".
func (v *Var) Name() string { return v.name }

// RequiresGrad reports whether gradients flow to or through v.
func (v *Var) RequiresGrad() bool { return v.requiresGrad }

// SetRequiresGrad turns gradient recording for a leaf on or off
// (PyTorch's requires_grad_), for the ops recorded from then on: with it off
// the leaf is a constant to them, so backward neither computes its gradient
// nor, below it, the gradients of inputs that need none. Strategies that
// compute only some layers' gradients in a step (JointSpar) switch the
// others off for the step.
func (v *Var) SetRequiresGrad(b bool) {
	if !v.IsLeaf() {
		panic("autograd: SetRequiresGrad on a Var made by an op; detach it first")
	}
	if b && v.Value.DType() != tensor.Float32 && v.Value.DType() != tensor.Float64 {
		panic(fmt.Sprintf("autograd: SetRequiresGrad: only float tensors can require gradients, got %v", v.Value.DType()))
	}
	v.requiresGrad = b
}

// IsLeaf reports whether v was created by the user rather than by an op.
func (v *Var) IsLeaf() bool { return v.fn == nil }

// Shape is the shape of v's value.
func (v *Var) Shape() tensor.Shape { return v.Value.Shape() }

// Grad is the gradient accumulated in a leaf by Backward, or nil. It stays
// owned by v.
func (v *Var) Grad() *tensor.Tensor { return v.grad }

// SetGrad replaces v's gradient with g, taking ownership of g (nil clears
// it). The previous gradient is released.
func (v *Var) SetGrad(g *tensor.Tensor) {
	if g != nil && !g.Shape().Equal(v.Value.Shape()) {
		panic(fmt.Sprintf("autograd: SetGrad: gradient of shape %v for a value of shape %v", g.Shape(), v.Value.Shape()))
	}
	if v.grad != nil {
		v.grad.Release()
	}
	v.grad = g
}

// ZeroGrad releases v's gradient, so the next Backward starts afresh (like
// PyTorch's set_to_none).
func (v *Var) ZeroGrad() { v.SetGrad(nil) }

// OnGradReady registers fn to run during Backward as soon as v's gradient is
// final for that pass: every path from the output to v has been traversed.
// Hooks run on the goroutine that called Backward, in registration order,
// and only for leaves that require a gradient. Data-parallel training hangs
// bucketed all-reduces on them.
func (v *Var) OnGradReady(fn func(v *Var)) {
	if !v.IsLeaf() || !v.requiresGrad {
		panic("autograd: OnGradReady on a Var that is not a leaf requiring a gradient")
	}
	v.hooks = append(v.hooks, fn)
}

// Detach returns a leaf that shares v's value (a new reference) and needs no
// gradient.
func (v *Var) Detach() *Var { return &Var{Value: v.Value.Retain()} }

// Release frees v's value and gradient. v must not be used afterwards. The
// graph that produced v keeps what its backward pass needs on its own.
func (v *Var) Release() {
	if v == nil {
		return
	}
	v.Value.Release()
	if v.grad != nil {
		v.grad.Release()
		v.grad = nil
	}
}

// String formats v's value and whether it requires a gradient.
func (v *Var) String() string {
	return fmt.Sprintf("Var(%v, requiresGrad=%v)", v.Value, v.requiresGrad)
}
