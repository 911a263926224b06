package jpeg

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	stdjpeg "image/jpeg"
	"os"
	"runtime"

	"github.com/flockml/flock/ffcv/transform"
)

// ScaledSize returns the size of a w×h image decoded at 1/denom: each side
// rounded up, as libjpeg's scaled decoding does.
func ScaledSize(w, h, denom int) (int, int) {
	checkDenom(denom)
	return (w + denom - 1) / denom, (h + denom - 1) / denom
}

func checkDenom(denom int) {
	switch denom {
	case 1, 2, 4, 8:
	default:
		panic(fmt.Sprintf("jpeg: scale denominator %d not in {1, 2, 4, 8}", denom))
	}
}

// DecodeConfig reads the width, height and number of components of a JPEG
// from its header: 1 for grayscale, 3 for colour (YCbCr, RGB, and CMYK,
// which Decode converts to RGB).
func DecodeConfig(data []byte) (w, h, comps int, err error) {
	return readConfig(data)
}

// Decoder decodes JPEGs into caller-provided images, reusing its scratch
// memory between calls. It is not safe for concurrent use: use one per
// worker.
type Decoder struct {
	turbo *turboHandle
	g     goDecoder
}

// SetFastDCT chooses libjpeg's fast integer IDCT (jidctfst.c, as
// TJFLAG_FASTDCT; FFCV decodes this way) instead of the default accurate
// one (jidctint.c, as PIL). It is faster and a little less accurate; it
// applies to full-size decoding (scaled decoding has its own transforms).
func (d *Decoder) SetFastDCT(on bool) {
	d.g.fastDCT = on
	if d.turbo != nil {
		d.turbo.fastDCT = on
	}
}

// SetFancyUpsampling chooses how subsampled chroma is brought to full
// resolution: libjpeg's triangle filter (true, the default, as
// libjpeg-turbo, PIL and FFCV decode) or sample replication (false, as
// image/jpeg and TJFLAG_FASTUPSAMPLE; a little faster).
func (d *Decoder) SetFancyUpsampling(on bool) {
	d.g.fast = !on
	if d.turbo != nil {
		d.turbo.fastUpsample = !on
	}
}

// NewDecoder returns a decoder that uses libjpeg-turbo (libturbojpeg.so.0,
// loaded at run time) when it is present, and the pure-Go decoder otherwise.
// The environment variable FLOCK_JPEG=go forces pure Go; FLOCK_JPEG=turbo
// makes the absence of libjpeg-turbo an error (NewDecoder panics naming the
// reason, since a run that asked for it cannot go on meaningfully).
func NewDecoder() *Decoder {
	d, err := OpenDecoder(os.Getenv("FLOCK_JPEG"))
	if err != nil {
		panic(err.Error())
	}
	return d
}

// OpenDecoder is NewDecoder with the backend named explicitly: "go",
// "turbo" (an error if libjpeg-turbo cannot be loaded) or "auto" / ""
// (libjpeg-turbo when present).
func OpenDecoder(backend string) (*Decoder, error) { return newDecoder(backend) }

// NewGoDecoder returns a decoder that always uses the pure-Go path.
func NewGoDecoder() *Decoder { return &Decoder{} }

func newDecoder(mode string) (*Decoder, error) {
	switch mode {
	case "go":
		return &Decoder{}, nil
	case "", "auto", "turbo":
		t, err := newTurboHandle()
		if err != nil {
			if mode == "turbo" {
				return nil, fmt.Errorf("jpeg: backend turbo: %w", err)
			}
			return &Decoder{}, nil
		}
		d := &Decoder{turbo: t}
		// A Decoder dropped without Close still frees its C handle.
		runtime.AddCleanup(d, func(t *turboHandle) { t.close() }, t)
		return d, nil
	}
	return nil, fmt.Errorf("jpeg: backend %q: want go, turbo or auto", mode)
}

// Backend names the decoding path: "turbojpeg" or "go".
func (d *Decoder) Backend() string {
	if d.turbo != nil {
		return "turbojpeg"
	}
	return "go"
}

// Close releases the libjpeg-turbo handle, if any; the Decoder then decodes
// with the pure-Go path.
func (d *Decoder) Close() {
	if d.turbo != nil {
		d.turbo.close()
		d.turbo = nil
	}
}

