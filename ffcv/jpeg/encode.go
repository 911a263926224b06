package jpeg

import (
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"io"

	"github.com/flockml/flock/ffcv/transform"
)

// Encode writes img (1 or 3 channels) as a baseline JPEG at quality q
// (1–100) with image/jpeg's encoder: 4:2:0 chroma subsampling for colour,
// a single component for grayscale. The output is a pure function of the
// pixels and q.
func Encode(w io.Writer, img transform.Image, quality int) error {
	if quality < 1 || quality > 100 {
		return fmt.Errorf("jpeg: encode: quality %d not in 1..100", quality)
	}
	if img.Width <= 0 || img.Height <= 0 {
		return fmt.Errorf("jpeg: encode: empty %dx%d image", img.Width, img.Height)
	}
	var m image.Image
	switch img.Channels {
	case 1:
		m = &image.Gray{Pix: img.Pix, Stride: img.Stride, Rect: image.Rect(0, 0, img.Width, img.Height)}
	case 3:
		// image/jpeg's fast path takes RGBA; the conversion to YCbCr is the
		// same as for any other colour image.
		rgba := image.NewRGBA(image.Rect(0, 0, img.Width, img.Height))
		for y := 0; y < img.Height; y++ {
			src := img.Row(y)
			dst := rgba.Pix[y*rgba.Stride : y*rgba.Stride+4*img.Width]
			for x := 0; x < img.Width; x++ {
				dst[4*x], dst[4*x+1], dst[4*x+2], dst[4*x+3] = src[3*x], src[3*x+1], src[3*x+2], 0xff
			}
		}
		m = rgba
	default:
		return fmt.Errorf("jpeg: encode: %d channels, want 1 or 3", img.Channels)
	}
	if err := stdjpeg.Encode(w, m, &stdjpeg.Options{Quality: quality}); err != nil {
		return fmt.Errorf("jpeg: encode: %w", err)
	}
	return nil
}
