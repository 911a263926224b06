package optim_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// param returns a float64 parameter with value v and gradient g (none when
// g is nil), both of shape sh.
func param(t *testing.T, sh tensor.Shape, v, g []float64) *autograd.Var {
	t.Helper()
	p := autograd.Param(tensor.FromSlice(slices.Clone(v), sh))
	if g != nil {
		p.SetGrad(tensor.FromSlice(slices.Clone(g), sh))
	}
	t.Cleanup(p.Release)
	return p
}

// near reports whether got is within rel·|want| of want, element by element.
func near(got, want []float64, rel float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= rel*math.Abs(want[i])) {
			return false
		}
	}
	return true
}

// sgdStep is the reference p − η·(g + λ·p).
func sgdStep(p, g []float64, lr, wd float64) []float64 {
	out := make([]float64, len(p))
	for i := range p {
		out[i] = p[i] - lr*(g[i]+wd*p[i])
	}
	return out
}

func TestGroupsOwnRateAndDecay(t *testing.T) {
	t.Parallel()
	av, ag := []float64{1, -2, 3, 0.5}, []float64{0.1, 0.2, -0.3, 0.4}
	bv, bg := []float64{-1, 4}, []float64{0.5, -0.25}
	a := param(t, tensor.Shape{2, 2}, av, ag)
	b := param(t, tensor.Shape{2}, bv, bg)
	ga := optim.NewGroup([]*autograd.Var{a}, []string{"a"}, 0.1, 0.01)
	gb := optim.NewGroup([]*autograd.Var{b}, []string{"b"}, 0.02, 0.5)
	opt := optim.NewSGD([]*optim.Group{ga, gb}, optim.SGDOptions{})

	opt.Step()
	av, bv = sgdStep(av, ag, 0.1, 0.01), sgdStep(bv, bg, 0.02, 0.5)
	if !near(a.Value.Float64s(), av, 1e-15) || !near(b.Value.Float64s(), bv, 1e-15) {
		t.Fatalf("step 1: a = %v, b = %v; want %v, %v", a.Value.Float64s(), b.Value.Float64s(), av, bv)
	}

	// SetLR scales every group by the same factor: 0.1 → 0.05 halves both.
	opt.SetLR(0.05)
	if ga.LR != 0.05 || math.Abs(gb.LR-0.01) > 1e-17 {
		t.Fatalf("SetLR(0.05): rates %v, %v; want 0.05, 0.01", ga.LR, gb.LR)
	}
	if g := opt.Groups(); len(g) != 2 || g[0] != ga || g[1] != gb {
		t.Fatalf("Groups() = %v, want the groups given", g)
	}
	opt.Step()
	av, bv = sgdStep(av, ag, 0.05, 0.01), sgdStep(bv, bg, gb.LR, 0.5)
	if !near(a.Value.Float64s(), av, 1e-15) || !near(b.Value.Float64s(), bv, 1e-15) {
		t.Fatalf("step 2: a = %v, b = %v; want %v, %v", a.Value.Float64s(), b.Value.Float64s(), av, bv)
	}

	// The ratio is to the initial rates, so repeated calls do not compound.
	opt.SetLR(0.3)
	opt.SetLR(0.1)
	if ga.LR != 0.1 || math.Abs(gb.LR-0.02) > 1e-17 {
		t.Errorf("SetLR(0.3) then SetLR(0.1): rates %v, %v; want 0.1, 0.02", ga.LR, gb.LR)
	}
}

func TestSetLRFirstGroupZero(t *testing.T) {
	t.Parallel()
	a := param(t, tensor.Shape{1}, []float64{1}, nil)
	b := param(t, tensor.Shape{1}, []float64{1}, nil)
	ga := optim.NewGroup([]*autograd.Var{a}, nil, 0, 0)
	gb := optim.NewGroup([]*autograd.Var{b}, nil, 0.3, 0)
	opt := optim.NewSGD([]*optim.Group{ga, gb}, optim.SGDOptions{})
	opt.SetLR(0.2)
	if ga.LR != 0.2 || gb.LR != 0.2 {
		t.Errorf("SetLR(0.2) with a first rate of 0: rates %v, %v; want 0.2 for both", ga.LR, gb.LR)
	}
	optim.NewSGD(nil, optim.SGDOptions{}).SetLR(1)
}

