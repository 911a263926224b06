package autograd

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

// BackwardFunc computes the gradients of an op's inputs from the gradient g
// of its output and the tensors the op saved. It returns one gradient per
// input, in order, with the input's shape; an entry may be nil for an input
// that needs none (see Needs). Every returned tensor is a new reference that
// the engine takes over (return g.Retain() to pass g through unchanged).
type BackwardFunc func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor

// Context is what a BackwardFunc sees of its node.
type Context struct {
	// Saved are the tensors the op saved, in the order given to Record.
	Saved []*tensor.Tensor
	needs []bool
}

// Needs reports whether input i requires a gradient, so formulas can skip
// work for inputs that do not.
func (c *Context) Needs(i int) bool { return c.needs[i] }

// node is one recorded op: the Vars it read, what it saved and how to
// propagate a gradient back to them.
type node struct {
	op       string
	inputs   []*Var
	ctx      Context
	backward BackwardFunc
	shape    tensor.Shape // of the output
}

// Record makes the result Var of an op with output value out (ownership
// passes to the Var). When gradient recording is on and some input requires
// a gradient, the Var remembers a node with the inputs, a new reference to
// each tensor in saved (released once the backward pass has used them), and
// backward. Otherwise the result is a constant and saved is left alone.
//
// Every differentiable op in this package is built on Record; code outside
// the package can use it to add ops of its own.
func Record(op string, out *tensor.Tensor, inputs []*Var, saved []*tensor.Tensor, backward BackwardFunc) *Var {
	v := &Var{Value: out}
	if !GradEnabled() {
		return v
	}
	needs := make([]bool, len(inputs))
	anyNeeds := false
	for i, in := range inputs {
		if in != nil && in.requiresGrad {
			needs[i] = true
			anyNeeds = true
		}
	}
	if !anyNeeds {
		return v
	}
	kept := make([]*tensor.Tensor, len(saved))
	for i, s := range saved {
		if s != nil {
			kept[i] = s.Retain()
		}
	}
	v.requiresGrad = true
	v.fn = &node{
		op:       op,
		inputs:   append([]*Var(nil), inputs...),
		ctx:      Context{Saved: kept, needs: needs},
		backward: backward,
		shape:    out.Shape().Clone(),
	}
	return v
}

// Backward computes the gradient of v, a one-element Var, with respect to
// every leaf that requires one, accumulating into their Grad.
func (v *Var) Backward() {
	if v.Value.NumElements() != 1 {
		panic(fmt.Sprintf("autograd: Backward of a Var of shape %v: give an output gradient with BackwardWith", v.Value.Shape()))
	}
	g := tensor.OnesLike(v.Value)
	defer g.Release()
	v.BackwardWith(g)
}

// BackwardWith propagates the output gradient g (v's shape) back through
// the graph that produced v, accumulating into the leaves' Grad. Each node's
// saved tensors are released as soon as the node has run, so a graph can be
// traversed once; a second Backward through it panics.
func (v *Var) BackwardWith(g *tensor.Tensor) {
	if !v.requiresGrad {
		panic("autograd: Backward of a Var that does not require a gradient (no input requires one, or it was computed under NoGrad)")
	}
	if !g.Shape().Equal(v.Value.Shape()) {
		panic(fmt.Sprintf("autograd: BackwardWith: gradient of shape %v for a value of shape %v", g.Shape(), v.Value.Shape()))
	}
	if v.fn == nil {
		accumulateLeaf(v, g.Retain())
		fireHooks(v)
		return
	}

	// Count, for every node and leaf reachable from v, the edges that will
	// bring it a gradient, so that each runs only when its gradient is final.
	pending := map[*node]int{}
	leafPending := map[*Var]int{}
	stack := []*node{v.fn}
	seen := map[*node]bool{v.fn: true}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.backward == nil {
			panic(fmt.Sprintf("autograd: Backward through the graph of %s a second time: its saved tensors were released after the first pass", n.op))
		}
		for i, in := range n.inputs {
			if !n.ctx.needs[i] {
				continue
			}
			if in.fn == nil {
				leafPending[in]++
				continue
			}
			pending[in.fn]++
			if !seen[in.fn] {
				seen[in.fn] = true
				stack = append(stack, in.fn)
			}
		}
	}

	grads := map[*node]*tensor.Tensor{v.fn: g.Retain()}
	ready := []*node{v.fn}
	for len(ready) > 0 {
		n := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		gn := grads[n]
		delete(grads, n)
		var ins []*tensor.Tensor
		if gn != nil {
			ins = n.backward(&n.ctx, gn)
			if len(ins) != len(n.inputs) {
				panic(fmt.Sprintf("autograd: backward of %s returned %d gradients for %d inputs", n.op, len(ins), len(n.inputs)))
			}
			gn.Release()
		}
		for i, in := range n.inputs {
			var gi *tensor.Tensor
			if ins != nil {
				gi = ins[i]
			}
			if !n.ctx.needs[i] {
				gi.Release()
				continue
			}
			if gi != nil && !gi.Shape().Equal(in.Value.Shape()) {
				panic(fmt.Sprintf("autograd: backward of %s gave input %d a gradient of shape %v for a value of shape %v", n.op, i, gi.Shape(), in.Value.Shape()))
			}
			if in.fn == nil {
				if gi != nil {
					accumulateLeaf(in, gi)
				}
				if leafPending[in]--; leafPending[in] == 0 {
					fireHooks(in)
				}
				continue
			}
			if gi != nil {
				if prev := grads[in.fn]; prev != nil {
					if prev.Exclusive() && prev.IsContiguous() {
						// Nothing else sees prev's memory: sum in place.
						prev.AddInPlace(gi)
						gi.Release()
						gi = prev
					} else {
						sum := prev.Add(gi)
						prev.Release()
						gi.Release()
						gi = sum
					}
				}
				grads[in.fn] = gi
			}
			if pending[in.fn]--; pending[in.fn] == 0 {
				ready = append(ready, in.fn)
			}
		}
		n.free()
	}
}

// free drops what the node kept for its backward pass.
func (n *node) free() {
	for _, s := range n.ctx.Saved {
		s.Release()
	}
	n.ctx.Saved = nil
	n.inputs = nil
	n.backward = nil
}

// accumulateLeaf adds g (owned by the engine) into the leaf's gradient.
func accumulateLeaf(v *Var, g *tensor.Tensor) {
	if v.grad == nil {
		// Adopt g only when nothing else can see its memory, since later
		// passes add into the gradient in place, and when it spans its whole
		// buffer, so that a slice does not keep a larger block alive.
		if g.IsContiguous() && g.Exclusive() && g.Offset() == 0 &&
			g.NumElements()*g.DType().Size() == g.Raw().Buf.Size() {
			v.grad = g
			return
		}
		v.grad = g.Clone()
		g.Release()
		return
	}
	v.grad.AddInPlace(g)
	g.Release()
}

func fireHooks(v *Var) {
	for _, h := range v.hooks {
		h(v)
	}
}
