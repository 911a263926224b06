package cpu

import (
	"math"
	"testing"

	"github.com/flockml/flock/backend"
)

// TestReduceCompensated checks what compensated float64 accumulation buys:
// cancellations that a plain sum loses, and float32 sums beyond 2²⁴.
func TestReduceCompensated(t *testing.T) {
	t.Parallel()
	c := New()
	view := func(dt backend.DType, vals []float64) backend.View {
		buf, err := c.Alloc(len(vals) * dt.Size())
		if err != nil {
			t.Fatal(err)
		}
		v := backend.Contiguous(buf, dt, backend.Shape{len(vals)})
		for i, x := range vals {
			if dt == backend.Float32 {
				F32(v)[i] = float32(x)
			} else {
				F64(v)[i] = x
			}
		}
		return v
	}
	sum := func(x backend.View) float64 {
		buf, _ := c.Alloc(8)
		dst := backend.Contiguous(buf, x.DType, backend.Shape{})
		if err := c.Reduce(backend.Sum, dst, x, []int{0}, backend.ReduceParams{}); err != nil {
			t.Fatal(err)
		}
		if x.DType == backend.Float32 {
			return float64(F32(dst)[0])
		}
		return F64(dst)[0]
	}
	if got := sum(view(backend.Float64, []float64{1, 1e100, 1, -1e100})); got != 2 {
		t.Errorf("Σ(1, 1e100, 1, -1e100) = %v, want 2", got)
	}
	// In float32, 2²⁴ + 1 rounds back to 2²⁴ at every step.
	if got := sum(view(backend.Float32, []float64{1 << 24, 1, 1, 1})); got != 1<<24+4 {
		t.Errorf("float32 Σ(2²⁴, 1, 1, 1) = %v, want 2²⁴+4 (2²⁴+3 rounded to even)", got)
	}
	tenths := make([]float64, 1<<20)
	for i := range tenths {
		tenths[i] = 0.1
	}
	if got, want := sum(view(backend.Float64, tenths)), float64(len(tenths))*0.1; math.Abs(got-want) > 1e-16*want {
		t.Errorf("Σ of 2²⁰ × 0.1 = %v, want %v", got, want)
	}
}