// TestAdamWDecoupledDecay checks that the decay of AdamW shrinks the
// parameter by η·λ whatever the gradient: with a zero gradient the moments
// stay zero and the update is the decay alone, per group.
func TestAdamWDecoupledDecay(t *testing.T) {
	t.Parallel()
	av, bv := []float64{1, -2, 3}, []float64{0.5, -4}
	a := param(t, tensor.Shape{3}, av, []float64{0, 0, 0})
	b := param(t, tensor.Shape{2}, bv, []float64{0, 0})
	opt := optim.NewAdamW([]*optim.Group{
		optim.NewGroup([]*autograd.Var{a}, nil, 0.1, 0.2),
		optim.NewGroup([]*autograd.Var{b}, nil, 0.01, 0),
	}, optim.AdamWOptions{})
	for range 3 {
		opt.Step()
		for i := range av {
			av[i] *= 1 - 0.1*0.2
		}
		if !near(a.Value.Float64s(), av, 1e-15) {
			t.Fatalf("a = %v, want %v", a.Value.Float64s(), av)
		}
		if !slices.Equal(b.Value.Float64s(), bv) {
			t.Fatalf("b without decay = %v, want %v", b.Value.Float64s(), bv)
		}
	}
}

// TestAdamWBiasCorrection checks the first step: with bias correction
// m̂ = g and v̂ = g², so every element moves by η·g/(|g| + ε) whatever the
// betas.
func TestAdamWBiasCorrection(t *testing.T) {
	t.Parallel()
	for _, amsgrad := range []bool{false, true} {
		for _, betas := range [][2]float64{{0.9, 0.999}, {0.5, 0.6}} {
			v, g := []float64{1, -2, 3, 4}, []float64{0.3, -1e-3, 50, -7}
			p := param(t, tensor.Shape{4}, v, g)
			opt := optim.NewAdamW([]*optim.Group{optim.NewGroup([]*autograd.Var{p}, nil, 0.01, 0)},
				optim.AdamWOptions{Beta1: betas[0], Beta2: betas[1], Eps: 1e-6, AMSGrad: amsgrad})
			opt.Step()
			for i := range v {
				v[i] -= 0.01 * g[i] / (math.Abs(g[i]) + 1e-6)
			}
			if got := p.Value.Float64s(); !near(got, v, 1e-14) {
				t.Errorf("betas %v, amsgrad %v: after one step %v, want %v", betas, amsgrad, got, v)
			}
		}
	}
}

// TestLARSTrustRatio checks the update of each kind of group against the
// formula: an adapting weight, an adapting weight of norm 0 (ratio 1) and a
// NoAdapt group, which neither adapts nor decays.
func TestLARSTrustRatio(t *testing.T) {
	t.Parallel()
	const lr, wd, trust, eps = 0.5, 0.1, 0.01, 1e-8
	wv, wg := []float64{3, 0, 0, 4}, []float64{1, -2, 2, 0} // ‖w‖ = 5, ‖g‖ = 3
	zv, zg := []float64{0, 0}, []float64{1, 2}
	bv, bg := []float64{1, 2}, []float64{-0.5, 0.25}
	w := param(t, tensor.Shape{2, 2}, wv, wg)
	z := param(t, tensor.Shape{2}, zv, zg)
	b := param(t, tensor.Shape{2}, bv, bg)
	fixed := optim.NewGroup([]*autograd.Var{b}, nil, lr, wd)
	fixed.NoAdapt = true
	opt := optim.NewLARS([]*optim.Group{
		optim.NewGroup([]*autograd.Var{w, z}, nil, lr, wd), fixed,
	}, optim.LARSOptions{TrustCoefficient: trust, Eps: eps})
	opt.Step()

	r := trust * 5 / (3 + wd*5 + eps)
	want := make([]float64, 4)
	for i := range wv {
		want[i] = wv[i] - lr*r*(wg[i]+wd*wv[i])
	}
	if got := w.Value.Float64s(); !near(got, want, 1e-15) {
		t.Errorf("adapting weight: %v, want %v", got, want)
	}
	if got, want := z.Value.Float64s(), []float64{-lr * zg[0], -lr * zg[1]}; !near(got, want, 1e-15) {
		t.Errorf("weight of norm 0: %v, want %v", got, want)
	}
	if got, want := b.Value.Float64s(), []float64{bv[0] - lr*bg[0], bv[1] - lr*bg[1]}; !near(got, want, 1e-15) {
		t.Errorf("NoAdapt group: %v, want %v", got, want)
	}
}

