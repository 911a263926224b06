package tensor

import (
	"math"
	"testing"
)

func TestDropout(t *testing.T) {
	t.Parallel()
	for _, dt := range []DType{Float32, Float64} {
		for _, p := range []float64{0, 0.25, 0.9, 1} {
			g := NewGenerator(11)
			x := g.Normal(Shape{64, 100}, 0, 1, Of(dt))
			xt := x.T() // a strided input
			y, mask := Dropout(xt, p, g)
			ewShape(t, "Dropout y", y, dt, Shape{100, 64})
			ewShape(t, "Dropout mask", mask, Bool, Shape{100, 64})
			xv, yv, mv := xt.Float64s(), y.Float64s(), mask.Bools()
			kept := 0
			for i := range xv {
				want := 0.0
				if mv[i] {
					kept++
					want = xv[i] / (1 - p)
				}
				if math.Abs(yv[i]-want) > 1e-6*math.Abs(want) {
					t.Fatalf("Dropout %v p=%v: element %d = %v, want %v", dt, p, i, yv[i], want)
				}
			}
			if frac := float64(kept) / float64(len(xv)); math.Abs(frac-(1-p)) > 0.02 {
				t.Errorf("Dropout %v p=%v kept %v of the elements", dt, p, frac)
			}
			// The generator advanced: the next draw differs, and restoring
			// its state reproduces this one.
			_, off := g.State()
			if want := uint64(6400 + 6400); off != want {
				t.Errorf("generator offset %d after two draws of 6400, want %d", off, want)
			}
			g.SetState(11, 6400)
			y2, mask2 := Dropout(xt, p, g)
			ewClose(t, "Dropout replayed", y2.Float64s(), yv, 0, 0)
			y3, mask3 := Dropout(xt, p, g)
			if p > 0 && p < 1 && equalBools(mask3.Bools(), mv) {
				t.Errorf("Dropout p=%v: two draws gave the same mask", p)
			}
			for _, u := range []*Tensor{x, xt, y, mask, y2, mask2, y3, mask3} {
				u.Release()
			}
		}
	}
	x := Ones(Shape{3})
	defer x.Release()
	ewPanics(t, "Dropout p=1.5", func() { Dropout(x, 1.5, NewGenerator(0)) }, "Dropout", "1.5")
	ewPanics(t, "Dropout nil generator", func() { Dropout(x, 0.5, nil) }, "Dropout", "Generator")
	i := Ones(Shape{3}, Of(Int64))
	defer i.Release()
	ewPanics(t, "Dropout of int64", func() { Dropout(i, 0.5, NewGenerator(0)) }, "Dropout", "int64")
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
