package nn

import (
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// block is a module with a parameter, a buffer and two children, registered
// in that order, like a PyTorch module that assigns self.scale, a buffer,
// self.conv and self.bn.
type block struct {
	Base
	conv *Conv2d
	bn   *BatchNorm2d
}

func newBlock(g *tensor.Generator) *block {
	b := &block{}
	b.RegisterParameter("scale", autograd.Param(tensor.Ones(tensor.Shape{1})))
	b.RegisterBuffer("steps", tensor.Zeros(tensor.Shape{}, tensor.Of(tensor.Int64)))
	b.conv = NewConv2d(2, 3, 3, Conv2dOptions{NoBias: true}, g)
	b.RegisterModule("conv", b.conv)
	b.bn = NewBatchNorm2d(3, BatchNormOptions{})
	b.RegisterModule("bn", b.bn)
	return b
}

func TestNames(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(1)
	m := NewSequential(NewLinear(4, 3, true, g), NewReLU(), NewLinear(3, 2, false, g))
	outer := &Base{}
	outer.RegisterModule("features", m)
	outer.RegisterModule("block", newBlock(g))
	defer outer.Release()

	var params []string
	for _, p := range outer.NamedParameters() {
		params = append(params, p.Name)
	}
	wantParams := []string{"features.0.weight", "features.0.bias", "features.2.weight", "block.scale", "block.conv.weight", "block.bn.weight", "block.bn.bias"}
	if !slices.Equal(params, wantParams) {
		t.Errorf("NamedParameters = %v, want %v", params, wantParams)
	}
	var buffers []string
	for _, b := range outer.NamedBuffers() {
		buffers = append(buffers, b.Name)
	}
	wantBuffers := []string{"block.steps", "block.bn.running_mean", "block.bn.running_var", "block.bn.num_batches_tracked"}
	if !slices.Equal(buffers, wantBuffers) {
		t.Errorf("NamedBuffers = %v, want %v", buffers, wantBuffers)
	}
	// PyTorch's state_dict order: own parameters, own buffers, children.
	wantKeys := []string{"features.0.weight", "features.0.bias", "features.2.weight",
		"block.scale", "block.steps", "block.conv.weight",
		"block.bn.weight", "block.bn.bias", "block.bn.running_mean", "block.bn.running_var", "block.bn.num_batches_tracked"}
	if keys := StateKeys(outer); !slices.Equal(keys, wantKeys) {
		t.Errorf("StateKeys = %v, want %v", keys, wantKeys)
	}
	var modules []string
	for _, nm := range NamedModules(outer) {
		modules = append(modules, nm.Name)
	}
	wantModules := []string{"", "features", "features.0", "features.1", "features.2", "block", "block.conv", "block.bn"}
	if !slices.Equal(modules, wantModules) {
		t.Errorf("NamedModules = %v, want %v", modules, wantModules)
	}
	if n, want := NumParameters(outer), 4*3+3+3*2+1+3*2*9+3+3; n != want {
		t.Errorf("NumParameters = %d, want %d", n, want)
	}
	if ps := Parameters(outer); len(ps) != len(wantParams) || ps[3] != outer.Children()[1].Module.(*block).params[0].Param {
		t.Errorf("Parameters does not follow NamedParameters")
	}
}

func TestSharedParameters(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(2)
	emb := NewEmbedding(5, 3, g)
	head := &Linear{In: 3, Out: 5, Weight: emb.Weight}
	head.RegisterParameter("weight", emb.Weight)
	m := &Base{}
	m.RegisterModule("emb", emb)
	m.RegisterModule("head", head)
	m.RegisterModule("again", emb)
	named := m.NamedParameters()
	if len(named) != 1 || named[0].Name != "emb.weight" {
		t.Errorf("tied weight: NamedParameters = %v, want one entry emb.weight", named)
	}
	if keys := StateKeys(m); !slices.Equal(keys, []string{"emb.weight", "head.weight", "again.weight"}) {
		t.Errorf("tied weight: StateKeys = %v, want every name", keys)
	}
	if got := len(NamedModules(m)); got != 3 {
		t.Errorf("NamedModules lists %d modules, want 3 (a shared module once)", got)
	}
	m.Release() // must release the shared weight once
	if !emb.Weight.Value.Released() {
		t.Errorf("Release left the tied weight alive")
	}
}

func TestTrainEval(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(3)
	b := newBlock(g)
	m := NewSequential(NewDropout(0.5, g), NewIdentity())
	root := &Base{}
	root.RegisterModule("b", b)
	root.RegisterModule("seq", m)
	defer root.Release()
	check := func(want bool) {
		t.Helper()
		for _, nm := range NamedModules(root) {
			if nm.Module.Training() != want {
				t.Errorf("module %q: Training() = %v, want %v", nm.Name, !want, want)
			}
		}
	}
	check(true)
	Eval(root)
	check(false)
	Train(root)
	check(true)
}

func TestRegisterErrors(t *testing.T) {
	t.Parallel()
	p := func() *autograd.Var { return autograd.Param(tensor.Zeros(tensor.Shape{1})) }
	for _, c := range []struct {
		name string
		f    func(b *Base)
		msg  string
	}{
		{"dot", func(b *Base) { b.RegisterParameter("a.b", p()) }, `invalid name "a.b"`},
		{"empty", func(b *Base) { b.RegisterBuffer("", tensor.Zeros(nil)) }, `invalid name ""`},
		{"duplicate parameter", func(b *Base) { b.RegisterParameter("w", p()); b.RegisterParameter("w", p()) }, `"w" is already a parameter`},
		{"buffer over module", func(b *Base) { b.RegisterModule("m", NewReLU()); b.RegisterBuffer("m", tensor.Zeros(nil)) }, `"m" is already a sub-module`},
		{"nil", func(b *Base) { b.RegisterModule("m", nil) }, "nil module"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.msg) {
					t.Errorf("panic %v, want one containing %q", r, c.msg)
				}
			}()
			c.f(&Base{})
		})
	}
}

func TestForwardShapeErrors(t *testing.T) {
	t.Parallel()
	g := tensor.NewGenerator(4)
	for _, c := range []struct {
		name  string
		l     Layer
		shape tensor.Shape
		msg   string
	}{
		{"linear", NewLinear(4, 2, true, g), tensor.Shape{3, 5}, "last axis must be 4"},
		{"conv", NewConv2d(3, 2, 3, Conv2dOptions{}, g), tensor.Shape{1, 2, 5, 5}, "want [N, 3, H, W]"},
		{"batchnorm", NewBatchNorm2d(3, BatchNormOptions{}), tensor.Shape{2, 3}, "want [N, 3, H, W]"},
		{"layernorm", NewLayerNorm(tensor.Shape{3, 4}, LayerNormOptions{}), tensor.Shape{2, 4, 3}, "trailing axes must be [3 4]"},
		{"attention", NewMultiheadAttention(8, 2, AttentionOptions{}, g), tensor.Shape{2, 8}, "want [B, T, 8]"},
		{"pool", NewMaxPool2d(2, PoolOptions{}), tensor.Shape{3, 4, 4}, "want [N, C, H, W]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.l.Release()
			x := autograd.Const(tensor.Zeros(c.shape))
			defer x.Release()
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.msg) {
					t.Errorf("panic %v, want one containing %q", r, c.msg)
				}
			}()
			c.l.Forward(x).Release()
		})
	}
}
