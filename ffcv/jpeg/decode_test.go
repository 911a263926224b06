package jpeg

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/ffcv/transform"
)

// testJPEG is one test file.
type testJPEG struct {
	name string
	data []byte
}

// photo draws a w×h test picture: smooth colour fields, noise and hard
// edges.
func photo(w, h int, seed uint64) transform.Image {
	r := rand.New(rand.NewPCG(seed, 1))
	m := transform.NewImage(w, h, 3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			p := m.Pix[(y*w+x)*3:]
			for c := 0; c < 3; c++ {
				v := 128 + 90*sinApprox(float64(x)/float64(7+4*c)+float64(y)/float64(11+c)) + r.NormFloat64()*10
				if x > w/3 && x < w/2 && y > h/4 && y < h/2 {
					v = float64(40 + 100*c)
				}
				p[c] = uint8(min(max(v, 0), 255))
			}
		}
	}
	return m
}

func sinApprox(x float64) float64 {
	// A triangle wave is smooth enough and needs no math import games.
	x -= 4 * float64(int(x/4))
	if x < 0 {
		x += 4
	}
	switch {
	case x < 1:
		return x
	case x < 3:
		return 2 - x
	}
	return x - 4
}

func gray(m transform.Image) transform.Image {
	g := transform.NewImage(m.Width, m.Height, 1)
	for i := range g.Pix {
		g.Pix[i] = uint8((uint32(m.Pix[3*i])*77 + uint32(m.Pix[3*i+1])*150 + uint32(m.Pix[3*i+2])*29) >> 8)
	}
	return g
}

func encoded(t testing.TB, m transform.Image, q int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Encode(&b, m, q); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// extractJPEGs finds the JPEGs stored in a file (e.g. an FFCV .beton): each
// runs from SOI to the first EOI after its first SOS.
func extractJPEGs(data []byte) [][]byte {
	var out [][]byte
	for i := 0; i+3 < len(data); {
		j := bytes.Index(data[i:], []byte{0xff, 0xd8, 0xff})
		if j < 0 {
			break
		}
		start := i + j
		sos := bytes.Index(data[start:], []byte{0xff, 0xda})
		if sos < 0 {
			break
		}
		end := bytes.Index(data[start+sos:], []byte{0xff, 0xd9})
		if end < 0 {
			break
		}
		stop := start + sos + end + 2
		out = append(out, data[start:stop:stop])
		i = stop
	}
	return out
}

// corpus returns the test JPEGs: encoded here with image/jpeg, the files of
// testdata/ffcv/golden/jpeg, and (unless short) the JPEGs of the FFCV test
// file. Set fallback to include those the fast path hands to image/jpeg.
func corpus(t testing.TB, fallback bool) []testJPEG {
	t.Helper()
	var out []testJPEG
	for _, sz := range [][2]int{{1, 1}, {7, 5}, {16, 16}, {33, 17}, {64, 48}, {100, 75}} {
		for _, q := range []int{50, 90, 100} {
			m := photo(sz[0], sz[1], uint64(sz[0]*q))
			out = append(out, testJPEG{fmt.Sprintf("std_%dx%d_q%d", sz[0], sz[1], q), encoded(t, m, q)})
		}
		out = append(out, testJPEG{fmt.Sprintf("std_gray_%dx%d", sz[0], sz[1]), encoded(t, gray(photo(sz[0], sz[1], 3)), 80)})
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "ffcv", "golden", "jpeg", "*.jpg"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden JPEGs: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if !fallback && (strings.Contains(name, "progressive") || strings.Contains(name, "411")) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, testJPEG{name, b})
	}
	beton, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "jpeg_q90_max256.beton"))
	if err != nil {
		t.Fatal(err)
	}
	jpegs := extractJPEGs(beton)
	if len(jpegs) != 48 {
		t.Fatalf("found %d JPEGs in jpeg_q90_max256.beton, want 48", len(jpegs))
	}
	step := 1
	if testing.Short() {
		step = 8
	}
	for i := 0; i < len(jpegs); i += step {
		out = append(out, testJPEG{fmt.Sprintf("beton_%d", i), jpegs[i]})
	}
	return out
}

