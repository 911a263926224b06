package transform

import "math"

// DefaultScale and DefaultRatio are torchvision's RandomResizedCrop defaults:
// the crop covers 8% to 100% of the image area, with aspect ratio (w/h)
// between 3/4 and 4/3.
var (
	DefaultScale = [2]float64{0.08, 1}
	DefaultRatio = [2]float64{3.0 / 4, 4.0 / 3}
)

// RandomResizedCropRect chooses a crop window of a w×h image as torchvision's
// RandomResizedCrop.get_params (and FFCV's get_random_crop) do: up to 10 tries
// of a target area uniform in scale·w·h and an aspect ratio log-uniform in
// ratio, side lengths rounded half to even (Python's round); the first window
// that fits is placed uniformly at random. If none fits, the fallback is a
// centred crop of the whole image clamped to the ratio range. The draws per
// try are, in order: area fraction, log-ratio, then (on success) the row and
// the column offsets.
func RandomResizedCropRect(w, h int, scale, ratio [2]float64, r *Rand) Rect {
	if w <= 0 || h <= 0 {
		panic("transform: RandomResizedCropRect: empty image")
	}
	area := float64(w) * float64(h)
	logLo, logHi := math.Log(ratio[0]), math.Log(ratio[1])
	for try := 0; try < 10; try++ {
		target := area * r.Uniform(scale[0], scale[1])
		aspect := math.Exp(r.Uniform(logLo, logHi))
		cw := int(math.RoundToEven(math.Sqrt(target * aspect)))
		ch := int(math.RoundToEven(math.Sqrt(target / aspect)))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			y := r.Intn(h - ch + 1)
			x := r.Intn(w - cw + 1)
			return Rect{X: x, Y: y, W: cw, H: ch}
		}
	}
	inRatio := float64(w) / float64(h)
	lo, hi := math.Min(ratio[0], ratio[1]), math.Max(ratio[0], ratio[1])
	cw, ch := w, h
	switch {
	case inRatio < lo:
		ch = int(math.RoundToEven(float64(cw) / lo))
	case inRatio > hi:
		cw = int(math.RoundToEven(float64(ch) * hi))
	}
	return Rect{X: (w - cw) / 2, Y: (h - ch) / 2, W: cw, H: ch}
}

// CenterCropRect returns FFCV's centre crop of a w×h image
// (ffcv.transforms.utils get_center_crop): a square of side
// c = ⌊ratio·min(w, h)⌋ offset by ⌊(w−c)/2⌋, ⌊(h−c)/2⌋. ratio is the output
// side over the resize side, 224/256 for the usual ImageNet evaluation. The
// side is at least 1.
func CenterCropRect(w, h int, ratio float64) Rect {
	if w <= 0 || h <= 0 {
		panic("transform: CenterCropRect: empty image")
	}
	if !(ratio > 0 && ratio <= 1) {
		panic("transform: CenterCropRect: ratio must be in (0, 1]")
	}
	c := int(ratio * float64(min(w, h)))
	c = max(c, 1)
	return Rect{X: (w - c) / 2, Y: (h - c) / 2, W: c, H: c}
}
