package transform

import (
	"math"
	"testing"
)

func TestCenterCropRect(t *testing.T) {
	cases := []struct {
		w, h  int
		ratio float64
		want  Rect
	}{
		{256, 256, 224.0 / 256, Rect{16, 16, 224, 224}},
		{256, 192, 224.0 / 256, Rect{44, 12, 168, 168}},
		{500, 375, 0.875, Rect{86, 23, 328, 328}},
		{3, 1, 0.5, Rect{1, 0, 1, 1}},
	}
	for _, c := range cases {
		if got := CenterCropRect(c.w, c.h, c.ratio); got != c.want {
			t.Errorf("CenterCropRect(%d, %d, %v) = %v, want %v", c.w, c.h, c.ratio, got, c.want)
		}
	}
}

func TestRandomResizedCropRect(t *testing.T) {
	for _, sz := range [][2]int{{256, 256}, {500, 375}, {64, 480}, {1, 1}} {
		w, h := sz[0], sz[1]
		var areaSum float64
		const n = 2000
		for i := 0; i < n; i++ {
			r := NewRand(3, 1, uint64(i), 0)
			c := RandomResizedCropRect(w, h, DefaultScale, DefaultRatio, &r)
			if !c.In(w, h) || c.W == 0 || c.H == 0 {
				t.Fatalf("%dx%d: crop %v outside image", w, h, c)
			}
			areaSum += float64(c.W*c.H) / float64(w*h)
			r2 := NewRand(3, 1, uint64(i), 0)
			if c2 := RandomResizedCropRect(w, h, DefaultScale, DefaultRatio, &r2); c2 != c {
				t.Fatalf("same key gave %v and %v", c, c2)
			}
		}
		if w == 256 {
			if m, want := areaSum/n, squareAcceptedMean(); math.Abs(m-want) > 0.02 {
				t.Errorf("%dx%d: mean area fraction %v, want ≈ %v", w, h, m, want)
			}
		}
	}
	// A very thin image forces the fallback: whole width, height clamped to ratio 3/4.
	r := NewRand(0, 0, 0, 0)
	got := RandomResizedCropRect(10, 1000, [2]float64{0.9, 1}, DefaultRatio, &r)
	want := Rect{X: 0, Y: (1000 - 13) / 2, W: 10, H: 13}
	if got != want {
		t.Errorf("fallback crop = %v, want %v", got, want)
	}
}

// squareAcceptedMean integrates E[s | accepted] for a square image: s ~ U(0.08, 1),
// t = log ratio ~ U(log 3/4, log 4/3), accepted when s ≤ exp(−|t|).
func squareAcceptedMean() float64 {
	const steps = 400
	lo, hi := math.Log(3.0/4), math.Log(4.0/3)
	var num, den float64
	for i := 0; i < steps; i++ {
		tt := lo + (hi-lo)*(float64(i)+0.5)/steps
		smax := math.Exp(-math.Abs(tt))
		// ∫_{0.08}^{smax} s ds and ∫ ds
		num += (smax*smax - 0.08*0.08) / 2
		den += smax - 0.08
	}
	return num / den
}