func decodeWith(t testing.TB, d *Decoder, data []byte, denom, channels int) transform.Image {
	t.Helper()
	w, h, _, err := DecodeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	sw, sh := ScaledSize(w, h, denom)
	dst := transform.NewImage(sw, sh, channels)
	if err := d.Decode(dst, data, denom); err != nil {
		t.Fatalf("%s decode 1/%d: %v", d.Backend(), denom, err)
	}
	return dst
}

func diff(a, b transform.Image) (maxd int, mean float64) {
	var sum int
	for i := range a.Pix {
		d := int(a.Pix[i]) - int(b.Pix[i])
		if d < 0 {
			d = -d
		}
		sum += d
		maxd = max(maxd, d)
	}
	return maxd, float64(sum) / float64(len(a.Pix))
}

// stdRGB decodes with image/jpeg and converts with image/color's YCbCr
// formula, as an image/jpeg user would.
func stdRGB(t testing.TB, data []byte, channels int) transform.Image {
	t.Helper()
	img, err := stdjpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	out := transform.NewImage(b.Dx(), b.Dy(), channels)
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			p := out.Pix[(y*b.Dx()+x)*channels:]
			switch m := img.(type) {
			case *image.YCbCr:
				yi, ci := m.YOffset(x+b.Min.X, y+b.Min.Y), m.COffset(x+b.Min.X, y+b.Min.Y)
				if channels == 1 {
					p[0] = m.Y[yi]
					continue
				}
				p[0], p[1], p[2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			case *image.Gray:
				v := m.Pix[m.PixOffset(x+b.Min.X, y+b.Min.Y)]
				for c := 0; c < channels; c++ {
					p[c] = v
				}
			default:
				t.Fatalf("image/jpeg returned %T", img)
			}
		}
	}
	return out
}

// Against image/jpeg (replicated chroma, like it): the IDCTs differ in
// rounding (image/jpeg's is not libjpeg's) and so does the YCbCr → RGB
// fixed point, by a few levels at most.
const (
	stdMaxDiff  = 4
	stdMeanDiff = 0.6
)

func TestDecodeMatchesImageJPEG(t *testing.T) {
	d := NewGoDecoder()
	d.SetFancyUpsampling(false)
	worst := 0.0
	for _, f := range corpus(t, true) {
		for _, ch := range []int{3, 1} {
			got := decodeWith(t, d, f.data, 1, ch)
			want := stdRGB(t, f.data, ch)
			maxd, mean := diff(got, want)
			worst = max(worst, mean)
			if maxd > stdMaxDiff || mean > stdMeanDiff {
				t.Errorf("%s (%d channels): max |diff| %d, mean %.3f; limits %d, %v", f.name, ch, maxd, mean, stdMaxDiff, stdMeanDiff)
			}
		}
	}
	t.Logf("worst mean |diff| %.3f", worst)
}

// Against libjpeg-turbo (same IDCTs, upsampling and colour conversion):
// equal but for rare rounding in its SIMD code.
const (
	turboMaxDiff  = 1
	turboMeanDiff = 0.01
)

func TestDecodeMatchesTurbo(t *testing.T) {
	if ok, why := TurboAvailable(); !ok {
		t.Skipf("libjpeg-turbo not available: %s", why)
	}
	tj, err := newDecoder("turbo")
	if err != nil {
		t.Fatal(err)
	}
	defer tj.Close()
	for _, mode := range [][2]bool{{true, false}, {false, false}, {true, true}} {
		fancy, fastDCT := mode[0], mode[1]
		g := NewGoDecoder()
		g.SetFancyUpsampling(fancy)
		tj.SetFancyUpsampling(fancy)
		g.SetFastDCT(fastDCT)
		tj.SetFastDCT(fastDCT)
		for _, f := range corpus(t, false) {
			w, h, _, _ := DecodeConfig(f.data)
			for _, denom := range []int{1, 2, 4, 8} {
				if sw, sh := ScaledSize(w, h, denom); denom > 1 {
					if pw, ph := ScaledSize(w, h, denom/2); pw == sw && ph == sh {
						// libjpeg-turbo picks the largest scale that gives
						// the requested size: not 1/denom here.
						continue
					}
				}
				for _, ch := range []int{3, 1} {
					got := decodeWith(t, g, f.data, denom, ch)
					want := decodeWith(t, tj, f.data, denom, ch)
					maxd, mean := diff(got, want)
					if maxd > turboMaxDiff || mean > turboMeanDiff {
						t.Errorf("%s 1/%d %d channels fancy=%v fastDCT=%v: max |diff| %d, mean %.4f; limits %d, %v", f.name, denom, ch, fancy, fastDCT, maxd, mean, turboMaxDiff, turboMeanDiff)
					}
				}
			}
		}
	}
}

