package ffcv

import (
	"math"

	"github.com/flockml/flock/ffcv/transform"
	"github.com/flockml/flock/tensor"
)

// toCHW writes the uint8 HWC image img into dst in CHW order.
func toCHW(dst []uint8, img transform.Image) {
	w, h, c := img.Width, img.Height, img.Channels
	plane := w * h
	for ch := range c {
		d := dst[ch*plane : (ch+1)*plane]
		for y := range h {
			row := img.Row(y)
			o := d[y*w : y*w+w]
			for x := range o {
				o[x] = row[x*c+ch]
			}
		}
	}
}

// mixRows mixes the n rows of an image column in place: row b becomes
// Lambda[b]·row b + (1 − Lambda[b])·row Pair[b], every pair read before it
// is overwritten. Pair[b] is b − 1 (the first row pairs with the last), so
// rows are mixed from the last down, with a copy of the original last row
// for the first.
func mixRows(col *Column, n int, sc *fieldScratch) {
	if n < 2 {
		return
	}
	rb := col.rowBytes()
	sc.row = grow(sc.row, rb)
	copy(sc.row, col.raw[(n-1)*rb:n*rb])
	for b := n - 1; b >= 0; b-- {
		other := sc.row
		if p := col.Pair[b]; p != n-1 {
			other = col.raw[p*rb : (p+1)*rb]
		}
		dst := col.raw[b*rb : (b+1)*rb]
		lam := col.Lambda[b]
		if col.DType == tensor.Float32 {
			d, o := f32(dst), f32(other)
			transform.Mix(d, d, o, lam)
			continue
		}
		mu := 1 - lam
		for i, v := range dst {
			dst[i] = uint8(math.Round(float64(lam*float32(v) + mu*float32(other[i]))))
		}
	}
}