// Decode decodes data scaled by 1/denom (denom in 1, 2, 4, 8) into dst, which
// must have the size ScaledSize gives and 1 or 3 channels. A colour JPEG
// decoded into a 1-channel image gives its luma; a grayscale JPEG decoded
// into 3 channels is replicated. Corrupt or truncated data gives an error.
// A warm Decoder allocates nothing for baseline JPEGs.
func (d *Decoder) Decode(dst transform.Image, data []byte, denom int) error {
	checkDenom(denom)
	if dst.Channels != 1 && dst.Channels != 3 {
		return fmt.Errorf("jpeg: decode: destination has %d channels, want 1 or 3", dst.Channels)
	}
	if dst.Stride < dst.Width*dst.Channels || len(dst.Pix) < (dst.Height-1)*dst.Stride+dst.Width*dst.Channels {
		return errors.New("jpeg: decode: destination pixel slice too short for its size")
	}
	if d.turbo != nil {
		return d.turbo.decode(dst, data, denom)
	}
	return d.g.decode(dst, data, denom)
}

// decodeStd decodes with image/jpeg (for what the fast path does not
// handle, e.g. progressive JPEGs) and converts, block-averaging when
// denom > 1, into dst.
func decodeStd(dst transform.Image, data []byte, denom int) error {
	// Check the size before image/jpeg allocates for it.
	cfg, err := stdjpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("jpeg: decode: %w", err)
	}
	if sw, sh := ScaledSize(cfg.Width, cfg.Height, denom); sw != dst.Width || sh != dst.Height {
		return fmt.Errorf("jpeg: decode: %dx%d image at 1/%d is %dx%d, destination is %dx%d", cfg.Width, cfg.Height, denom, sw, sh, dst.Width, dst.Height)
	}
	img, err := stdjpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("jpeg: decode: %w", err)
	}
	b := img.Bounds()
	if sw, sh := ScaledSize(b.Dx(), b.Dy(), denom); sw != dst.Width || sh != dst.Height {
		return fmt.Errorf("jpeg: decode: %dx%d image at 1/%d is %dx%d, destination is %dx%d", b.Dx(), b.Dy(), denom, sw, sh, dst.Width, dst.Height)
	}
	var px func(x, y int) (r, g, bl uint8)
	_, isGray := img.(*image.Gray)
	switch m := img.(type) {
	case *image.YCbCr:
		if dst.Channels == 1 {
			isGray = true
			px = func(x, y int) (uint8, uint8, uint8) {
				v := m.Y[m.YOffset(x, y)]
				return v, v, v
			}
			break
		}
		px = func(x, y int) (uint8, uint8, uint8) {
			yi, ci := m.YOffset(x, y), m.COffset(x, y)
			return yccToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
		}
	case *image.Gray:
		px = func(x, y int) (uint8, uint8, uint8) {
			v := m.Pix[m.PixOffset(x, y)]
			return v, v, v
		}
	default:
		px = func(x, y int) (uint8, uint8, uint8) {
			r, g, bl, _ := img.At(x, y).RGBA()
			return uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8)
		}
	}
	for oy := 0; oy < dst.Height; oy++ {
		row := dst.Pix[oy*dst.Stride:]
		for ox := 0; ox < dst.Width; ox++ {
			var sr, sg, sb, n uint32
			for y := oy * denom; y < min(oy*denom+denom, b.Dy()); y++ {
				for x := ox * denom; x < min(ox*denom+denom, b.Dx()); x++ {
					r, g, bl := px(b.Min.X+x, b.Min.Y+y)
					sr += uint32(r)
					sg += uint32(g)
					sb += uint32(bl)
					n++
				}
			}
			r, g, bl := uint8((sr+n/2)/n), uint8((sg+n/2)/n), uint8((sb+n/2)/n)
			if dst.Channels == 3 {
				row[3*ox], row[3*ox+1], row[3*ox+2] = r, g, bl
			} else if isGray {
				row[ox] = r
			} else {
				row[ox] = uint8((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(bl) + 1<<15) >> 16)
			}
		}
	}
	return nil
}