func TestDecodeScaledIsDownscale(t *testing.T) {
	// A 1/denom decode's luma is close to the full decode's averaged over
	// denom×denom blocks. (Chroma is coarser where it is subsampled.)
	d := NewGoDecoder()
	for _, f := range corpus(t, true) {
		full := decodeWith(t, d, f.data, 1, 1)
		if full.Width < 16 || full.Height < 16 {
			continue // 1/8 of a partial block averages the encoder's padding too
		}
		for _, denom := range []int{2, 4, 8} {
			got := decodeWith(t, d, f.data, denom, 1)
			want := transform.NewImage(got.Width, got.Height, 1)
			boxDown(want, full, denom)
			if _, mean := diff(got, want); mean > 4 {
				t.Errorf("%s 1/%d: mean |diff| from the box-filtered full decode %.2f", f.name, denom, mean)
			}
		}
	}
}

func boxDown(dst, src transform.Image, k int) {
	c := src.Channels
	for y := 0; y < dst.Height; y++ {
		for x := 0; x < dst.Width; x++ {
			for ch := 0; ch < c; ch++ {
				s, n := 0, 0
				for yy := y * k; yy < min(y*k+k, src.Height); yy++ {
					for xx := x * k; xx < min(x*k+k, src.Width); xx++ {
						s += int(src.Pix[(yy*src.Width+xx)*c+ch])
						n++
					}
				}
				dst.Pix[(y*dst.Width+x)*c+ch] = uint8((s + n/2) / n)
			}
		}
	}
}

func TestDecodeFallback(t *testing.T) {
	d := NewGoDecoder()
	for _, name := range []string{"pil_420_progressive.jpg", "tj_411_q90.jpg"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "golden", "jpeg", name))
		if err != nil {
			t.Fatal(err)
		}
		got := decodeWith(t, d, data, 1, 3)
		want := stdRGB(t, data, 3)
		// Only the YCbCr → RGB rounding differs (libjpeg's tables here).
		if maxd, _ := diff(got, want); maxd > 1 {
			t.Errorf("%s: fallback differs from image/jpeg by %d", name, maxd)
		}
		half := decodeWith(t, d, data, 2, 3)
		if half.Width != (want.Width+1)/2 {
			t.Errorf("%s: 1/2 decode is %d wide", name, half.Width)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := encoded(t, photo(40, 30, 1), 90)
	w, h, _, _ := DecodeConfig(good)
	cases := []struct {
		name string
		data []byte
		w, h int
	}{
		{"empty", nil, w, h},
		{"not a JPEG", []byte("hello world"), w, h},
		{"SOI only", []byte{0xff, 0xd8}, w, h},
		{"truncated in scan", good[:len(good)*2/3], w, h},
		{"truncated after header", good[:len(good)/4], w, h},
		{"wrong destination size", good, w + 1, h},
	}
	for _, backend := range []string{"go", "turbo"} {
		d, err := newDecoder(backend)
		if err != nil {
			t.Logf("%s: %v", backend, err)
			continue
		}
		if backend == "turbo" {
			// An error message comes back from the library.
			dst := transform.NewImage(w, h, 3)
			if err := d.Decode(dst, []byte("not a JPEG at all"), 1); err == nil || !strings.Contains(err.Error(), "libturbojpeg") {
				t.Errorf("turbo error: %v", err)
			} else {
				t.Logf("turbo error: %v", err)
			}
		}
		for _, c := range cases {
			dst := transform.NewImage(c.w, c.h, 3)
			if err := d.Decode(dst, c.data, 1); err == nil {
				t.Errorf("%s %s: no error", backend, c.name)
			} else if !strings.HasPrefix(err.Error(), "jpeg: ") {
				t.Errorf("%s %s: error %q lacks the package prefix", backend, c.name, err)
			}
		}
		d.Close()
	}
	if err := NewGoDecoder().Decode(transform.NewImage(w, h, 2), good, 1); err == nil {
		t.Error("2-channel destination: no error")
	}
}

