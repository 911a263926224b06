package transform

import "fmt"

// Image is an 8-bit image in HWC order (channels interleaved): the sample of
// channel c at column x, row y is Pix[y*Stride + x*Channels + c]. Rows are
// Stride bytes apart (Stride ≥ Width·Channels). An Image is a view: copying
// the struct shares the pixels.
type Image struct {
	Pix                             []uint8
	Width, Height, Channels, Stride int
}

// NewImage allocates a zeroed w×h image with c channels and a tight stride.
func NewImage(w, h, c int) Image {
	if w < 0 || h < 0 || c <= 0 {
		panic("transform: NewImage: negative size or non-positive channel count")
	}
	return Image{Pix: make([]uint8, w*h*c), Width: w, Height: h, Channels: c, Stride: w * c}
}

// ImageOf wraps pix as a tightly packed w×h×c image. It panics if pix is too
// short.
func ImageOf(pix []uint8, w, h, c int) Image {
	if w < 0 || h < 0 || c <= 0 || len(pix) < w*h*c {
		panic("transform: ImageOf: pixel slice shorter than w·h·c")
	}
	return Image{Pix: pix[:w*h*c], Width: w, Height: h, Channels: c, Stride: w * c}
}

// Bounds returns the rectangle covering the whole image.
func (m Image) Bounds() Rect { return Rect{W: m.Width, H: m.Height} }

// Sub returns the part of m inside r as a view sharing m's pixels. It panics
// if r does not lie inside m.
func (m Image) Sub(r Rect) Image {
	if !r.In(m.Width, m.Height) {
		panic(fmt.Sprintf("transform: Sub: %v outside %dx%d image", r, m.Width, m.Height))
	}
	if r.W == 0 || r.H == 0 {
		return Image{Width: r.W, Height: r.H, Channels: m.Channels, Stride: m.Stride}
	}
	off := r.Y*m.Stride + r.X*m.Channels
	end := off + (r.H-1)*m.Stride + r.W*m.Channels
	return Image{Pix: m.Pix[off:end:end], Width: r.W, Height: r.H, Channels: m.Channels, Stride: m.Stride}
}

// Row returns the Width·Channels samples of row y.
func (m Image) Row(y int) []uint8 {
	off := y * m.Stride
	return m.Pix[off : off+m.Width*m.Channels]
}

// check panics with a message naming op if m's fields are inconsistent with
// its pixel slice.
func (m Image) check(op string) {
	if m.Width < 0 || m.Height < 0 || m.Channels <= 0 || m.Stride < m.Width*m.Channels {
		panic(fmt.Sprintf("transform: %s: invalid image %dx%dx%d stride %d", op, m.Width, m.Height, m.Channels, m.Stride))
	}
	if m.Width > 0 && m.Height > 0 && len(m.Pix) < (m.Height-1)*m.Stride+m.Width*m.Channels {
		panic(fmt.Sprintf("transform: %s: pixel slice of %d bytes too short for %dx%dx%d stride %d", op, len(m.Pix), m.Width, m.Height, m.Channels, m.Stride))
	}
}

// Rect is a crop window in pixel coordinates: columns X..X+W-1, rows Y..Y+H-1.
type Rect struct{ X, Y, W, H int }

// In reports whether r is non-negative and lies inside a w×h image.
func (r Rect) In(w, h int) bool {
	return r.X >= 0 && r.Y >= 0 && r.W >= 0 && r.H >= 0 && r.X+r.W <= w && r.Y+r.H <= h
}

func (r Rect) String() string { return fmt.Sprintf("Rect{X:%d Y:%d W:%d H:%d}", r.X, r.Y, r.W, r.H) }
