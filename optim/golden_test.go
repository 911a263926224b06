package optim_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// Golden tests: five steps of each optimizer against torch.optim (and the
// torch transcription of LARS) on the cases of
// testdata/golden/gen_optim.py. Each case holds a [3, 4] weight w and a [4]
// bias b, the gradients of every step and the parameters after every step,
// all in float64; its settings are JSON in the file's metadata.
//
// Tolerance, per element: |got − want| ≤ tol·|want|, with tol = 1e-12 in
// float64 and 1e-5 in float32 (parameters, gradients and state all float32;
// the references stay float64).

const goldenSteps = 5

// goldenPrecision is one of the precisions the golden cases run in.
type goldenPrecision struct {
	dt  tensor.DType
	tol float64
}

var goldenPrecisions = []goldenPrecision{
	{tensor.Float64, 1e-12},
	{tensor.Float32, 1e-5},
}

// goldenCase is a case's settings as gen_optim.py writes them: the keyword
// arguments of the torch optimizer (or of lars_step).
type goldenCase struct {
	Kind        string    `json:"kind"`
	LR          float64   `json:"lr"`
	Momentum    float64   `json:"momentum"`
	Dampening   float64   `json:"dampening"`
	Nesterov    bool      `json:"nesterov"`
	WeightDecay float64   `json:"weight_decay"`
	Betas       []float64 `json:"betas"`
	Eps         float64   `json:"eps"`
	AMSGrad     bool      `json:"amsgrad"`
	Trust       float64   `json:"trust"`
}

// goldenFile is testdata/golden/optim.safetensors: tensors as float64
// host slices, and the cases' settings.
type goldenFile struct {
	tensors map[string]*tensor.Tensor
	cases   map[string]goldenCase
}

func openGoldenOptim(t *testing.T) *goldenFile {
	t.Helper()
	path := filepath.Join("..", "testdata", "golden", "optim.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := safetensors.LoadTensors(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range ts {
			x.Release()
		}
	})
	g := &goldenFile{tensors: ts, cases: map[string]goldenCase{}}
	for name, raw := range f.Metadata {
		if name == "torch" {
			continue
		}
		g.cases[name] = decodeGoldenCase(t, name, raw)
	}
	if len(g.cases) != 7 {
		t.Fatalf("optim.safetensors: %d cases, want 7", len(g.cases))
	}
	return g
}

// decodeGoldenCase reads a case's JSON over the defaults of its torch
// optimizer, so that a setting the script leaves out means what it means
// in torch.
func decodeGoldenCase(t *testing.T, name, raw string) goldenCase {
	t.Helper()
	var probe struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(raw), &probe); err != nil {
		t.Fatalf("case %s: %v", name, err)
	}
	var c goldenCase
	if probe.Kind == "adamw" {
		c = goldenCase{WeightDecay: 1e-2, Betas: []float64{0.9, 0.999}, Eps: 1e-8}
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("case %s: %v", name, err)
	}
	return c
}