func TestSplitForLARS(t *testing.T) {
	t.Parallel()
	shapes := []tensor.Shape{{4, 3}, {4}, {2, 3, 3, 3}, {2}, {}, {5, 1}}
	var ps []*autograd.Var
	for _, sh := range shapes {
		ps = append(ps, param(t, sh, make([]float64, sh.NumElements()), nil))
	}
	names := []string{"fc.weight", "fc.bias", "conv.weight", "bn.weight", "scale", "head.weight"}
	for _, named := range []bool{true, false} {
		var ns []string
		if named {
			ns = names
		}
		gs := optim.SplitForLARS(ps, ns, 0.4, 1e-4)
		if len(gs) != 2 {
			t.Fatalf("SplitForLARS returned %d groups", len(gs))
		}
		adapt, fixed := gs[0], gs[1]
		if !slices.Equal(adapt.Params, []*autograd.Var{ps[0], ps[2], ps[5]}) ||
			!slices.Equal(fixed.Params, []*autograd.Var{ps[1], ps[3], ps[4]}) {
			t.Errorf("split %v / %v, want the rank ≥ 2 parameters to adapt", adapt.Params, fixed.Params)
		}
		wantNames := [2][]string{{"fc.weight", "conv.weight", "head.weight"}, {"fc.bias", "bn.weight", "scale"}}
		if !named {
			wantNames = [2][]string{}
		}
		if !slices.Equal(adapt.Names, wantNames[0]) || !slices.Equal(fixed.Names, wantNames[1]) {
			t.Errorf("names %q / %q, want %q", adapt.Names, fixed.Names, wantNames)
		}
		if adapt.LR != 0.4 || adapt.WeightDecay != 1e-4 || adapt.NoAdapt {
			t.Errorf("adapting group: %+v", *adapt)
		}
		if fixed.LR != 0.4 || fixed.WeightDecay != 0 || !fixed.NoAdapt {
			t.Errorf("fixed group: %+v", *fixed)
		}
		optim.NewLARS(gs, optim.LARSOptions{})
	}
}

// kinds builds each optimizer, with momentum and decay so that every
// buffer exists, over groups.
var kinds = []struct {
	name  string
	build func([]*optim.Group) optim.Optimizer
}{
	{"SGD", func(g []*optim.Group) optim.Optimizer {
		return optim.NewSGD(g, optim.SGDOptions{Momentum: 0.9, Dampening: 0.1})
	}},
	{"AdamW", func(g []*optim.Group) optim.Optimizer {
		return optim.NewAdamW(g, optim.AdamWOptions{AMSGrad: true})
	}},
	{"LARS", func(g []*optim.Group) optim.Optimizer {
		return optim.NewLARS(g, optim.LARSOptions{Momentum: 0.9})
	}},
}

// TestSkipsParamsWithoutGradient checks that a parameter without a
// gradient is neither updated (not even decayed) nor given state, and that
// its buffers start afresh once it has a gradient.
func TestSkipsParamsWithoutGradient(t *testing.T) {
	t.Parallel()
	for _, k := range kinds {
		av, bv, g := []float64{1, 2}, []float64{3, -4}, []float64{0.5, -0.5}
		a := param(t, tensor.Shape{2}, av, g)
		b := param(t, tensor.Shape{2}, bv, nil)
		opt := k.build([]*optim.Group{optim.NewGroup([]*autograd.Var{a, b}, []string{"a", "b"}, 0.1, 0.1)})
		opt.Step()
		opt.Step()
		if slices.Equal(a.Value.Float64s(), av) {
			t.Errorf("%s: the parameter with a gradient did not move", k.name)
		}
		if !slices.Equal(b.Value.Float64s(), bv) {
			t.Errorf("%s: the parameter without a gradient moved to %v", k.name, b.Value.Float64s())
		}
		ts, _ := opt.State()
		for key, x := range ts {
			if strings.HasPrefix(key, "b.") {
				t.Errorf("%s: state %q for a parameter without a gradient", k.name, key)
			}
			x.Release()
		}

		// Once b has a gradient its buffers start as a fresh optimizer's.
		bg := []float64{0.25, 1}
		a.SetGrad(tensor.FromSlice(slices.Clone(g), tensor.Shape{2}))
		b.SetGrad(tensor.FromSlice(slices.Clone(bg), tensor.Shape{2}))
		opt.Step()
		lone := param(t, tensor.Shape{2}, bv, bg)
		fresh := k.build([]*optim.Group{optim.NewGroup([]*autograd.Var{lone}, []string{"b"}, 0.1, 0.1)})
		fresh.Step()
		got, want := snap(opt), snap(fresh)
		n := 0
		for key, x := range want.tensors {
			n++
			if !slices.Equal(got.tensors[key], x) {
				t.Errorf("%s: %s = %v after b's first gradient, want a fresh optimizer's %v", k.name, key, got.tensors[key], x)
			}
		}
		if n == 0 {
			t.Errorf("%s: no state to compare", k.name)
		}

		opt.ZeroGrad()
		if a.Grad() != nil || b.Grad() != nil {
			t.Errorf("%s: ZeroGrad left a gradient", k.name)
		}
	}
}

