package ffcv

import (
	"fmt"
	"math"

	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/transform"
)

// SyntheticSource is a beton.Source of generated photo-like RGB images,
// for benchmarks and tests that need JPEG data without a real data set.
// Image i is a pure function of (Seed, i): a colour gradient, a few
// overlapping ellipses, a sinusoidal texture and pixel noise, so that at
// JPEG quality 90 a 256×256 image takes about as many bytes as a natural
// photograph of that size (≈ 20–30 KB). Label i is i mod Classes.
type SyntheticSource struct {
	N             int
	Width, Height int
	// Classes is the number of labels (10 when 0).
	Classes int
	Seed    uint64
	// Image sets the image field (3 channels).
	Image beton.RGBImageField
}

// Fields returns the source's fields: "image" and "label".
func (s *SyntheticSource) Fields() []beton.NamedField {
	f := s.Image
	f.Channels = 3
	return []beton.NamedField{{Name: "image", Field: f}, {Name: "label", Field: beton.IntField{}}}
}

// Len returns N.
func (s *SyntheticSource) Len() int { return s.N }

// Sample generates image i into out[0] and its label into out[1].
func (s *SyntheticSource) Sample(i int, out []any) error {
	if s.Width <= 0 || s.Height <= 0 {
		return fmt.Errorf("ffcv: synthetic source: size %d×%d: want > 0", s.Width, s.Height)
	}
	classes := s.Classes
	if classes <= 0 {
		classes = 10
	}
	out[0] = SyntheticImage(s.Width, s.Height, s.Seed, uint64(i))
	out[1] = int64(i % classes)
	return nil
}

// SyntheticImage returns the w×h RGB image of SyntheticSource for (seed,
// i).
func SyntheticImage(w, h int, seed, i uint64) transform.Image {
	r := transform.NewRand(seed, 0, i, 0x5eed)
	img := transform.NewImage(w, h, 3)
	var base, dx, dy [3]float64
	for c := range 3 {
		base[c] = r.Uniform(40, 215)
		dx[c] = r.Uniform(-80, 80) / float64(w)
		dy[c] = r.Uniform(-80, 80) / float64(h)
	}
	type ellipse struct {
		cx, cy, rx, ry, cos, sin float64
		col                      [3]float64
	}
	es := make([]ellipse, 3+r.Intn(5))
	for k := range es {
		a := r.Uniform(0, math.Pi)
		es[k] = ellipse{
			cx: r.Uniform(0, float64(w)), cy: r.Uniform(0, float64(h)),
			rx: r.Uniform(0.05, 0.35) * float64(w), ry: r.Uniform(0.05, 0.35) * float64(h),
			cos: math.Cos(a), sin: math.Sin(a),
			col: [3]float64{r.Uniform(0, 255), r.Uniform(0, 255), r.Uniform(0, 255)},
		}
	}
	fx, fy := r.Uniform(0.05, 0.4), r.Uniform(0.05, 0.4)
	amp := r.Uniform(6, 16)
	noise := r.Uniform(16, 24)
	// Pixel noise from xorshift64, seeded by the image's stream: a Philox
	// block per pixel would cost more than the rest of the image.
	state := r.Uint64() | 1
	for y := range h {
		row := img.Row(y)
		phase := 2 * math.Sin(fy*float64(y))
		for x := range w {
			var px [3]float64
			for c := range 3 {
				px[c] = base[c] + dx[c]*float64(x) + dy[c]*float64(y)
			}
			for _, e := range es {
				u := (float64(x)-e.cx)*e.cos + (float64(y)-e.cy)*e.sin
				v := -(float64(x)-e.cx)*e.sin + (float64(y)-e.cy)*e.cos
				if u*u/(e.rx*e.rx)+v*v/(e.ry*e.ry) <= 1 {
					px = e.col
				}
			}
			tex := amp * math.Sin(fx*float64(x)+phase)
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			for c := range 3 {
				u := state >> (20 * c)
				n := noise * (float64(u&0x3ff+u>>10&0x3ff)/1023 - 1)
				row[3*x+c] = clamp8(px[c] + tex + n)
			}
		}
	}
	return img
}

func clamp8(v float64) uint8 {
	switch {
	case v <= 0:
		return 0
	case v >= 255:
		return 255
	}
	return uint8(v + 0.5)
}
