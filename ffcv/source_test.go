package ffcv

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	stdjpeg "image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
)

func writeSource(t *testing.T, fields []beton.NamedField, src beton.Source) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.beton")
	if err := beton.Write(context.Background(), path, fields, src, beton.WriterOptions{PageSize: beton.MinPageSize, Workers: 3}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestArraySource writes Fashion-MNIST-like and CIFAR-like arrays, as
// images and as arrays, and reads them back through the loader.
func TestArraySource(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		h, w, ch int
		asArray  bool
	}{{28, 28, 1, false}, {28, 28, 1, true}, {32, 32, 3, false}, {32, 32, 3, true}} {
		const n = 50
		src := &ArraySource{N: n, H: c.h, W: c.w, C: c.ch, AsArray: c.asArray, Pixels: make([]uint8, n*c.h*c.w*c.ch), Labels: make([]int64, n)}
		for i := range src.Pixels {
			src.Pixels[i] = uint8(i*7 + i/13)
		}
		for i := range src.Labels {
			src.Labels[i] = int64(i % 10)
		}
		path := writeSource(t, src.Fields(), src)
		l, err := Open(path, Options{BatchSize: 16, KeepLast: true, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		d := collect(t, l)
		l.Close()
		var pix []byte
		var labels []int64
		for k := range d.cols {
			pix = append(pix, d.cols[k]["image"]...)
			labels = append(labels, f64toi(d.cols[k]["label"])...)
		}
		if !bytes.Equal(pix, src.Pixels) || !slices.Equal(labels, src.Labels) {
			t.Errorf("%dx%dx%d array %v: read back differs", c.h, c.w, c.ch, c.asArray)
		}
	}
}

// TestImagesSource converts a dataset.Images the way flock convert
// fashion-mnist does, and checks FFCV's ndarray layout of the result
// against testdata's fmnist_500_ndarray.beton, written by FFCV.
func TestImagesSource(t *testing.T) {
	t.Parallel()
	ref, err := beton.Open(filepath.Join(testdata, "fmnist_500_ndarray.beton"), beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	m := &dataset.Images{N: 500, H: 28, W: 28, C: 1, Labels: make([]int32, 500), Classes: dataset.FashionMNISTClasses}
	for i := range 500 {
		a, err := ref.NDArray(0, i)
		if err != nil {
			t.Fatal(err)
		}
		m.Pixels = append(m.Pixels, a...)
		m.Labels[i] = int32(ref.Int(1, i))
	}
	src, err := NewImagesSource(m)
	if err != nil {
		t.Fatal(err)
	}
	src.AsArray = true
	path := writeSource(t, src.Fields(), src)
	r, err := beton.Open(path, beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, want := r.Fields(), ref.Fields(); got[0].DType != want[0].DType || !slices.Equal(got[0].Shape, want[0].Shape) || got[1].Type != want[1].Type {
		t.Errorf("fields %+v, FFCV's %+v", got, want)
	}
	for _, i := range []int{0, 123, 499} {
		a, _ := r.NDArray(0, i)
		b, _ := ref.NDArray(0, i)
		if !bytes.Equal(a, b) || r.Int(1, i) != ref.Int(1, i) {
			t.Errorf("sample %d differs from FFCV's file", i)
		}
	}
}

// TestImageFolderSource builds a small class-per-directory tree (PNG, JPEG,
// grayscale, RGBA, a nested directory, a non-image file) and checks the
// class order, the labels, and the pixels read back from a raw file.
func TestImageFolderSource(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	want := map[string]transform.Image{}
	put := func(rel string, img transform.Image, kind string) {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		switch kind {
		case "png":
			m := image.NewNRGBA(image.Rect(0, 0, img.Width, img.Height))
			for y := range img.Height {
				for x := range img.Width {
					p := img.Pix[y*img.Stride+3*x:]
					m.SetNRGBA(x, y, color.NRGBA{p[0], p[1], p[2], uint8(x * 9)})
				}
			}
			png.Encode(&buf, m)
			want[path] = img
		case "gray":
			m := image.NewGray(image.Rect(0, 0, img.Width, img.Height))
			rgb := transform.NewImage(img.Width, img.Height, 3)
			for y := range img.Height {
				for x := range img.Width {
					v := img.Pix[y*img.Stride+3*x]
					m.SetGray(x, y, color.Gray{v})
					copy(rgb.Pix[y*rgb.Stride+3*x:], []uint8{v, v, v})
				}
			}
			png.Encode(&buf, m)
			want[path] = rgb
		case "jpg":
			if err := jpeg.Encode(&buf, img, 95); err != nil {
				t.Fatal(err)
			}
			want[path] = transform.Image{} // lossy: size only
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("zebra/b.png", SyntheticImage(20, 12, 1, 1), "png")
	put("zebra/a.JPG", SyntheticImage(16, 16, 1, 2), "jpg")
	put("ant/sub/c.png", SyntheticImage(9, 7, 1, 3), "gray")
	put("ant/a.png", SyntheticImage(10, 10, 1, 4), "png")
	os.WriteFile(filepath.Join(root, "ant", "notes.txt"), []byte("not an image"), 0o644)
	os.WriteFile(filepath.Join(root, "README"), []byte("top-level file"), 0o644)

	src, err := NewImageFolderSource(root, beton.RGBImageField{Mode: beton.WriteRaw})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(src.Classes, []string{"ant", "zebra"}) || !slices.Equal(src.Labels, []int64{0, 0, 1, 1}) {
		t.Fatalf("classes %v labels %v", src.Classes, src.Labels)
	}
	wantFiles := []string{"ant/a.png", "ant/sub/c.png", "zebra/a.JPG", "zebra/b.png"}
	for i, f := range src.Files {
		if rel, _ := filepath.Rel(root, f); rel != wantFiles[i] {
			t.Errorf("file %d: %s, want %s", i, rel, wantFiles[i])
		}
	}
	path := writeSource(t, src.Fields(), src)
	r, err := beton.Open(path, beton.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, f := range src.Files {
		ref, err := r.Image(0, i)
		if err != nil {
			t.Fatal(err)
		}
		w := want[f]
		if w.Pix == nil {
			if ref.Width != 16 || ref.Height != 16 || ref.Channels != 3 {
				t.Errorf("%s: %dx%dx%d", f, ref.Width, ref.Height, ref.Channels)
			}
			continue
		}
		if ref.JPEG || ref.Width != w.Width || ref.Height != w.Height || !bytes.Equal(ref.Data, w.Pix) {
			t.Errorf("%s: stored image differs", f)
		}
		if r.Int(1, i) != src.Labels[i] {
			t.Errorf("%s: label %d", f, r.Int(1, i))
		}
	}

	os.WriteFile(filepath.Join(root, "ant", "x.webp"), []byte("RIFF"), 0o644)
	if _, err := NewImageFolderSource(root, beton.RGBImageField{}); err == nil || !strings.Contains(err.Error(), "1 .webp files cannot be decoded") {
		t.Errorf("webp file: error %v", err)
	}
	if _, err := NewImageFolderSource(filepath.Join(root, "ant", "sub"), beton.RGBImageField{}); err == nil || !strings.Contains(err.Error(), "no class directories") {
		t.Errorf("no classes: error %v", err)
	}
}

// TestSyntheticSource checks that synthetic images are deterministic and
// JPEG-compress like photographs.
func TestSyntheticSource(t *testing.T) {
	t.Parallel()
	a, b := SyntheticImage(64, 48, 3, 5), SyntheticImage(64, 48, 3, 5)
	c := SyntheticImage(64, 48, 3, 6)
	if !bytes.Equal(a.Pix, b.Pix) || bytes.Equal(a.Pix, c.Pix) {
		t.Error("synthetic images are not a function of (seed, index)")
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, SyntheticImage(256, 256, 1, 0), 90); err != nil {
		t.Fatal(err)
	}
	if n := buf.Len(); n < 12000 || n > 40000 {
		t.Errorf("256×256 synthetic image: %d bytes at quality 90, want a photograph's 12–40 KB", n)
	}
}

// TestReadImages reads FFCV's Fashion-MNIST file into a dataset.Images and
// checks it against the file, and the errors for labels outside the
// classes and for images of several sizes.
func TestReadImages(t *testing.T) {
	t.Parallel()
	path := filepath.Join(testdata, "fmnist_500_ndarray.beton")
	m, err := ReadImages(context.Background(), path, ReadImagesOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m.N != 500 || m.H != 28 || m.W != 28 || m.C != 1 || len(m.Classes) != 10 {
		t.Fatalf("%d images of %dx%dx%d in %d classes", m.N, m.H, m.W, m.C, len(m.Classes))
	}
	r, _ := beton.Open(path, beton.ReadOptions{})
	defer r.Close()
	for _, i := range []int{0, 250, 499} {
		a, _ := r.NDArray(0, i)
		if !bytes.Equal(m.Image(i), a) || int64(m.Labels[i]) != r.Int(1, i) {
			t.Errorf("sample %d differs from the file", i)
		}
	}
	if _, err := ReadImages(context.Background(), path, ReadImagesOptions{NumClasses: 5}); err == nil || !strings.Contains(err.Error(), "outside the 5 classes") {
		t.Errorf("5 classes: %v", err)
	}
	if _, err := ReadImages(context.Background(), filepath.Join(testdata, "raw_all_fields.beton"), ReadImagesOptions{Label: "weight"}); err == nil || !strings.Contains(err.Error(), `no int field "weight"`) {
		t.Errorf("float labels: %v", err)
	}
}

// bombJPEG is a small baseline JPEG whose frame header claims w×h pixels.
func bombJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := stdjpeg.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	i := bytes.Index(b, []byte{0xff, 0xc0}) // SOF0: length, precision, height, width
	if i < 0 {
		t.Fatal("no SOF0 marker")
	}
	binary.BigEndian.PutUint16(b[i+5:], uint16(h))
	binary.BigEndian.PutUint16(b[i+7:], uint16(w))
	return b
}

// bombPNG is a small PNG whose header claims w×h pixels.
func bombPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 8, 8))); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	const ihdr = 8 // after the signature: length, "IHDR", width, height, …, CRC
	binary.BigEndian.PutUint32(b[ihdr+8:], uint32(w))
	binary.BigEndian.PutUint32(b[ihdr+12:], uint32(h))
	binary.BigEndian.PutUint32(b[ihdr+8+13:], crc32.ChecksumIEEE(b[ihdr+4:ihdr+8+13]))
	return b
}

// TestImageFolderSourcePixelLimit feeds files whose headers claim
// 60000×60000 pixels: they must be refused from the header, before the
// decoder allocates 10 GB for them, and quickly.
func TestImageFolderSourcePixelLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"bomb.jpg", bombJPEG(t, 60000, 60000)},
		{"bomb.png", bombPNG(t, 60000, 60000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			os.Mkdir(filepath.Join(root, "a"), 0o755)
			if err := os.WriteFile(filepath.Join(root, "a", c.name), c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := NewImageFolderSource(root, beton.RGBImageField{Mode: beton.WriteRaw})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Sample(0, make([]any, 2)) }()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("decoding a %d-byte file claiming 60000×60000 pixels still runs after 10 s", len(c.data))
			}
			if err == nil || !strings.Contains(err.Error(), "60000×60000") || !strings.Contains(err.Error(), "pixel limit") {
				t.Fatalf("Sample: %v, want the pixel limit refused", err)
			}
			// A limit that admits it lets an 8×8 image through.
			s.MaxPixels = 64
			os.WriteFile(filepath.Join(root, "a", c.name), bombJPEG(t, 8, 8), 0o644)
			if err := s.Sample(0, make([]any, 2)); err != nil {
				t.Errorf("8×8 image under a 64-pixel limit: %v", err)
			}
		})
	}
}
