package transform

import (
	"fmt"

	"github.com/flockml/flock/internal/float16"
)

// ImageNetMean and ImageNetStd are the usual per-channel statistics of
// ImageNet in pixel units (torchvision's values times 255), as FFCV's
// examples pass them to NormalizeImage.
var (
	ImageNetMean = []float64{0.485 * 255, 0.456 * 255, 0.406 * 255}
	ImageNetStd  = []float64{0.229 * 255, 0.224 * 255, 0.225 * 255}
)

// Normalizer maps uint8 samples to (v − mean[c]) / std[c] through a
// 256-entry lookup table per channel and writes them as float32 (or
// bfloat16) in CHW or HWC order. It is read-only after NewNormalizer and
// safe for concurrent use.
type Normalizer struct {
	lut  [][256]float32
	lutB [][256]uint16
}

// NewNormalizer builds the tables for one mean and std per channel, in
// pixel units (0–255).
func NewNormalizer(mean, std []float64) *Normalizer {
	if len(mean) == 0 || len(mean) != len(std) {
		panic("transform: NewNormalizer: mean and std must have one value per channel")
	}
	n := &Normalizer{lut: make([][256]float32, len(mean)), lutB: make([][256]uint16, len(mean))}
	for c := range mean {
		if !(std[c] != 0) {
			panic("transform: NewNormalizer: zero std")
		}
		for v := 0; v < 256; v++ {
			f := float32((float64(v) - mean[c]) / std[c])
			n.lut[c][v] = f
			n.lutB[c][v] = BFloat16(f)
		}
	}
	return n
}

// Channels returns the number of channels the tables are for.
func (n *Normalizer) Channels() int { return len(n.lut) }

func (n *Normalizer) checkArgs(op string, dstLen int, img Image) {
	img.check(op)
	if img.Channels != len(n.lut) {
		panic(fmt.Sprintf("transform: %s: %d-channel image, tables for %d", op, img.Channels, len(n.lut)))
	}
	if dstLen < img.Width*img.Height*img.Channels {
		panic(fmt.Sprintf("transform: %s: destination of %d values for %dx%dx%d image", op, dstLen, img.Width, img.Height, img.Channels))
	}
}

// ToCHW writes the normalized img into dst in CHW order (planes of
// Height×Width), the layout of an NCHW batch slot.
func (n *Normalizer) ToCHW(dst []float32, img Image) {
	n.checkArgs("Normalizer.ToCHW", len(dst), img)
	w, h := img.Width, img.Height
	plane := w * h
	if img.Channels == 3 {
		l0, l1, l2 := &n.lut[0], &n.lut[1], &n.lut[2]
		d0, d1, d2 := dst[:plane], dst[plane:2*plane], dst[2*plane:3*plane]
		for y := 0; y < h; y++ {
			row := img.Row(y)
			o0, o1, o2 := d0[y*w:y*w+w], d1[y*w:y*w+w], d2[y*w:y*w+w]
			for x := range o0 {
				p := row[3*x : 3*x+3 : 3*x+3]
				o0[x] = l0[p[0]]
				o1[x] = l1[p[1]]
				o2[x] = l2[p[2]]
			}
		}
		return
	}
	c := img.Channels
	for ch := 0; ch < c; ch++ {
		l := &n.lut[ch]
		d := dst[ch*plane : (ch+1)*plane]
		for y := 0; y < h; y++ {
			row := img.Row(y)
			o := d[y*w : y*w+w]
			for x := range o {
				o[x] = l[row[x*c+ch]]
			}
		}
	}
}

// ToHWC writes the normalized img into dst in HWC order.
func (n *Normalizer) ToHWC(dst []float32, img Image) {
	n.checkArgs("Normalizer.ToHWC", len(dst), img)
	c := img.Channels
	rowLen := img.Width * c
	for y := 0; y < img.Height; y++ {
		row := img.Row(y)
		o := dst[y*rowLen : y*rowLen+rowLen]
		for i, v := range row {
			o[i] = n.lut[i%c][v]
		}
	}
}

// ToCHWBF16 writes the normalized img into dst in CHW order as bfloat16 bit
// patterns (float32 rounded to nearest even).
func (n *Normalizer) ToCHWBF16(dst []uint16, img Image) {
	n.checkArgs("Normalizer.ToCHWBF16", len(dst), img)
	w, h, c := img.Width, img.Height, img.Channels
	plane := w * h
	for ch := 0; ch < c; ch++ {
		l := &n.lutB[ch]
		d := dst[ch*plane : (ch+1)*plane]
		for y := 0; y < h; y++ {
			row := img.Row(y)
			o := d[y*w : y*w+w]
			for x := range o {
				o[x] = l[row[x*c+ch]]
			}
		}
	}
}

// ToFloat32CHW converts img to float32 in CHW order without normalization
// (values 0–255), for pipelines that normalize later.
func ToFloat32CHW(dst []float32, img Image) {
	img.check("ToFloat32CHW")
	w, h, c := img.Width, img.Height, img.Channels
	if len(dst) < w*h*c {
		panic("transform: ToFloat32CHW: destination too short")
	}
	plane := w * h
	for ch := 0; ch < c; ch++ {
		d := dst[ch*plane : (ch+1)*plane]
		for y := 0; y < h; y++ {
			row := img.Row(y)
			o := d[y*w : y*w+w]
			for x := range o {
				o[x] = float32(row[x*c+ch])
			}
		}
	}
}

// BFloat16 rounds f to bfloat16 (nearest, ties to even) and returns its bit
// pattern, as the backends convert. NaN stays NaN.
func BFloat16(f float32) uint16 { return float16.BFloat16FromFloat32(f) }
