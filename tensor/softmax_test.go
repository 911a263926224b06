package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// uniformValues returns n values drawn from [lo, hi), rounded to dt.
func uniformValues(rng *rand.Rand, dt DType, n int, lo, hi float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = lo + (hi-lo)*rng.Float64()
		if dt == Float32 {
			v[i] = float64(float32(v[i]))
		}
	}
	return v
}

// assertClose fails when got and want differ by more than atol + rtol·|want|
// anywhere.
func assertClose(t *testing.T, what string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Abs(got[i]-want[i]) > atol+rtol*math.Abs(want[i]) || math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
			}
			bad++
		}
	}
}

// expectPanic fails unless fn panics with a message containing each of
// words.
func expectPanic(t *testing.T, what string, fn func(), words ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s: no panic", what)
			return
		}
		msg, _ := r.(string)
		for _, w := range words {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: panic %q does not mention %q", what, msg, w)
			}
		}
	}()
	fn()
}

// differences returns the central-difference gradient of f at x.
func differences(f func([]float64) float64, x []float64) []float64 {
	const h = 1e-6
	x = append([]float64(nil), x...)
	g := make([]float64, len(x))
	for i := range x {
		old := x[i]
		x[i] = old + h
		fp := f(x)
		x[i] = old - h
		fm := f(x)
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

// weightedSum is Σ w·t in float64.
func weightedSum(t *Tensor, w []float64) float64 {
	s := 0.0
	for i, v := range t.Float64s() {
		s += v * w[i]
	}
	return s
}

func TestSoftmax(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		shape     Shape
		axis      int
		transpose bool
	}{
		{Shape{5}, 0, false},
		{Shape{5}, -1, false},
		{Shape{3, 4}, 1, false},
		{Shape{3, 4}, 0, true},
		{Shape{2, 3, 4}, -2, false},
		{Shape{4, 3}, 1, true},
	}
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range cases {
			for _, log := range []bool{false, true} {
				vals := uniformValues(rng, dt, c.shape.NumElements(), -4, 4)
				x := FromSlice(vals, c.shape, Of(dt))
				src := x
				if c.transpose {
					src = x.Transpose(0, 1)
				}
				var y *Tensor
				if log {
					y = src.LogSoftmax(c.axis)
				} else {
					y = src.Softmax(c.axis)
				}
				if !y.Shape().Equal(src.Shape()) || y.DType() != dt {
					t.Fatalf("%v %v: result %v%v", dt, c, y.DType(), y.Shape())
				}
				// Reference along the axis of the (possibly transposed) view.
				sv := src.Float64s()
				shape, a := src.Shape(), src.axis("test", c.axis)
				want := make([]float64, len(sv))
				outer, n, inner := shape[:a].NumElements(), shape[a], shape[a+1:].NumElements()
				for o := range outer {
					for i := range inner {
						z := 0.0
						for k := range n {
							z += math.Exp(sv[(o*n+k)*inner+i])
						}
						for k := range n {
							at := (o*n+k)*inner + i
							if log {
								want[at] = sv[at] - math.Log(z)
							} else {
								want[at] = math.Exp(sv[at]) / z
							}
						}
					}
				}
				tol := 1e-6
				if dt == Float64 {
					tol = 1e-13
				}
				assertClose(t, "softmax", y.Float64s(), want, tol, tol)
				y.Release()
				if c.transpose {
					src.Release()
				}
				x.Release()
			}
		}
	}
}

func TestSoftmaxScalar(t *testing.T) {
	t.Parallel()
	x := Scalar(3.5, Of(Float64))
	defer x.Release()
	y, ly := x.Softmax(-1), x.LogSoftmax(0)
	defer y.Release()
	defer ly.Release()
	if y.Dim() != 0 || y.Item() != 1 || ly.Item() != 0 {
		t.Errorf("softmax of a scalar: %v and log %v, want 1 and 0", y, ly)
	}
	dx := SoftmaxBackward(y, x, 0, false)
	defer dx.Release()
	if dx.Dim() != 0 || dx.Item() != 0 {
		t.Errorf("softmax backward of a scalar: %v, want 0", dx)
	}
}

// TestSoftmaxBackward compares the gradient of L = Σ dy·softmax(x) with
// central differences of the forward pass.
func TestSoftmaxBackward(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	shape := Shape{3, 5, 2}
	for _, axis := range []int{0, 1, 2} {
		for _, log := range []bool{false, true} {
			xv := uniformValues(rng, Float64, shape.NumElements(), -2, 2)
			dyv := uniformValues(rng, Float64, shape.NumElements(), -1, 1)
			forward := func(v []float64) *Tensor {
				x := FromSlice(v, shape)
				defer x.Release()
				if log {
					return x.LogSoftmax(axis)
				}
				return x.Softmax(axis)
			}
			loss := func(v []float64) float64 {
				y := forward(v)
				defer y.Release()
				return weightedSum(y, dyv)
			}
			y := forward(xv)
			dy := FromSlice(dyv, shape)
			dx := SoftmaxBackward(y, dy, axis, log)
			assertClose(t, "SoftmaxBackward", dx.Float64s(), differences(loss, xv), 1e-6, 1e-8)
			y.Release()
			dy.Release()
			dx.Release()
		}
	}
}

func TestSoftmaxPanics(t *testing.T) {
	t.Parallel()
	x := Zeros(Shape{2, 3})
	defer x.Release()
	i := Zeros(Shape{2, 3}, Of(Int64))
	defer i.Release()
	d := Zeros(Shape{3, 2})
	defer d.Release()
	expectPanic(t, "axis", func() { x.Softmax(2) }, "Softmax", "axis 2", "[2 3]")
	expectPanic(t, "int", func() { i.LogSoftmax(0) }, "LogSoftmax", "int64")
	expectPanic(t, "shapes", func() { SoftmaxBackward(x, d, 1, false) }, "SoftmaxBackward", "[2 3]", "[3 2]")
}