// stepped returns an optimizer of kind k over two fresh named parameters in
// dtype dt, after n steps with fixed gradients, and the parameters.
func stepped(t *testing.T, k int, dt tensor.DType, n int) (optim.Optimizer, []*autograd.Var) {
	t.Helper()
	w := param(t, tensor.Shape{2, 3}, []float64{1, -2, 3, 0.5, -0.25, 2}, nil)
	b := param(t, tensor.Shape{3}, []float64{0.1, 0.2, -0.3}, nil)
	ps := []*autograd.Var{w, b}
	for _, p := range ps {
		v := p.Value.Cast(dt)
		p.Value.Release()
		p.Value = v
	}
	opt := kinds[k].build([]*optim.Group{
		optim.NewGroup([]*autograd.Var{w}, []string{"layer.w"}, 0.05, 0.01),
		optim.NewGroup([]*autograd.Var{b}, []string{"layer.b"}, 0.1, 0),
	})
	for i := range n {
		stepWith(opt, ps, i)
	}
	return opt, ps
}

// stepWith gives ps gradients that depend on i and steps.
func stepWith(opt optim.Optimizer, ps []*autograd.Var, i int) {
	for j, p := range ps {
		g := tensor.Full(p.Value.Shape(), math.Sin(float64(3*i+j+1)), tensor.Of(p.Value.DType()))
		g.AddInPlace(p.Value)
		p.SetGrad(g)
	}
	opt.Step()
}

// snapshot is an optimizer's state as host values, for comparisons.
type snapshot struct {
	tensors map[string][]float64
	dtypes  map[string]tensor.DType
	scalars map[string]string
}

func snap(opt optim.Optimizer) snapshot {
	ts, scalars := opt.State()
	s := snapshot{tensors: map[string][]float64{}, dtypes: map[string]tensor.DType{}, scalars: scalars}
	for k, x := range ts {
		s.tensors[k] = x.Float64s()
		s.dtypes[k] = x.DType()
		x.Release()
	}
	return s
}

func (s snapshot) equal(o snapshot) bool {
	return maps.EqualFunc(s.tensors, o.tensors, slices.Equal) && maps.Equal(s.dtypes, o.dtypes) &&
		maps.Equal(s.scalars, o.scalars)
}

func TestStateKeys(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"SGD":   {"layer.b.momentum_buffer", "layer.w.momentum_buffer"},
		"AdamW": {"layer.b.exp_avg", "layer.b.exp_avg_sq", "layer.b.max_exp_avg_sq", "layer.w.exp_avg", "layer.w.exp_avg_sq", "layer.w.max_exp_avg_sq"},
		"LARS":  {"layer.b.momentum_buffer", "layer.w.momentum_buffer"},
	}
	for k, kind := range kinds {
		opt, _ := stepped(t, k, tensor.Float64, 3)
		s := snap(opt)
		if keys := slices.Sorted(maps.Keys(s.tensors)); !slices.Equal(keys, want[kind.name]) {
			t.Errorf("%s: state keys %q, want %q", kind.name, keys, want[kind.name])
		}
		wantScalars := map[string]string{"step": "3", "group.0.lr": "0.05", "group.1.lr": "0.1"}
		if !maps.Equal(s.scalars, wantScalars) {
			t.Errorf("%s: scalars %v, want %v", kind.name, s.scalars, wantScalars)
		}
	}

	// Unnamed parameters are numbered across groups.
	a := param(t, tensor.Shape{1}, []float64{1}, []float64{1})
	b := param(t, tensor.Shape{1}, []float64{1}, []float64{1})
	c := param(t, tensor.Shape{1}, []float64{1}, []float64{1})
	opt := optim.NewSGD([]*optim.Group{
		optim.NewGroup([]*autograd.Var{a, b}, nil, 0.1, 0),
		optim.NewGroup([]*autograd.Var{c}, nil, 0.1, 0),
	}, optim.SGDOptions{Momentum: 0.5})
	opt.Step()
	keys := slices.Sorted(maps.Keys(snap(opt).tensors))
	if want := []string{"0.momentum_buffer", "1.momentum_buffer", "2.momentum_buffer"}; !slices.Equal(keys, want) {
		t.Errorf("unnamed state keys %q, want %q", keys, want)
	}
}

