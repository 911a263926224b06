package autograd_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// panicMessage runs f and returns what it panicked with, or "" if it
// returned normally.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// mapFloats applies f to every element of xs.
func mapFloats(xs []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func TestAccumulationOverPasses(t *testing.T) {
	t.Parallel()
	vals := []float64{1, -2, 0.5}
	x := autograd.Param(f64(vals, 3))
	defer x.Release()
	for pass := 1; pass <= 3; pass++ {
		y := autograd.Sum(autograd.Mul(x, x))
		y.Backward()
		y.Release()
		checkClose(t, fmt.Sprintf("gradient after %d passes", pass), x.Grad().Float64s(),
			mapFloats(vals, func(v float64) float64 { return float64(pass) * 2 * v }), 1e-12)
	}
	x.ZeroGrad()
	if x.Grad() != nil {
		t.Fatal("ZeroGrad left a gradient")
	}
	y := autograd.Sum(autograd.MulScalar(x, 3))
	defer y.Release()
	y.Backward()
	checkClose(t, "gradient after ZeroGrad", x.Grad().Float64s(), []float64{3, 3, 3}, 1e-12)
}

func TestSharedSubexpressions(t *testing.T) {
	t.Parallel()
	vals := []float64{0.3, -1.2, 2}
	cases := []struct {
		name string
		f    func(x *autograd.Var) *autograd.Var
		want func(x float64) float64
	}{
		{"x·x", func(x *autograd.Var) *autograd.Var { return autograd.Mul(x, x) },
			func(x float64) float64 { return 2 * x }},
		{"x+x+x", func(x *autograd.Var) *autograd.Var { return autograd.Add(autograd.Add(x, x), x) },
			func(float64) float64 { return 3 }},
		{"diamond eˣ + eˣ·x", func(x *autograd.Var) *autograd.Var {
			e := autograd.Exp(x)
			return autograd.Add(e, autograd.Mul(e, x))
		}, func(x float64) float64 { return math.Exp(x) * (2 + x) }},
		{"nested diamond tanh³", func(x *autograd.Var) *autograd.Var {
			a := autograd.Tanh(x)
			return autograd.Mul(autograd.Mul(a, a), a)
		}, func(x float64) float64 {
			a := math.Tanh(x)
			return 3 * a * a * (1 - a*a)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x := autograd.Param(f64(vals, 3))
			defer x.Release()
			y := autograd.Sum(c.f(x))
			defer y.Release()
			y.Backward()
			checkClose(t, "gradient", x.Grad().Float64s(), mapFloats(vals, c.want), 1e-12)
		})
	}
}

func TestHookFiresOnceWithFinalGradient(t *testing.T) {
	t.Parallel()
	x := autograd.Const(f64([]float64{0.5, -1, 2}, 3))
	defer x.Release()
	w := autograd.Param(f64([]float64{0.7, 0.2, -0.4}, 3))
	defer w.Release()
	calls := 0
	var seen []float64
	w.OnGradReady(func(v *autograd.Var) {
		if v != w {
			t.Errorf("hook called with another Var")
		}
		calls++
		seen = v.Grad().Float64s()
	})
	// w reaches the loss along two paths: tanh(x·w)·w.
	for pass := 1; pass <= 2; pass++ {
		loss := autograd.Sum(autograd.Mul(autograd.Tanh(autograd.Mul(x, w)), w))
		loss.Backward()
		loss.Release()
		if calls != pass {
			t.Fatalf("after %d passes the hook ran %d times", pass, calls)
		}
		checkClose(t, fmt.Sprintf("gradient seen by the hook in pass %d", pass), seen, w.Grad().Float64s(), 0)
	}
	want := make([]float64, 3)
	for i, xv := range []float64{0.5, -1, 2} {
		wv := []float64{0.7, 0.2, -0.4}[i]
		th := math.Tanh(xv * wv)
		want[i] = 2 * (th + wv*(1-th*th)*xv)
	}
	checkClose(t, "gradient after two passes", w.Grad().Float64s(), want, 1e-12)
}

func TestHooksFireInReverseOrderOfUse(t *testing.T) {
	t.Parallel()
	h := autograd.Const(randn64(1, 2, 3))
	defer h.Release()
	names := []string{"w1", "w2", "w3", "w4"}
	var fired []string
	var ws []*autograd.Var
	for i, name := range names {
		w := autograd.Param(randn64(uint64(10+i), 3)).Named(name)
		defer w.Release()
		w.OnGradReady(func(v *autograd.Var) { fired = append(fired, v.Name()) })
		ws = append(ws, w)
	}
	y := h
	for _, w := range ws {
		y = autograd.Tanh(autograd.Mul(y, w))
	}
	loss := autograd.Sum(y)
	defer loss.Release()
	loss.Backward()
	if want := []string{"w4", "w3", "w2", "w1"}; !slices.Equal(fired, want) {
		t.Errorf("hooks fired in order %v, want %v", fired, want)
	}
}

func TestHookOnLeafAndUnusedLeaf(t *testing.T) {
	t.Parallel()
	x := autograd.Param(tensor.Scalar(2, tensor.Of(tensor.Float64)))
	defer x.Release()
	unused := autograd.Param(tensor.Scalar(1, tensor.Of(tensor.Float64)))
	defer unused.Release()
	calls, unusedCalls := 0, 0
	x.OnGradReady(func(*autograd.Var) { calls++ })
	unused.OnGradReady(func(*autograd.Var) { unusedCalls++ })
	x.Backward()
	if calls != 1 || x.Grad().Item() != 1 {
		t.Errorf("Backward of a leaf: hook ran %d times, gradient %v; want 1 and 1", calls, x.Grad().Item())
	}
	y := autograd.MulScalar(x, 3)
	defer y.Release()
	y.Backward()
	if calls != 2 || unusedCalls != 0 || x.Grad().Item() != 4 {
		t.Errorf("hook ran %d times (unused leaf %d), gradient %v; want 2, 0 and 4", calls, unusedCalls, x.Grad().Item())
	}
	if msg := panicMessage(func() { y.OnGradReady(func(*autograd.Var) {}) }); msg == "" {
		t.Error("OnGradReady on a non-leaf did not panic")
	}
}

func TestNoGrad(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 4))
	defer x.Release()
	autograd.NoGrad(func() {
		if autograd.GradEnabled() {
			t.Error("GradEnabled inside NoGrad")
		}
		y := autograd.Mul(x, x)
		defer y.Release()
		if y.RequiresGrad() || !y.IsLeaf() {
			t.Errorf("op under NoGrad: RequiresGrad %v, IsLeaf %v; want false, true", y.RequiresGrad(), y.IsLeaf())
		}
		if !x.Value.Exclusive() {
			t.Error("op under NoGrad kept a reference to its input")
		}
		done := make(chan bool)
		go func() {
			z := autograd.Mul(x, x)
			defer z.Release()
			done <- autograd.GradEnabled() && z.RequiresGrad()
		}()
		if !<-done {
			t.Error("NoGrad switched recording off on another goroutine")
		}
		autograd.NoGrad(func() {
			if autograd.GradEnabled() {
				t.Error("GradEnabled in a nested NoGrad")
			}
		})
		if autograd.GradEnabled() {
			t.Error("GradEnabled after the nested NoGrad returned, inside the outer one")
		}
	})
	if !autograd.GradEnabled() {
		t.Error("recording still off after NoGrad returned")
	}
	if msg := panicMessage(func() { autograd.NoGrad(func() { panic("boom") }) }); msg != "boom" {
		t.Errorf("panic inside NoGrad: got %q", msg)
	}
	if !autograd.GradEnabled() {
		t.Error("recording still off after NoGrad panicked")
	}
	y := autograd.Mul(x, x)
	defer y.Release()
	if !y.RequiresGrad() {
		t.Error("op after NoGrad does not require a gradient")
	}
}