// TestDecodeCorruptNeverPanics flips and truncates bytes of real JPEGs.
func TestDecodeCorruptNeverPanics(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := NewGoDecoder()
	files := corpus(t, false)
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := 0; i < n; i++ {
		f := files[r.IntN(len(files))]
		b := slices.Clone(f.data)
		switch r.IntN(3) {
		case 0:
			b = b[:r.IntN(len(b))]
		case 1:
			for k := 0; k < 1+r.IntN(4); k++ {
				b[r.IntN(len(b))] = byte(r.Uint32())
			}
		case 2:
			b[r.IntN(len(b))] ^= 1 << r.IntN(8)
		}
		decodeAny(d, b)
	}
}

// decodeAny decodes b at its own size (if the header parses), returning the
// error.
func decodeAny(d *Decoder, b []byte) error {
	w, h, _, err := DecodeConfig(b)
	if err != nil {
		return err
	}
	if w*h > 1<<20 {
		return nil
	}
	dst := transform.NewImage(w, h, 3)
	return d.Decode(dst, b, 1)
}

func FuzzDecode(f *testing.F) {
	for _, j := range corpus(f, true) {
		if len(j.data) < 8000 {
			f.Add(j.data)
		}
	}
	d := NewGoDecoder()
	f.Fuzz(func(t *testing.T, b []byte) {
		w, h, _, err := DecodeConfig(b)
		if err != nil || w*h > 1<<18 {
			return
		}
		for _, denom := range []int{1, 4} {
			sw, sh := ScaledSize(w, h, denom)
			for _, ch := range []int{3, 1} {
				dst := transform.NewImage(sw, sh, ch)
				d.Decode(dst, b, denom)
			}
		}
	})
}

func TestDecodeAllocs(t *testing.T) {
	data := corpus(t, false)
	var jpg []byte
	for _, f := range data {
		if strings.HasPrefix(f.name, "beton_") {
			jpg = f.data
			break
		}
	}
	for _, backend := range []string{"go", "turbo"} {
		d, err := newDecoder(backend)
		if err != nil {
			continue
		}
		for _, denom := range []int{1, 2} {
			for _, ch := range []int{3, 1} {
				dst := decodeWith(t, d, jpg, denom, ch)
				// A Decode that allocates does so in every measurement;
				// one measurement of three may catch the runtime's own
				// allocation on a loaded machine (seen once in CI).
				var n float64
				for range 3 {
					n = testing.AllocsPerRun(10, func() {
						if err := d.Decode(dst, jpg, denom); err != nil {
							t.Fatal(err)
						}
					})
					if n == 0 {
						break
					}
				}
				if n != 0 {
					t.Errorf("%s 1/%d %d channels: %v allocations per Decode", backend, denom, ch, n)
				}
			}
		}
		d.Close()
	}
}

func TestDecoderSelection(t *testing.T) {
	if d, err := newDecoder("go"); err != nil || d.Backend() != "go" {
		t.Errorf("FLOCK_JPEG=go: %v, %v", d, err)
	}
	if _, err := newDecoder("bogus"); err == nil {
		t.Error("FLOCK_JPEG=bogus: no error")
	}
	ok, why := TurboAvailable()
	if ok != (why == "") {
		t.Errorf("TurboAvailable = %v with reason %q: want a reason exactly when it is unavailable", ok, why)
	}
	d, err := newDecoder("turbo")
	if ok != (err == nil) {
		t.Errorf("TurboAvailable = %v (%s) but FLOCK_JPEG=turbo gives %v", ok, why, err)
	}
	if ok {
		if d.Backend() != "turbojpeg" {
			t.Errorf("backend %q", d.Backend())
		}
		d.Close()
		a, _ := newDecoder("")
		if a.Backend() != "turbojpeg" {
			t.Error("default decoder does not use libjpeg-turbo although it is available")
		}
		a.Close()
	}
}

func TestDecodeConfig(t *testing.T) {
	for _, f := range corpus(t, true) {
		w, h, c, err := DecodeConfig(f.data)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		cfg, err := stdjpeg.DecodeConfig(bytes.NewReader(f.data))
		if err != nil {
			t.Fatal(err)
		}
		wantC := 3
		if cfg.ColorModel == color.GrayModel {
			wantC = 1
		}
		if w != cfg.Width || h != cfg.Height || c != wantC {
			t.Errorf("%s: %dx%dx%d, image/jpeg says %dx%dx%d", f.name, w, h, c, cfg.Width, cfg.Height, wantC)
		}
	}
}