// TestStateIsACopy checks that State's tensors do not follow later steps
// and that LoadState's copies do not follow later changes to its input.
func TestStateIsACopy(t *testing.T) {
	t.Parallel()
	for k, kind := range kinds {
		opt, ps := stepped(t, k, tensor.Float64, 2)
		before := snap(opt)
		ts, scalars := opt.State()
		stepWith(opt, ps, 2)
		for key, x := range ts {
			if !slices.Equal(x.Float64s(), before.tensors[key]) {
				t.Errorf("%s: State's %s changed with the next step", kind.name, key)
			}
		}

		twin, tps := stepped(t, k, tensor.Float64, 2)
		if err := twin.LoadState(ts, scalars); err != nil {
			t.Fatalf("%s: %v", kind.name, err)
		}
		for _, x := range ts {
			x.Fill(1e3)
			x.Release()
		}
		if got := snap(twin); !got.equal(before) {
			t.Errorf("%s: loaded state follows changes to LoadState's input", kind.name)
		}
		stepWith(twin, tps, 2)
		if !snap(twin).equal(snap(opt)) {
			t.Errorf("%s: step after LoadState differs from the original's", kind.name)
		}
	}
}

// TestLoadStateConvertsDType loads a float64 checkpoint into a float32
// optimizer: the buffers take the parameters' dtype and steps go on.
func TestLoadStateConvertsDType(t *testing.T) {
	t.Parallel()
	for k, kind := range kinds {
		src, _ := stepped(t, k, tensor.Float64, 2)
		dst, ps := stepped(t, k, tensor.Float32, 0)
		ts, scalars := src.State()
		if err := dst.LoadState(ts, scalars); err != nil {
			t.Fatalf("%s: %v", kind.name, err)
		}
		for _, x := range ts {
			x.Release()
		}
		s := snap(dst)
		for key, dt := range s.dtypes {
			if dt != tensor.Float32 {
				t.Errorf("%s: loaded %s is %v, want float32", kind.name, key, dt)
			}
		}
		stepWith(dst, ps, 2)
	}
}

func TestLoadStateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(ts map[string]*tensor.Tensor, sc map[string]string)
		want   string
	}{
		{"unknown parameter", func(ts map[string]*tensor.Tensor, _ map[string]string) {
			ts["layer.c.momentum_buffer"] = tensor.Zeros(tensor.Shape{3}, tensor.Of(tensor.Float64))
		}, "matches no parameter"},
		{"no buffer name", func(ts map[string]*tensor.Tensor, _ map[string]string) {
			ts["step"] = tensor.Zeros(tensor.Shape{3}, tensor.Of(tensor.Float64))
		}, "matches no parameter"},
		{"unknown buffer", func(ts map[string]*tensor.Tensor, _ map[string]string) {
			ts["layer.b.velocity"] = tensor.Zeros(tensor.Shape{3}, tensor.Of(tensor.Float64))
		}, "no buffer"},
		{"wrong shape", func(ts map[string]*tensor.Tensor, _ map[string]string) {
			for k, x := range ts {
				if strings.HasPrefix(k, "layer.w.") {
					ts[k] = x.Reshape(3, 2).Contiguous()
					x.Release()
					break
				}
			}
		}, "shape"},
		{"missing step", func(_ map[string]*tensor.Tensor, sc map[string]string) { delete(sc, "step") }, "step"},
		{"malformed step", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["step"] = "5abc" }, "step"},
		{"fractional step", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["step"] = "2.5" }, "step"},
		{"negative step", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["step"] = "-1" }, "step"},
		{"malformed rate", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["group.1.lr"] = "fast" }, "group.1.lr"},
		{"negative rate", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["group.0.lr"] = "-0.1" }, "group.0.lr"},
		{"NaN rate", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["group.0.lr"] = "NaN" }, "group.0.lr"},
		{"rate of a missing group", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["group.2.lr"] = "0.1" }, "unknown scalar"},
		{"unknown scalar", func(_ map[string]*tensor.Tensor, sc map[string]string) { sc["epoch"] = "3" }, "unknown scalar"},
	}
	for k, kind := range kinds {
		for _, tc := range tests {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				// The checkpoint comes from a run two steps further on, so
				// that a partial load would show.
				src, _ := stepped(t, k, tensor.Float64, 4)
				ts, scalars := src.State()
				defer func() {
					for _, x := range ts {
						x.Release()
					}
				}()
				tc.modify(ts, scalars)

				opt, ps := stepped(t, k, tensor.Float64, 2)
				before := snap(opt)
				lrs := []float64{opt.Groups()[0].LR, opt.Groups()[1].LR}
				err := opt.LoadState(ts, scalars)
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "optim: ") {
					t.Fatalf("LoadState: error %v, want one mentioning %q", err, tc.want)
				}
				if !snap(opt).equal(before) || opt.Groups()[0].LR != lrs[0] || opt.Groups()[1].LR != lrs[1] {
					t.Fatalf("failed LoadState changed the optimizer")
				}

				twin, tps := stepped(t, k, tensor.Float64, 2)
				stepWith(opt, ps, 2)
				stepWith(twin, tps, 2)
				if !snap(opt).equal(snap(twin)) {
					t.Errorf("after a failed LoadState the next step differs from an untouched optimizer's")
				}
			})
		}
	}
}

