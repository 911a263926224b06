package transform

import (
	"math"
	"slices"
	"testing"
)

func testImage(w, h, c int) Image {
	m := NewImage(w, h, c)
	for i := range m.Pix {
		m.Pix[i] = uint8(i*31 + i/7)
	}
	return m
}

func TestFlipHorizontal(t *testing.T) {
	for _, c := range []int{1, 2, 3} {
		for _, w := range []int{1, 4, 5} {
			m := testImage(w, 3, c)
			orig := slices.Clone(m.Pix)
			FlipHorizontal(m)
			for y := 0; y < 3; y++ {
				for x := 0; x < w; x++ {
					for k := 0; k < c; k++ {
						if got, want := m.Pix[(y*w+x)*c+k], orig[(y*w+w-1-x)*c+k]; got != want {
							t.Fatalf("c=%d w=%d (%d,%d,%d): %d, want %d", c, w, x, y, k, got, want)
						}
					}
				}
			}
		}
	}
	// A view: only the window flips.
	m := testImage(6, 4, 3)
	orig := slices.Clone(m.Pix)
	FlipHorizontal(m.Sub(Rect{1, 1, 3, 2}))
	if m.Pix[0] != orig[0] || m.Pix[(1*6+1)*3] != orig[(1*6+3)*3] || m.Pix[(3*6+1)*3] != orig[(3*6+1)*3] {
		t.Error("flip of a window touched the wrong pixels")
	}
}

// translateRef is FFCV's RandomTranslate written out: pad with fill, take
// the window at (oy, ox).
func translateRef(m Image, pad, ox, oy int, fill []uint8) []uint8 {
	c := m.Channels
	pw, ph := m.Width+2*pad, m.Height+2*pad
	padded := make([]uint8, pw*ph*c)
	for i := range padded {
		padded[i] = fill[i%c]
	}
	for y := 0; y < m.Height; y++ {
		copy(padded[((y+pad)*pw+pad)*c:], m.Row(y))
	}
	out := make([]uint8, m.Width*m.Height*c)
	for y := 0; y < m.Height; y++ {
		copy(out[y*m.Width*c:(y+1)*m.Width*c], padded[((y+oy)*pw+ox)*c:])
	}
	return out
}

func TestTranslate(t *testing.T) {
	fill := []uint8{1, 2, 3}
	for i := 0; i < 50; i++ {
		m := testImage(7, 5, 3)
		orig := m
		orig.Pix = slices.Clone(m.Pix)
		r := NewRand(1, 0, uint64(i), 3)
		pad := i % 9
		dx, dy := Translate(m, pad, fill, &r)
		if dx < -pad || dx > pad || dy < -pad || dy > pad {
			t.Fatalf("shift (%d, %d) outside ±%d", dx, dy, pad)
		}
		want := translateRef(orig, pad, pad-dx, pad-dy, fill)
		if !slices.Equal(m.Pix, want) {
			t.Fatalf("pad %d shift (%d,%d): got %v, want %v", pad, dx, dy, m.Pix, want)
		}
	}
	m := testImage(4, 4, 1)
	TranslateBy(m, 1, -2, nil)
	if m.Pix[0] != 0 || m.Pix[1] != testImage(4, 4, 1).Pix[2*4] || m.Pix[15] != 0 {
		t.Errorf("TranslateBy(1, -2) = %v", m.Pix)
	}
}

func TestCutout(t *testing.T) {
	for i := 0; i < 30; i++ {
		m := testImage(9, 6, 3)
		orig := slices.Clone(m.Pix)
		r := NewRand(2, 0, uint64(i), 0)
		sq := Cutout(m, 4, []uint8{7, 8, 9}, &r)
		if !sq.In(9, 6) || sq.W != 4 || sq.H != 4 {
			t.Fatalf("square %v", sq)
		}
		for y := 0; y < 6; y++ {
			for x := 0; x < 9; x++ {
				inside := x >= sq.X && x < sq.X+4 && y >= sq.Y && y < sq.Y+4
				for k := 0; k < 3; k++ {
					j := (y*9+x)*3 + k
					if inside && m.Pix[j] != uint8(7+k) || !inside && m.Pix[j] != orig[j] {
						t.Fatalf("pixel (%d,%d,%d) = %d", x, y, k, m.Pix[j])
					}
				}
			}
		}
	}
}

