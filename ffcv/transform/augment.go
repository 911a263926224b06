package transform

import "fmt"

// FlipHorizontal mirrors img left to right, in place.
func FlipHorizontal(img Image) {
	img.check("FlipHorizontal")
	c := img.Channels
	for y := 0; y < img.Height; y++ {
		row := img.Row(y)
		switch c {
		case 3:
			for i, j := 0, len(row)-3; i < j; i, j = i+3, j-3 {
				a := row[i : i+3 : i+3]
				b := row[j : j+3 : j+3]
				a[0], b[0] = b[0], a[0]
				a[1], b[1] = b[1], a[1]
				a[2], b[2] = b[2], a[2]
			}
		case 1:
			for i, j := 0, len(row)-1; i < j; i, j = i+1, j-1 {
				row[i], row[j] = row[j], row[i]
			}
		default:
			for i, j := 0, len(row)-c; i < j; i, j = i+c, j-c {
				for k := 0; k < c; k++ {
					row[i+k], row[j+k] = row[j+k], row[i+k]
				}
			}
		}
	}
}

// RandomFlipHorizontal mirrors img with probability p (one draw from r) and
// reports whether it did.
func RandomFlipHorizontal(img Image, p float64, r *Rand) bool {
	if r.Float64() < p {
		FlipHorizontal(img)
		return true
	}
	return false
}

// Translate shifts img in place by a random offset, as FFCV's
// RandomTranslate: the image is padded by pad pixels of fill on every side
// and a window of the original size is taken at a row offset, then a column
// offset, each uniform in [0, 2·pad]. Pixels shifted in are fill (one value
// per channel; nil means zeros). It returns the shift (dx, dy) applied to
// the content, each in [−pad, pad].
func Translate(img Image, pad int, fill []uint8, r *Rand) (dx, dy int) {
	if pad < 0 {
		panic("transform: Translate: negative padding")
	}
	oy := r.Intn(2*pad + 1)
	ox := r.Intn(2*pad + 1)
	dx, dy = pad-ox, pad-oy
	TranslateBy(img, dx, dy, fill)
	return dx, dy
}

// TranslateBy moves the content of img by dx columns and dy rows in place
// (positive: right and down), filling the uncovered pixels with fill (one
// value per channel; nil means zeros).
func TranslateBy(img Image, dx, dy int, fill []uint8) {
	img.check("TranslateBy")
	c := img.Channels
	if fill != nil && len(fill) != c {
		panic(fmt.Sprintf("transform: TranslateBy: %d fill values for %d channels", len(fill), c))
	}
	w, h := img.Width, img.Height
	rowLen := w * c
	fillRow := func(row []uint8) {
		if fill == nil {
			clear(row)
			return
		}
		for i := 0; i < len(row); i += c {
			copy(row[i:i+c], fill)
		}
	}
	moveRow := func(dstY, srcY int) {
		d := img.Pix[dstY*img.Stride : dstY*img.Stride+rowLen]
		s := img.Pix[srcY*img.Stride : srcY*img.Stride+rowLen]
		switch {
		case dx >= w || dx <= -w:
			fillRow(d)
		case dx >= 0:
			copy(d[dx*c:], s[:rowLen-dx*c])
			fillRow(d[:dx*c])
		default:
			copy(d, s[-dx*c:])
			fillRow(d[rowLen+dx*c:])
		}
	}
	if dy >= 0 {
		for y := h - 1; y >= 0; y-- {
			if y-dy >= 0 {
				moveRow(y, y-dy)
			} else {
				fillRow(img.Pix[y*img.Stride : y*img.Stride+rowLen])
			}
		}
	} else {
		for y := 0; y < h; y++ {
			if y-dy < h {
				moveRow(y, y-dy)
			} else {
				fillRow(img.Pix[y*img.Stride : y*img.Stride+rowLen])
			}
		}
	}
}

// Cutout fills a size×size square of img with fill (one value per channel;
// nil means zeros), as FFCV's Cutout: the square lies inside the image, its
// top row then its left column uniform among the valid positions. A side
// larger than the image is clamped to it. It returns the square.
func Cutout(img Image, size int, fill []uint8, r *Rand) Rect {
	img.check("Cutout")
	if size < 0 {
		panic("transform: Cutout: negative size")
	}
	c := img.Channels
	if fill != nil && len(fill) != c {
		panic(fmt.Sprintf("transform: Cutout: %d fill values for %d channels", len(fill), c))
	}
	sw, sh := min(size, img.Width), min(size, img.Height)
	y0 := r.Intn(img.Height - sh + 1)
	x0 := r.Intn(img.Width - sw + 1)
	sq := Rect{X: x0, Y: y0, W: sw, H: sh}
	for y := y0; y < y0+sh; y++ {
		row := img.Pix[y*img.Stride+x0*c : y*img.Stride+(x0+sw)*c]
		if fill == nil {
			clear(row)
			continue
		}
		for i := 0; i < len(row); i += c {
			copy(row[i:i+c], fill)
		}
	}
	return sq
}

// Mixup draws λ ~ Beta(α, α) from r and writes dst = λ·a + (1−λ)·b
// (Zhang et al., "mixup: Beyond Empirical Risk Minimization", 2018). It
// returns λ so that the labels can be mixed the same way. dst may be a or
// b; the three slices must have the same length.
func Mixup(dst, a, b []float32, alpha float64, r *Rand) float32 {
	if !(alpha > 0) {
		panic("transform: Mixup: alpha must be positive")
	}
	lam := float32(r.Beta(alpha, alpha))
	Mix(dst, a, b, lam)
	return lam
}

// Mix writes dst = λ·a + (1−λ)·b.
func Mix(dst, a, b []float32, lam float32) {
	if len(a) != len(dst) || len(b) != len(dst) {
		panic(fmt.Sprintf("transform: Mix: lengths %d, %d, %d differ", len(dst), len(a), len(b)))
	}
	mu := 1 - lam
	a = a[:len(dst)]
	b = b[:len(dst)]
	for i := range dst {
		dst[i] = lam*a[i] + mu*b[i]
	}
}