func TestDetach(t *testing.T) {
	t.Parallel()
	vals := []float64{0.1, -0.5, 1.5}
	x := autograd.Param(f64(vals, 3))
	defer x.Release()
	e := autograd.Exp(x)
	defer e.Release()
	d := e.Detach()
	defer d.Release()
	if !d.IsLeaf() || d.RequiresGrad() || !d.Value.SharesStorage(e.Value) {
		t.Fatalf("Detach: IsLeaf %v, RequiresGrad %v, shares storage %v; want true, false, true", d.IsLeaf(), d.RequiresGrad(), d.Value.SharesStorage(e.Value))
	}
	y := autograd.Sum(autograd.Mul(d, x))
	defer y.Release()
	y.Backward()
	checkClose(t, "gradient through a detached factor", x.Grad().Float64s(), mapFloats(vals, math.Exp), 1e-12)
	if d.Grad() != nil {
		t.Error("a detached Var received a gradient")
	}
}

func TestConstInputsGetNoGradient(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 2, 3))
	defer x.Release()
	c := autograd.Const(randn64(2, 3))
	defer c.Release()
	y := autograd.Sum(autograd.Mul(x, c))
	defer y.Release()
	y.Backward()
	if c.Grad() != nil {
		t.Error("a constant received a gradient")
	}
	z := autograd.Mul(c, c)
	defer z.Release()
	if z.RequiresGrad() || !c.Value.Exclusive() {
		t.Errorf("op on constants: RequiresGrad %v, input retained %v; want false, false", z.RequiresGrad(), !c.Value.Exclusive())
	}
	if msg := panicMessage(func() { autograd.Sum(z).Backward() }); !strings.Contains(msg, "does not require a gradient") {
		t.Errorf("Backward of a constant: panic %q", msg)
	}
}