func TestNormalizer(t *testing.T) {
	m := testImage(5, 3, 3)
	n := NewNormalizer(ImageNetMean, ImageNetStd)
	chw := make([]float32, 5*3*3)
	hwc := make([]float32, 5*3*3)
	bf := make([]uint16, 5*3*3)
	n.ToCHW(chw, m)
	n.ToHWC(hwc, m)
	n.ToCHWBF16(bf, m)
	for y := 0; y < 3; y++ {
		for x := 0; x < 5; x++ {
			for c := 0; c < 3; c++ {
				v := m.Pix[(y*5+x)*3+c]
				want := float32((float64(v) - ImageNetMean[c]) / ImageNetStd[c])
				if got := chw[c*15+y*5+x]; got != want {
					t.Fatalf("CHW (%d,%d,%d) = %v, want %v", x, y, c, got, want)
				}
				if got := hwc[(y*5+x)*3+c]; got != want {
					t.Fatalf("HWC (%d,%d,%d) = %v, want %v", x, y, c, got, want)
				}
				got := math.Float32frombits(uint32(bf[c*15+y*5+x]) << 16)
				if math.Abs(float64(got-want)) > math.Abs(float64(want))/128 {
					t.Fatalf("BF16 (%d,%d,%d) = %v, want ≈ %v", x, y, c, got, want)
				}
			}
		}
	}
	if BFloat16(1) != 0x3f80 || BFloat16(1+1.0/256) != 0x3f80 || BFloat16(1+3.0/256) != 0x3f82 {
		t.Error("BFloat16 rounding")
	}
}

func TestMixup(t *testing.T) {
	a := []float32{1, 2, 3, 4}
	b := []float32{5, 6, 7, 8}
	dst := make([]float32, 4)
	r := NewRand(5, 0, 9, 0)
	lam := Mixup(dst, a, b, 0.4, &r)
	if lam < 0 || lam > 1 {
		t.Fatalf("λ = %v", lam)
	}
	for i := range dst {
		if want := lam*a[i] + (1-lam)*b[i]; math.Abs(float64(dst[i]-want)) > 1e-5 {
			t.Errorf("dst[%d] = %v, want %v", i, dst[i], want)
		}
	}
	r2 := NewRand(5, 0, 9, 0)
	if lam2 := Mixup(a, a, b, 0.4, &r2); lam2 != lam || a[0] != dst[0] {
		t.Error("Mixup is not a function of its key, or fails in place")
	}
}

func TestTransformAllocs(t *testing.T) {
	m := testImage(224, 224, 3)
	n := NewNormalizer(ImageNetMean, ImageNetStd)
	out := make([]float32, 224*224*3)
	a := make([]float32, 100)
	fill := []uint8{0, 0, 0}
	r := NewRand(0, 0, 0, 0)
	checks := map[string]func(){
		"FlipHorizontal": func() { FlipHorizontal(m) },
		"Translate":      func() { Translate(m, 4, fill, &r) },
		"Cutout":         func() { Cutout(m, 16, fill, &r) },
		"ToCHW":          func() { n.ToCHW(out, m) },
		"Mixup":          func() { Mixup(a, a, a, 0.2, &r) },
		"RandomResizedCropRect": func() {
			RandomResizedCropRect(256, 256, DefaultScale, DefaultRatio, &r)
		},
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(10, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func BenchmarkNormalizeCHW(b *testing.B) {
	m := testImage(224, 224, 3)
	n := NewNormalizer(ImageNetMean, ImageNetStd)
	out := make([]float32, 224*224*3)
	for b.Loop() {
		n.ToCHW(out, m)
	}
}
