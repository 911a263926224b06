package nn

import (
	"fmt"
	"strings"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Module is a part of a model that owns named parameters, buffers and
// sub-modules. Names are dotted paths in registration order
// ("features.0.weight", "bn1.running_mean"), the keys of its state dict.
//
// Types implement Module by embedding Base and registering their parts in
// their constructor.
type Module interface {
	// NamedParameters returns the parameters of the module and all its
	// descendants: its own first, then each child's in registration order.
	// A parameter registered under two names appears once, under the first.
	NamedParameters() []NamedParameter
	// NamedBuffers returns the buffers (running statistics, counters) of
	// the module and its descendants, in the same order.
	NamedBuffers() []NamedBuffer
	// Children returns the direct sub-modules in registration order.
	Children() []NamedModule
	// SetTraining switches the module and its descendants between training
	// (true) and evaluation mode.
	SetTraining(training bool)
	// Training reports whether the module is in training mode.
	Training() bool
	// Release frees the parameters and buffers of the module and its
	// descendants. The module must not be used afterwards.
	Release()
	// To moves the parameters and buffers of the module and its
	// descendants to device dev (PyTorch's module.to(device)), keeping
	// their names, values and whether they require a gradient. Gradients
	// and optimizer state made before do not follow: move a model before
	// building its optimizer.
	To(dev tensor.Device)
}

// Layer is a module with one input and one output.
type Layer interface {
	Module
	// Forward returns the layer's output for x, a new Var that the caller
	// releases.
	Forward(x *autograd.Var) *autograd.Var
}

// NamedParameter is a trainable parameter with its dotted name.
type NamedParameter struct {
	Name  string
	Param *autograd.Var
}

// NamedBuffer is a buffer with its dotted name.
type NamedBuffer struct {
	Name   string
	Buffer *tensor.Tensor
}

// NamedModule is a sub-module with its name (dotted when nested).
type NamedModule struct {
	Name   string
	Module Module
}

// Base holds a module's registered parts and its mode; embed it to
// implement Module. A zero Base is an empty module in training mode, as
// PyTorch modules start.
type Base struct {
	params   []NamedParameter
	buffers  []NamedBuffer
	children []NamedModule
	eval     bool
}

// baser is implemented by every type that embeds Base, which lets the
// package walk a tree of modules with one set of visited parts.
type baser interface{ base() *Base }

func (b *Base) base() *Base { return b }

func (b *Base) checkName(kind, name string) {
	if name == "" || strings.Contains(name, ".") {
		panic(fmt.Sprintf("nn: Register%s: invalid name %q: names are non-empty and contain no dot", kind, name))
	}
	for _, p := range b.params {
		if p.Name == name {
			panic(fmt.Sprintf("nn: Register%s: %q is already a parameter", kind, name))
		}
	}
	for _, p := range b.buffers {
		if p.Name == name {
			panic(fmt.Sprintf("nn: Register%s: %q is already a buffer", kind, name))
		}
	}
	for _, p := range b.children {
		if p.Name == name {
			panic(fmt.Sprintf("nn: Register%s: %q is already a sub-module", kind, name))
		}
	}
}

// RegisterParameter adds p under name and returns p. The module takes
// ownership of p.
func (b *Base) RegisterParameter(name string, p *autograd.Var) *autograd.Var {
	if p == nil {
		panic(fmt.Sprintf("nn: RegisterParameter(%q): nil parameter", name))
	}
	b.checkName("Parameter", name)
	b.params = append(b.params, NamedParameter{name, p})
	return p
}

// RegisterBuffer adds t under name and returns t. The module takes
// ownership of t; LoadStateDict writes into it in place.
func (b *Base) RegisterBuffer(name string, t *tensor.Tensor) *tensor.Tensor {
	if t == nil {
		panic(fmt.Sprintf("nn: RegisterBuffer(%q): nil buffer", name))
	}
	b.checkName("Buffer", name)
	b.buffers = append(b.buffers, NamedBuffer{name, t})
	return t
}

// RegisterModule adds m as a child under name and returns m. Its parts are
// named "name.<part>". The module takes ownership of m.
func (b *Base) RegisterModule(name string, m Module) Module {
	if m == nil {
		panic(fmt.Sprintf("nn: RegisterModule(%q): nil module", name))
	}
	b.checkName("Module", name)
	b.children = append(b.children, NamedModule{name, m})
	return m
}

// NamedParameters implements Module.
func (b *Base) NamedParameters() []NamedParameter {
	var out []NamedParameter
	seen := map[*autograd.Var]bool{}
	b.walk("", map[*Base]bool{}, func(prefix string, m *Base) {
		for _, p := range m.params {
			if !seen[p.Param] {
				seen[p.Param] = true
				out = append(out, NamedParameter{prefix + p.Name, p.Param})
			}
		}
	}, func(prefix string, m Module) {
		for _, p := range m.NamedParameters() {
			if !seen[p.Param] {
				seen[p.Param] = true
				out = append(out, NamedParameter{prefix + p.Name, p.Param})
			}
		}
	})
	return out
}

// NamedBuffers implements Module.
func (b *Base) NamedBuffers() []NamedBuffer {
	var out []NamedBuffer
	seen := map[*tensor.Tensor]bool{}
	b.walk("", map[*Base]bool{}, func(prefix string, m *Base) {
		for _, p := range m.buffers {
			if !seen[p.Buffer] {
				seen[p.Buffer] = true
				out = append(out, NamedBuffer{prefix + p.Name, p.Buffer})
			}
		}
	}, func(prefix string, m Module) {
		for _, p := range m.NamedBuffers() {
			if !seen[p.Buffer] {
				seen[p.Buffer] = true
				out = append(out, NamedBuffer{prefix + p.Name, p.Buffer})
			}
		}
	})
	return out
}

// walk visits b and its descendants in pre-order, each module once: own
// for modules built on Base, foreign for others (whose own methods then
// cover their subtree).
func (b *Base) walk(prefix string, seen map[*Base]bool, own func(string, *Base), foreign func(string, Module)) {
	if seen[b] {
		return
	}
	seen[b] = true
	own(prefix, b)
	for _, c := range b.children {
		p := prefix + c.Name + "."
		if cb, ok := c.Module.(baser); ok {
			cb.base().walk(p, seen, own, foreign)
		} else {
			foreign(p, c.Module)
		}
	}
}

// Children implements Module.
func (b *Base) Children() []NamedModule { return append([]NamedModule(nil), b.children...) }

// SetTraining implements Module.
func (b *Base) SetTraining(training bool) {
	b.eval = !training
	for _, c := range b.children {
		c.Module.SetTraining(training)
	}
}

// Training implements Module.
func (b *Base) Training() bool { return !b.eval }

// Release implements Module. Parts shared between sub-modules are released
// once.
func (b *Base) Release() {
	b.eachPart((*autograd.Var).Release, (*tensor.Tensor).Release, Module.Release)
}

// To implements Module. Parts shared between sub-modules move once.
func (b *Base) To(dev tensor.Device) {
	b.eachPart(
		func(v *autograd.Var) { v.Value.MoveTo(dev) },
		func(t *tensor.Tensor) { t.MoveTo(dev) },
		func(m Module) { m.To(dev) },
	)
}

// eachPart calls param with every distinct parameter of b's tree, buffer
// with every distinct buffer, and other with every distinct sub-module that
// does not embed Base (whose parts it cannot see).
func (b *Base) eachPart(param func(*autograd.Var), buffer func(*tensor.Tensor), other func(Module)) {
	vars := map[*autograd.Var]bool{}
	bufs := map[*tensor.Tensor]bool{}
	others := map[Module]bool{}
	b.walk("", map[*Base]bool{}, func(_ string, m *Base) {
		for _, p := range m.params {
			if !vars[p.Param] {
				vars[p.Param] = true
				param(p.Param)
			}
		}
		for _, p := range m.buffers {
			if !bufs[p.Buffer] {
				bufs[p.Buffer] = true
				buffer(p.Buffer)
			}
		}
	}, func(_ string, m Module) {
		if !others[m] {
			others[m] = true
			other(m)
		}
	})
}

// Parameters returns m's parameters in the order of NamedParameters.
func Parameters(m Module) []*autograd.Var {
	named := m.NamedParameters()
	out := make([]*autograd.Var, len(named))
	for i, p := range named {
		out[i] = p.Param
	}
	return out
}

// NumParameters returns the number of elements in m's parameters.
func NumParameters(m Module) int {
	n := 0
	for _, p := range m.NamedParameters() {
		n += p.Param.Value.NumElements()
	}
	return n
}

// NamedModules returns m (named "") and its descendants in pre-order with
// dotted names, each module once.
func NamedModules(m Module) []NamedModule {
	out := []NamedModule{{"", m}}
	seen := map[Module]bool{m: true}
	var visit func(prefix string, m Module)
	visit = func(prefix string, m Module) {
		for _, c := range m.Children() {
			if seen[c.Module] {
				continue
			}
			seen[c.Module] = true
			out = append(out, NamedModule{prefix + c.Name, c.Module})
			visit(prefix+c.Name+".", c.Module)
		}
	}
	visit("", m)
	return out
}

// Train puts m and its descendants in training mode.
func Train(m Module) { m.SetTraining(true) }

// Eval puts m and its descendants in evaluation mode.
func Eval(m Module) { m.SetTraining(false) }

// ZeroGrad clears the gradients of m's parameters.
func ZeroGrad(m Module) {
	for _, p := range m.NamedParameters() {
		p.Param.ZeroGrad()
	}
}

// identity returns a Var with x's value (a new reference) through which
// gradients pass unchanged.
func identity(x *autograd.Var) *autograd.Var {
	return autograd.Record("Identity", x.Value.Retain(), []*autograd.Var{x}, nil,
		func(_ *autograd.Context, g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{g.Retain()}
		})
}