func TestSecondBackwardPanics(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 3))
	defer x.Release()
	y := autograd.Sum(autograd.Mul(x, x))
	defer y.Release()
	y.Backward()
	first := x.Grad().Float64s()
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"same output", func() { y.Backward() }},
		{"through a later op", func() { autograd.MulScalar(y, 2).Backward() }},
	} {
		msg := panicMessage(c.f)
		if !strings.Contains(msg, "second time") || !strings.Contains(msg, "Sum") {
			t.Errorf("%s: panic %q, want one naming the op and saying the graph was already traversed", c.name, msg)
		}
	}
	checkClose(t, "gradient after the failed passes", x.Grad().Float64s(), first, 0)
}

func TestSavedTensorsReleased(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 2, 3))
	defer x.Release()
	c := autograd.Const(randn64(2, 3))
	defer c.Release()
	e := autograd.Exp(x)
	defer e.Release()
	m := autograd.Mul(e, x)
	defer m.Release()
	p := autograd.Mul(m, c)
	defer p.Release()
	y := autograd.Sum(p)
	defer y.Release()
	for _, v := range []*autograd.Var{x, c, e, m} {
		if v.Value.Exclusive() {
			t.Fatal("a saved tensor was not retained by its node")
		}
	}
	y.Backward()
	for name, v := range map[string]*autograd.Var{"x": x, "c": c, "e": e, "m": m} {
		if !v.Value.Exclusive() {
			t.Errorf("%s is still referenced after Backward", name)
		}
	}
}

func TestIntermediatesReleasedBeforeBackward(t *testing.T) {
	t.Parallel()
	vals := []float64{0.2, -0.7}
	x := autograd.Param(f64(vals, 2))
	defer x.Release()
	e := autograd.Exp(x)
	m := autograd.Mul(e, x)
	y := autograd.Sum(m)
	defer y.Release()
	e.Release()
	m.Release()
	y.Backward()
	checkClose(t, "gradient", x.Grad().Float64s(), mapFloats(vals, func(v float64) float64 { return math.Exp(v) * (1 + v) }), 1e-12)
}

func TestBackwardOfNonScalarPanics(t *testing.T) {
	t.Parallel()
	x := autograd.Param(randn64(1, 2, 3))
	defer x.Release()
	y := autograd.Mul(x, x)
	defer y.Release()
	if msg := panicMessage(y.Backward); !strings.Contains(msg, "BackwardWith") || !strings.Contains(msg, "[2 3]") {
		t.Errorf("Backward of a [2 3] Var: panic %q", msg)
	}
	g := tensor.Ones(tensor.Shape{3, 2}, tensor.Of(tensor.Float64))
	defer g.Release()
	if msg := panicMessage(func() { y.BackwardWith(g) }); !strings.Contains(msg, "shape") {
		t.Errorf("BackwardWith of a wrongly shaped gradient: panic %q", msg)
	}
	if x.Grad() != nil {
		t.Error("a failed Backward left a gradient")
	}
}

func TestBackwardWith(t *testing.T) {
	t.Parallel()
	xv := []float64{1, 2, 3, 4, 5, 6}
	cv := []float64{0.5, -1, 2}
	gv := []float64{1, -1, 0.5, 2, 0, 3}
	x := autograd.Param(f64(xv, 2, 3))
	defer x.Release()
	c := autograd.Param(f64(cv, 3))
	defer c.Release()
	y := autograd.Mul(x, c)
	defer y.Release()
	g := f64(gv, 2, 3)
	defer g.Release()
	y.BackwardWith(g)
	wantX := make([]float64, 6)
	wantC := make([]float64, 3)
	for i := range xv {
		wantX[i] = gv[i] * cv[i%3]
		wantC[i%3] += gv[i] * xv[i]
	}
	checkClose(t, "gradient of x", x.Grad().Float64s(), wantX, 1e-12)
	checkClose(t, "gradient of c", c.Grad().Float64s(), wantC, 1e-12)
	if !g.Exclusive() {
		t.Error("BackwardWith kept a reference to the output gradient")
	}
}