func (g *goldenFile) names() []string {
	var ns []string
	for n := range g.cases {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// get returns a new tensor holding the golden tensor key in dtype dt.
func (g *goldenFile) get(t *testing.T, key string, dt tensor.DType) *tensor.Tensor {
	t.Helper()
	x, ok := g.tensors[key]
	if !ok {
		t.Fatalf("optim.safetensors: no tensor %q", key)
	}
	return x.Cast(dt)
}

// goldenRun is one case being stepped: the parameters and the optimizer.
type goldenRun struct {
	w, b *autograd.Var
	opt  optim.Optimizer
}

// newGoldenRun builds case c's parameters from the initial values and the
// optimizer from its settings.
func (g *goldenFile) newGoldenRun(t *testing.T, name string, dt tensor.DType) *goldenRun {
	t.Helper()
	r := &goldenRun{
		w: autograd.Param(g.get(t, name+".w0", dt)),
		b: autograd.Param(g.get(t, name+".b0", dt)),
	}
	t.Cleanup(func() { r.w.Release(); r.b.Release() })
	r.opt = buildOptimizer(t, g.cases[name], r.w, r.b)
	return r
}

// buildOptimizer returns the flock optimizer that matches case c over the
// weight w and the bias b.
func buildOptimizer(t *testing.T, c goldenCase, w, b *autograd.Var) optim.Optimizer {
	t.Helper()
	both := []*optim.Group{optim.NewGroup([]*autograd.Var{w, b}, []string{"w", "b"}, c.LR, c.WeightDecay)}
	switch c.Kind {
	case "sgd":
		return optim.NewSGD(both, optim.SGDOptions{Momentum: c.Momentum, Dampening: c.Dampening, Nesterov: c.Nesterov})
	case "adamw":
		if len(c.Betas) != 2 {
			t.Fatalf("adamw case with betas %v", c.Betas)
		}
		return optim.NewAdamW(both, optim.AdamWOptions{Beta1: c.Betas[0], Beta2: c.Betas[1], Eps: c.Eps, AMSGrad: c.AMSGrad})
	case "lars":
		// gen_optim.py passes no_adapt=[False, True]: the weight adapts, the
		// bias does not.
		adapt := optim.NewGroup([]*autograd.Var{w}, []string{"w"}, c.LR, c.WeightDecay)
		fixed := optim.NewGroup([]*autograd.Var{b}, []string{"b"}, c.LR, c.WeightDecay)
		fixed.NoAdapt = true
		return optim.NewLARS([]*optim.Group{adapt, fixed}, optim.LARSOptions{
			Momentum: c.Momentum, Nesterov: c.Nesterov, TrustCoefficient: c.Trust, Eps: c.Eps,
		})
	}
	t.Fatalf("unknown optimizer kind %q", c.Kind)
	return nil
}

// step gives the parameters the gradients of step k and steps.
func (r *goldenRun) step(t *testing.T, g *goldenFile, name string, k int) {
	t.Helper()
	dt := r.w.Value.DType()
	r.w.SetGrad(g.get(t, fmt.Sprintf("%s.gw.%d", name, k), dt))
	r.b.SetGrad(g.get(t, fmt.Sprintf("%s.gb.%d", name, k), dt))
	r.opt.Step()
}

// check compares the parameters with those torch had after step k.
func (r *goldenRun) check(t *testing.T, g *goldenFile, name string, k int, tol float64) {
	t.Helper()
	for _, p := range []struct {
		key string
		v   *autograd.Var
	}{{"w", r.w}, {"b", r.b}} {
		want := g.tensors[fmt.Sprintf("%s.%s.%d", name, p.key, k)].Float64s()
		closeTo(t, fmt.Sprintf("%s after step %d", p.key, k), p.v.Value.Float64s(), want, tol)
	}
}

// closeTo reports the elements of got whose relative error exceeds tol.
func closeTo(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*math.Abs(want[i])) {
			t.Errorf("%s: element %d = %.17g, want %.17g (relative error %.3g)", what, i, got[i], want[i], d/math.Abs(want[i]))
		}
	}
}

func TestGoldenTorch(t *testing.T) {
	g := openGoldenOptim(t)
	for _, name := range g.names() {
		for _, pr := range goldenPrecisions {
			t.Run(fmt.Sprintf("%s/%v", name, pr.dt), func(t *testing.T) {
				t.Parallel()
				r := g.newGoldenRun(t, name, pr.dt)
				for k := range goldenSteps {
					r.step(t, g, name, k)
					r.check(t, g, name, k, pr.tol)
					gw := g.get(t, fmt.Sprintf("%s.gw.%d", name, k), pr.dt)
					if !slices.Equal(r.w.Grad().Float64s(), gw.Float64s()) {
						t.Errorf("step %d changed the gradient", k)
					}
					gw.Release()
				}
			})
		}
	}
}

// TestGoldenResume steps every golden case twice, moves the optimizer's
// state through a safetensors checkpoint into a new optimizer over copies of
// the parameters, and steps both three more times: the two must agree
// bitwise with each other, and with torch within the golden tolerance.
func TestGoldenResume(t *testing.T) {
	g := openGoldenOptim(t)
	const before = 2
	for _, name := range g.names() {
		for _, pr := range goldenPrecisions {
			t.Run(fmt.Sprintf("%s/%v", name, pr.dt), func(t *testing.T) {
				t.Parallel()
				a := g.newGoldenRun(t, name, pr.dt)
				for k := range before {
					a.step(t, g, name, k)
				}
				path := filepath.Join(t.TempDir(), "opt.safetensors")
				ts, scalars := a.opt.State()
				if err := safetensors.SaveTensors(path, ts, scalars); err != nil {
					t.Fatal(err)
				}
				for _, x := range ts {
					x.Release()
				}

				f, err := safetensors.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				loaded, err := safetensors.LoadTensors(path)
				if err != nil {
					t.Fatal(err)
				}
				b := &goldenRun{w: autograd.Param(a.w.Value.Clone()), b: autograd.Param(a.b.Value.Clone())}
				t.Cleanup(func() { b.w.Release(); b.b.Release() })
				b.opt = buildOptimizer(t, g.cases[name], b.w, b.b)
				if err := b.opt.LoadState(loaded, f.Metadata); err != nil {
					t.Fatal(err)
				}
				for _, x := range loaded {
					x.Release()
				}

				for k := before; k < goldenSteps; k++ {
					a.step(t, g, name, k)
					b.step(t, g, name, k)
					a.check(t, g, name, k, pr.tol)
					for _, p := range [][2]*autograd.Var{{a.w, b.w}, {a.b, b.b}} {
						if !slices.Equal(p[0].Value.Float64s(), p[1].Value.Float64s()) {
							t.Fatalf("step %d: resumed run differs from the uninterrupted one", k)
						}
					}
				}
			})
		}
	}
}
