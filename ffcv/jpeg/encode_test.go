package jpeg

import (
	"bytes"
	"testing"

	"github.com/flockml/flock/ffcv/transform"
)

func TestEncodeRoundTrip(t *testing.T) {
	d := NewGoDecoder()
	for _, c := range []struct {
		img     transform.Image
		q       int
		maxMean float64
	}{
		{smooth(64, 48), 95, 1.5},
		{smooth(31, 17), 75, 3},
		{gray(smooth(40, 30)), 90, 1.5},
		{photo(64, 48, 1), 95, 10}, // noisy: chroma noise is lost to 4:2:0
	} {
		data := encoded(t, c.img, c.q)
		again := encoded(t, c.img, c.q)
		if !bytes.Equal(data, again) {
			t.Errorf("q%d: two encodings differ", c.q)
		}
		w, h, ch, err := DecodeConfig(data)
		if err != nil || w != c.img.Width || h != c.img.Height || ch != c.img.Channels {
			t.Fatalf("config %dx%dx%d, %v", w, h, ch, err)
		}
		got := decodeWith(t, d, data, 1, c.img.Channels)
		if _, mean := diff(got, c.img); mean > c.maxMean {
			t.Errorf("%dx%dx%d q%d: mean |error| %.2f > %v", w, h, ch, c.q, mean, c.maxMean)
		}
	}
	// A view with a stride larger than its width encodes its own pixels.
	big := photo(50, 40, 4)
	view := big.Sub(transform.Rect{X: 5, Y: 3, W: 20, H: 10})
	tight := transform.NewImage(20, 10, 3)
	transform.Resize(tight, view, transform.Rect{}, transform.Area)
	if !bytes.Equal(encoded(t, view, 90), encoded(t, tight, 90)) {
		t.Error("encoding a strided view differs from encoding its copy")
	}
}

// smooth is a gradient test image, which JPEG should reproduce closely.
func smooth(w, h int) transform.Image {
	m := transform.NewImage(w, h, 3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := m.Pix[(y*w+x)*3:]
			p[0], p[1], p[2] = uint8(40+3*x), uint8(200-2*y), uint8(100+x+y)
		}
	}
	return m
}

func TestEncodeErrors(t *testing.T) {
	var b bytes.Buffer
	for _, c := range []struct {
		img transform.Image
		q   int
	}{
		{photo(8, 8, 1), 0},
		{photo(8, 8, 1), 101},
		{transform.Image{Channels: 3}, 90},
		{transform.NewImage(4, 4, 2), 90},
	} {
		if err := Encode(&b, c.img, c.q); err == nil {
			t.Errorf("%dx%dx%d q%d: no error", c.img.Width, c.img.Height, c.img.Channels, c.q)
		}
	}
}
