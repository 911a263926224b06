package cpu

import (
	"math"
	"testing"

	"github.com/flockml/flock/backend"
)

func TestBatchNormOneValuePerChannel(t *testing.T) {
	t.Parallel()
	c := New()
	f64 := backend.Float64
	shape := backend.Shape{1, 2}
	x := denseView(t, c, f64, shape, []float64{3, -1})
	vec := func(vals ...float64) backend.View { return denseView(t, c, f64, backend.Shape{2}, vals) }
	p := backend.NormParams{Eps: 1e-5, Momentum: 0.1, Training: true}
	y := denseView(t, c, f64, shape, nil)
	wantError(t, "with running statistics", c.BatchNorm(y, vec(0, 0), vec(0, 0), x, backend.View{}, vec(5, 6), vec(0, 0), vec(1, 1), p),
		"cpu: batch_norm", "more than 1 value per channel", "[1 2]")
	if err := c.BatchNorm(y, vec(0, 0), vec(0, 0), x, backend.View{}, vec(5, 6), backend.View{}, backend.View{}, p); err != nil {
		t.Fatalf("without running statistics: %v", err)
	}
	if got := F64(y)[:2]; got[0] != 5 || got[1] != 6 {
		t.Errorf("a single value normalises to the bias: got %v, want [5 6]", got)
	}
}

// TestBatchNormBackwardEval checks the gradient with fixed statistics:
// dx = γ·s·dy, dγ = Σ dy·x̂, dβ = Σ dy.
func TestBatchNormBackwardEval(t *testing.T) {
	t.Parallel()
	c := New()
	f64 := backend.Float64
	shape := backend.Shape{2, 2, 3}
	xv := []float64{1, 2, 3, 4, 5, 6, -1, -2, -3, 0.5, 0.25, 0}
	dyv := []float64{1, -1, 2, 0.5, 3, -2, 1, 1, 1, -0.5, 4, 2}
	mean, invstd, w := []float64{0.5, -1}, []float64{2, 0.25}, []float64{3, -1}
	dx, dw, db := denseView(t, c, f64, shape, nil), denseView(t, c, f64, backend.Shape{2}, nil), denseView(t, c, f64, backend.Shape{2}, nil)
	err := c.BatchNormBackward(dx, dw, db, denseView(t, c, f64, shape, dyv), denseView(t, c, f64, shape, xv),
		denseView(t, c, f64, backend.Shape{2}, w), denseView(t, c, f64, backend.Shape{2}, mean), denseView(t, c, f64, backend.Shape{2}, invstd),
		backend.NormParams{Eps: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	wantDw, wantDb := make([]float64, 2), make([]float64, 2)
	for i := range xv {
		ch := i / 3 % 2
		if got, want := F64(dx)[i], w[ch]*invstd[ch]*dyv[i]; math.Abs(got-want) > 1e-12 {
			t.Errorf("dx[%d] = %v, want %v", i, got, want)
		}
		wantDw[ch] += dyv[i] * (xv[i] - mean[ch]) * invstd[ch]
		wantDb[ch] += dyv[i]
	}
	for ch := range 2 {
		if math.Abs(F64(dw)[ch]-wantDw[ch]) > 1e-12 || math.Abs(F64(db)[ch]-wantDb[ch]) > 1e-12 {
			t.Errorf("channel %d: dweight %v dbias %v, want %v %v", ch, F64(dw)[ch], F64(db)[ch], wantDw[ch], wantDb[ch])
		}
	}
}

func TestHeavyKernelsRejectStridedInput(t *testing.T) {
	t.Parallel()
	c := New()
	f32 := backend.Float32
	buf := denseView(t, c, f32, backend.Shape{4, 3}, nil)
	xt := backend.View{Buf: buf.Buf, DType: f32, Shape: backend.Shape{3, 4}, Strides: []int{1, 3}}
	wantError(t, "Softmax", c.Softmax(denseView(t, c, f32, backend.Shape{3, 4}, nil), xt, 1, false), "cpu: softmax", "not contiguous")
	wantError(t, "LayerNorm", c.LayerNorm(denseView(t, c, f32, backend.Shape{3, 4}, nil), backend.View{}, backend.View{}, xt, backend.View{}, backend.View{}, 4, 1e-5),
		"cpu: layer_norm", "not contiguous")
	target := denseView(t, c, backend.Int64, backend.Shape{3}, []float64{0, 9, 1})
	wantError(t, "CrossEntropy", c.CrossEntropy(denseView(t, c, f32, backend.Shape{3}, nil), denseView(t, c, f32, backend.Shape{3, 4}, nil), target, backend.CrossEntropyParams{IgnoreIndex: -100}),
		"cpu: cross_entropy", "target 9", "row 1")
}