func TestConstructorPanics(t *testing.T) {
	t.Parallel()
	p := param(t, tensor.Shape{1}, []float64{1}, nil)
	q := param(t, tensor.Shape{1}, []float64{1}, nil)
	one := func(lr float64, names ...string) []*optim.Group {
		return []*optim.Group{optim.NewGroup([]*autograd.Var{p}, names, lr, 0)}
	}
	tests := []struct {
		name  string
		build func()
	}{
		{"Nesterov without momentum", func() { optim.NewSGD(one(0.1), optim.SGDOptions{Nesterov: true}) }},
		{"Nesterov with dampening", func() {
			optim.NewSGD(one(0.1), optim.SGDOptions{Nesterov: true, Momentum: 0.9, Dampening: 0.1})
		}},
		{"AdamW beta1 = 1", func() { optim.NewAdamW(one(0.1), optim.AdamWOptions{Beta1: 1}) }},
		{"AdamW negative beta2", func() { optim.NewAdamW(one(0.1), optim.AdamWOptions{Beta2: -0.5}) }},
		{"negative rate", func() { optim.NewLARS(one(-0.1), optim.LARSOptions{}) }},
		{"NaN rate", func() { optim.NewSGD(one(math.NaN()), optim.SGDOptions{}) }},
		{"names not parallel", func() { optim.NewSGD(one(0.1, "a", "b"), optim.SGDOptions{}) }},
		{"duplicate names", func() {
			optim.NewSGD([]*optim.Group{
				optim.NewGroup([]*autograd.Var{p}, []string{"x"}, 0.1, 0),
				optim.NewGroup([]*autograd.Var{q}, []string{"x"}, 0.1, 0),
			}, optim.SGDOptions{})
		}},
	}
	for _, tc := range tests {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("%s: no panic", tc.name)
				} else if !strings.HasPrefix(fmt.Sprint(r), "optim: ") {
					t.Errorf("%s: panic %q lacks the package prefix", tc.name, r)
				}
			}()
			tc.build()
		}()
	}
}

func TestRelease(t *testing.T) {
	p := autograd.Param(tensor.Ones(tensor.Shape{3}))
	defer p.Release()
	opt := optim.NewSGD([]*optim.Group{optim.NewGroup([]*autograd.Var{p}, nil, 0.1, 0)}, optim.SGDOptions{Momentum: 0.9})
	p.SetGrad(tensor.Ones(tensor.Shape{3}))
	opt.Step()
	ts, _ := opt.State()
	if len(ts) != 1 {
		t.Fatalf("%d state tensors after a momentum step, want 1", len(ts))
	}
	for _, s := range ts {
		s.Release()
	}
	opt.Release()
	if ts, _ := opt.State(); len(ts) != 0 {
		t.Errorf("%d state tensors after Release, want 0", len(ts))
	}
}
