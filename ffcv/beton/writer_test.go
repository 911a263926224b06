package beton

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
	"github.com/flockml/flock/npy"
)

// rawAllFieldsSource builds the samples of raw_all_fields.beton from the
// description in testdata/ffcv/README.md.
func rawAllFieldsSource(t testing.TB) ([]NamedField, Source) {
	t.Helper()
	images, err := npy.ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	pix, err := images.Uint8()
	if err != nil {
		t.Fatal(err)
	}
	fields := []NamedField{
		{"image", RGBImageField{Mode: WriteRaw}},
		{"label", IntField{}},
		{"weight", FloatField{}},
		{"vec", NDArrayField{DType: "float32", Shape: []int{3, 4}}},
		{"blob", BytesField{}},
		{"meta", JSONField{}},
	}
	type meta struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	src := FuncSource(64, func(i int, out []any) error {
		out[0] = transform.ImageOf(pix[i*3072:(i+1)*3072], 32, 32, 3)
		out[1] = int64(7 * i % 10)
		out[2] = float64(i) / 3
		vec := make([]float32, 12)
		for k := range vec {
			vec[k] = float32(k * (i + 1))
		}
		out[3] = vec
		out[4] = bytes.Repeat([]byte{byte(i)}, i%17+1)
		out[5] = meta{i, fmt.Sprintf("sample-%d", i)}
		return nil
	})
	return fields, src
}

// firstDiff describes where a and b first differ.
func firstDiff(a, b []byte) string {
	if len(a) != len(b) {
		return fmt.Sprintf("sizes %d and %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return fmt.Sprintf("byte %d: %#02x, FFCV %#02x", i, a[i], b[i])
		}
	}
	return "none"
}

func writeFile(t testing.TB, fields []NamedField, src Source, opt WriterOptions) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.beton")
	if err := Write(context.Background(), path, fields, src, opt); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriteMatchesFFCVRawAllFields(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(filepath.Join(testdata, "raw_all_fields.beton"))
	if err != nil {
		t.Fatal(err)
	}
	fields, src := rawAllFieldsSource(t)
	for _, workers := range []int{1, 2, 8} {
		got := writeFile(t, fields, src, WriterOptions{PageSize: 2 << 20, Workers: workers})
		if !bytes.Equal(got, want) {
			t.Errorf("%d workers: output differs from FFCV's raw_all_fields.beton: %s", workers, firstDiff(got, want))
		}
	}
}

func TestWriteMatchesFFCVFashionMNIST(t *testing.T) {
	t.Parallel()
	images, labels := fashionMNIST(t, 500)
	want, err := os.ReadFile(filepath.Join(testdata, "fmnist_500_ndarray.beton"))
	if err != nil {
		t.Fatal(err)
	}
	fields := []NamedField{
		{"image", NDArrayField{DType: "uint8", Shape: []int{28, 28}}},
		{"label", IntField{}},
	}
	src := FuncSource(500, func(i int, out []any) error {
		out[0] = images[i*784 : (i+1)*784]
		out[1] = int(labels[i])
		return nil
	})
	for _, workers := range []int{1, 3} {
		got := writeFile(t, fields, src, WriterOptions{PageSize: 2 << 20, Workers: workers})
		if !bytes.Equal(got, want) {
			t.Errorf("%d workers: output differs from FFCV's fmnist_500_ndarray.beton: %s", workers, firstDiff(got, want))
		}
	}
}

func TestPythonJSON(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/pyjson.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Value any
		Dumps string
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		got, err := pythonJSON(c.Value)
		if err != nil || string(got) != c.Dumps {
			t.Errorf("pythonJSON(%v) = %s (%v), Python %s", c.Value, got, err, c.Dumps)
		}
	}
}

// roundTripSource has one field of each kind with values derived from i.
func roundTripSource(n int) ([]NamedField, Source) {
	fields := []NamedField{
		{"f", FloatField{}},
		{"i", IntField{}},
		{"rgb", RGBImageField{}},
		{"gray", RGBImageField{Channels: 1}},
		{"b", BytesField{}},
		{"a64", NDArrayField{DType: "<f8", Shape: []int{2}}},
		{"a16", NDArrayField{DType: "int16", Shape: []int{3}}},
		{"j", JSONField{}},
		{"raw", JSONField{}},
	}
	src := FuncSource(n, func(i int, out []any) error {
		out[0] = float32(i) + 0.5
		out[1] = -i
		rgb := transform.NewImage(3+i%4, 2+i%3, 3)
		for k := range rgb.Pix {
			rgb.Pix[k] = byte(k + i)
		}
		out[2] = rgb
		// A window of a larger image: the stride exceeds the row.
		big := transform.NewImage(9, 9, 1)
		for k := range big.Pix {
			big.Pix[k] = byte(k * i)
		}
		out[3] = big.Sub(transform.Rect{X: 1, Y: 2, W: 4, H: 3})
		out[4] = bytes.Repeat([]byte{byte(i)}, i%5) // sample 0 stores nothing
		out[5] = []float64{float64(i), -float64(i)}
		out[6] = []int16{int16(i), -int16(i), 300}
		out[7] = map[string]any{"i": i, "s": "é"}
		out[8] = json.RawMessage(fmt.Sprintf(`[%d,{"x":null}]`, i))
		return nil
	})
	return fields, src
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	fields, src := roundTripSource(40)
	path := filepath.Join(t.TempDir(), "rt.beton")
	if err := Write(context.Background(), path, fields, src, WriterOptions{Workers: 3}); err != nil {
		t.Fatal(err)
	}
	for _, opt := range cacheModes {
		r, err := Open(path, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		infos := r.Fields()
		if len(infos) != len(fields) {
			t.Fatalf("%d fields", len(infos))
		}
		for k, fi := range infos {
			if fi.Name != fields[k].Name || fi.Type != fields[k].Field.Type() {
				t.Errorf("field %d: %s %v, wrote %s %v", k, fi.Name, fi.Type, fields[k].Name, fields[k].Field.Type())
			}
		}
		if infos[3].Channels != 1 || infos[2].Channels != 3 {
			t.Errorf("channels %d, %d", infos[2].Channels, infos[3].Channels)
		}
		if infos[6].DType != "<i2" || !slices.Equal(infos[6].Shape, []int{3}) {
			t.Errorf("a16: %s %v", infos[6].DType, infos[6].Shape)
		}
		out := make([]any, len(fields))
		for i := range 40 {
			if err := src.Sample(i, out); err != nil {
				t.Fatal(err)
			}
			if got := r.Float(0, i); got != float64(i)+0.5 {
				t.Errorf("sample %d: float %v", i, got)
			}
			if got := r.Int(1, i); got != int64(-i) {
				t.Errorf("sample %d: int %v", i, got)
			}
			for f := 2; f <= 3; f++ {
				want := out[f].(transform.Image)
				img, err := r.Image(f, i)
				if err != nil {
					t.Fatal(err)
				}
				var tight []byte
				for y := range want.Height {
					tight = append(tight, want.Row(y)...)
				}
				if img.JPEG || img.Width != want.Width || img.Height != want.Height || img.Channels != want.Channels || !bytes.Equal(img.Data, tight) {
					t.Errorf("sample %d field %d: image %dx%dx%d differs", i, f, img.Width, img.Height, img.Channels)
				}
			}
			b, err := r.Bytes(4, i)
			if err != nil || !bytes.Equal(b, out[4].([]byte)) {
				t.Errorf("sample %d: bytes %v (%v)", i, b, err)
			}
			a, err := r.NDArray(5, i)
			if err != nil || math.Float64frombits(binary.LittleEndian.Uint64(a[8:])) != -float64(i) {
				t.Errorf("sample %d: a64 %v (%v)", i, a, err)
			}
			a, err = r.NDArray(6, i)
			if err != nil || int16(binary.LittleEndian.Uint16(a[2:])) != -int16(i) || binary.LittleEndian.Uint16(a[4:]) != 300 {
				t.Errorf("sample %d: a16 %v (%v)", i, a, err)
			}
			j, err := r.JSON(7, i)
			if want := fmt.Sprintf(`{"i": %d, "s": "\u00e9"}`, i); err != nil || string(j) != want {
				t.Errorf("sample %d: json %s, want %s (%v)", i, j, want, err)
			}
			j, err = r.JSON(8, i)
			if err != nil || string(j) != string(out[8].(json.RawMessage)) {
				t.Errorf("sample %d: raw json %s (%v)", i, j, err)
			}
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	t.Parallel()
	fields, src := roundTripSource(100)
	fields = append(fields, NamedField{"p", RGBImageField{Mode: WriteProportion, CompressProbability: 0.5}})
	src2 := FuncSource(src.Len(), func(i int, out []any) error {
		if err := src.Sample(i, out[:len(out)-1]); err != nil {
			return err
		}
		out[len(out)-1] = out[2]
		return nil
	})
	first := writeFile(t, fields, src2, WriterOptions{Workers: 1, Seed: 7})
	for _, workers := range []int{1, 2, 8} {
		if got := writeFile(t, fields, src2, WriterOptions{Workers: workers, Seed: 7}); !bytes.Equal(got, first) {
			t.Errorf("%d workers: output differs from 1 worker: %s", workers, firstDiff(got, first))
		}
	}
	if other := writeFile(t, fields, src2, WriterOptions{Workers: 2, Seed: 8}); bytes.Equal(other, first) {
		t.Error("output does not depend on the seed of the proportion mode")
	}
}

// testImage is a smooth synthetic photo-like image.
func testImage(w, h, c, seed int) transform.Image {
	img := transform.NewImage(w, h, c)
	for y := range h {
		for x := range w {
			for k := range c {
				v := 128 + 60*math.Sin(float64(x*(k+1)+seed)/17) + 50*math.Cos(float64(y+3*seed)/23)
				img.Pix[y*img.Stride+x*c+k] = byte(v)
			}
		}
	}
	return img
}

func TestImageModes(t *testing.T) {
	t.Parallel()
	const n = 200
	imgs := make([]transform.Image, n)
	for i := range imgs {
		imgs[i] = testImage(40, 30, 3, i)
	}
	var gray bytes.Buffer
	if err := jpeg.Encode(&gray, testImage(20, 10, 1, 3), 80); err != nil {
		t.Fatal(err)
	}
	fields := []NamedField{
		{"jpg", RGBImageField{Mode: WriteJPEG, JPEGQuality: 95}},
		{"prop", RGBImageField{Mode: WriteProportion, CompressProbability: 0.3}},
		{"smart", RGBImageField{Mode: WriteSmart, SmartThreshold: 40 * 30 * 3}},
		{"small", RGBImageField{Mode: WriteJPEG, MaxResolution: 16}},
		{"enc", RGBImageField{Mode: WriteJPEG, Channels: 1}},
		{"encraw", RGBImageField{Mode: WriteRaw}},
	}
	src := FuncSource(n, func(i int, out []any) error {
		out[0], out[1] = imgs[i], imgs[i]
		out[2] = imgs[i].Sub(transform.Rect{W: 40 - i%2, H: 30})
		out[3] = imgs[i]
		out[4], out[5] = EncodedJPEG(gray.Bytes()), EncodedJPEG(gray.Bytes())
		return nil
	})
	path := filepath.Join(t.TempDir(), "modes.beton")
	if err := Write(context.Background(), path, fields, src, WriterOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dec := jpeg.NewGoDecoder()
	jpegs := 0
	for i := range n {
		img, err := r.Image(0, i)
		if err != nil {
			t.Fatal(err)
		}
		if !img.JPEG || img.Width != 40 || img.Height != 30 {
			t.Fatalf("sample %d: jpg field: JPEG %v %dx%d", i, img.JPEG, img.Width, img.Height)
		}
		got := transform.NewImage(40, 30, 3)
		if err := dec.Decode(got, img.Data, 1); err != nil {
			t.Fatal(err)
		}
		if d := meanAbsDiff(got.Pix, imgs[i].Pix); d > 3 {
			t.Errorf("sample %d: JPEG at quality 95 is %.2f from the pixels on average", i, d)
		}
		if r.ImageInfo(1, i).JPEG {
			jpegs++
		}
		// Smart: the 40-pixel-wide images exceed the threshold by nothing
		// and stay raw; 39-pixel-wide ones are below it.
		if s := r.ImageInfo(2, i); s.JPEG {
			t.Errorf("sample %d: smart field stored %dx%d as JPEG", i, s.Width, s.Height)
		}
		if s := r.ImageInfo(3, i); !s.JPEG || s.Width != 16 || s.Height != 12 {
			t.Errorf("sample %d: max resolution 16 gave %dx%d", i, s.Width, s.Height)
		}
		enc, err := r.Image(4, i)
		if err != nil || !bytes.Equal(enc.Data, gray.Bytes()) || enc.Channels != 1 {
			t.Errorf("sample %d: encoded JPEG not stored as is (%v)", i, err)
		}
		raw, err := r.Image(5, i)
		if err != nil || raw.JPEG || raw.Channels != 3 || len(raw.Data) != 20*10*3 {
			t.Errorf("sample %d: encoded JPEG in a raw RGB field: %v %d bytes (%v)", i, raw.JPEG, len(raw.Data), err)
		}
	}
	// Binomial(200, 0.3): mean 60, standard deviation 6.5.
	if jpegs < 35 || jpegs > 85 {
		t.Errorf("proportion 0.3 stored %d of %d images as JPEG", jpegs, n)
	}
	// A lower threshold turns smart mode to JPEG.
	b := writeFile(t, []NamedField{{"s", RGBImageField{Mode: WriteSmart, SmartThreshold: 100}}},
		FuncSource(1, func(i int, out []any) error { out[0] = imgs[0]; return nil }), WriterOptions{})
	if b[HeaderSize+DescriptorSize] != modeJPEG {
		t.Error("smart mode above the threshold did not store a JPEG")
	}
}

func meanAbsDiff(a, b []byte) float64 {
	s := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

// TestParseImageMode checks that ParseImageMode reads what String writes,
// jpeg as jpg, and nothing else.
func TestParseImageMode(t *testing.T) {
	t.Parallel()
	for _, m := range []ImageMode{WriteRaw, WriteJPEG, WriteSmart, WriteProportion} {
		if got, err := ParseImageMode(m.String()); err != nil || got != m {
			t.Errorf("ParseImageMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if got, err := ParseImageMode("jpeg"); err != nil || got != WriteJPEG {
		t.Errorf("ParseImageMode(jpeg) = %v, %v; want jpg", got, err)
	}
	for _, s := range []string{"", "png", "JPG", "ImageMode(4)"} {
		if _, err := ParseImageMode(s); err == nil {
			t.Errorf("ParseImageMode(%q) took it", s)
		}
	}
}

func TestMaxResolutionSizes(t *testing.T) {
	t.Parallel()
	// FFCV: ratio = max_resolution / max(w, h); (ratio·(w, h)).astype(int).
	for _, c := range []struct{ w, h, max, wantW, wantH int }{
		{500, 375, 256, 256, 192},
		{375, 500, 256, 192, 256},
		{256, 256, 256, 256, 256},
		{300, 299, 256, 256, 255},
		{100, 50, 256, 100, 50},
		{1000, 3, 256, 256, 0},
	} {
		src := FuncSource(1, func(i int, out []any) error { out[0] = testImage(c.w, c.h, 3, 0); return nil })
		path := filepath.Join(t.TempDir(), "m.beton")
		err := Write(context.Background(), path, []NamedField{{"im", RGBImageField{MaxResolution: c.max}}}, src, WriterOptions{})
		if c.wantH == 0 {
			if err == nil || !strings.Contains(err.Error(), "shrinks to 256x0") {
				t.Errorf("%dx%d: err = %v", c.w, c.h, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := Open(path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		im := r.ImageInfo(0, 0)
		r.Close()
		if im.Width != c.wantW || im.Height != c.wantH {
			t.Errorf("%dx%d at %d: %dx%d, want %dx%d", c.w, c.h, c.max, im.Width, im.Height, c.wantW, c.wantH)
		}
	}
}

func TestPackingRestartsSampleOnFreshPage(t *testing.T) {
	t.Parallel()
	const ps = 2 << 20
	sizes := [][2]int{{1500 << 10, 0}, {400 << 10, 400 << 10}, {10, 20}}
	src := FuncSource(len(sizes), func(i int, out []any) error {
		out[0] = bytes.Repeat([]byte{byte(1 + 2*i)}, sizes[i][0])
		out[1] = bytes.Repeat([]byte{byte(2 + 2*i)}, sizes[i][1])
		return nil
	})
	fields := []NamedField{{"a", BytesField{}}, {"b", BytesField{}}}
	b := writeFile(t, fields, src, WriterOptions{PageSize: ps})
	h := parseHeader(b)
	dataBase := int64(ps)
	// Sample 1's first array fits after sample 0 but its second does not,
	// so sample 1 starts again on page 1; its first array's bytes stay
	// behind in page 0, as in FFCV.
	stale := dataBase + 1500<<10
	if b[stale] != 3 || b[stale+400<<10-1] != 3 || b[stale+400<<10] != 0 {
		t.Error("bytes of the restarted sample not left in the first page")
	}
	wantAllocs := [][3]int64{
		{0, dataBase, 1500 << 10}, {0, dataBase + 1500<<10, 0},
		{1, dataBase + ps, 400 << 10}, {1, dataBase + ps + 400<<10, 400 << 10},
		{2, dataBase + ps + 800<<10, 10}, {2, dataBase + ps + 800<<10 + 10, 20},
	}
	if int64(h.allocPtr) != dataBase+2*ps || len(b)-int(h.allocPtr) != len(wantAllocs)*AllocEntrySize {
		t.Fatalf("allocation table at %d, file size %d", h.allocPtr, len(b))
	}
	for k, want := range wantAllocs {
		e := b[int(h.allocPtr)+k*AllocEntrySize:]
		got := [3]int64{int64(binary.LittleEndian.Uint64(e)), int64(binary.LittleEndian.Uint64(e[8:])), int64(binary.LittleEndian.Uint64(e[16:]))}
		if got != want {
			t.Errorf("allocation %d: %v, want %v", k, got, want)
		}
	}
	path := filepath.Join(t.TempDir(), "p.beton")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, ReadOptions{Cache: Process})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := range sizes {
		for f := range 2 {
			d, err := r.Bytes(f, i)
			if err != nil || len(d) != sizes[i][f] || (len(d) > 0 && (d[0] != byte(1+2*i+f) || d[len(d)-1] != byte(1+2*i+f))) {
				t.Errorf("sample %d field %d: %d bytes (%v)", i, f, len(d), err)
			}
		}
	}
	if r.Page(0) != 1 || r.Page(1) != 2 || r.Page(2) != 2 {
		t.Errorf("pages %d %d %d, want 1 2 2", r.Page(0), r.Page(1), r.Page(2))
	}
}

func TestWriteErrors(t *testing.T) {
	t.Parallel()
	const ps = 2 << 20
	one := func(v ...any) Source {
		return FuncSource(3, func(i int, out []any) error {
			copy(out, v)
			return nil
		})
	}
	for _, c := range []struct {
		name   string
		fields []NamedField
		src    Source
		opt    WriterOptions
		want   string
	}{
		{"oversized field", []NamedField{{"blob", BytesField{}}}, one(make([]byte, ps+1)), WriterOptions{PageSize: ps},
			`sample 0 field "blob": 2097153 bytes do not fit in a page of 2097152 bytes`},
		{"oversized sample", []NamedField{{"a", BytesField{}}, {"b", BytesField{}}}, one(make([]byte, ps/2+1), make([]byte, ps/2)), WriterOptions{PageSize: ps},
			"sample 0: its data of 2097153 bytes does not fit in a page of 2097152 bytes"},
		{"page size", []NamedField{{"x", IntField{}}}, one(1), WriterOptions{PageSize: 3 << 20}, "page size 3145728"},
		{"small page", []NamedField{{"x", IntField{}}}, one(1), WriterOptions{PageSize: 1 << 20}, "page size 1048576"},
		{"no fields", nil, one(), WriterOptions{}, "no fields"},
		{"long name", []NamedField{{"a_very_long_field_name", IntField{}}}, one(1), WriterOptions{}, "longer than 16"},
		{"duplicate", []NamedField{{"x", IntField{}}, {"x", IntField{}}}, one(1, 2), WriterOptions{}, `"x" used twice`},
		{"wrong type", []NamedField{{"x", IntField{}}}, one(1.5), WriterOptions{}, `sample 0 field "x": value of type float64, want int64`},
		{"missing value", []NamedField{{"x", FloatField{}}}, one(), WriterOptions{}, "value of type <nil>"},
		{"array length", []NamedField{{"x", NDArrayField{DType: "<f4", Shape: []int{2}}}}, one([]float32{1}), WriterOptions{}, "1 elements, want 2"},
		{"array type", []NamedField{{"x", NDArrayField{DType: "<f4", Shape: []int{2}}}}, one([]float64{1, 2}), WriterOptions{}, "[]float64 value for a <f4 array"},
		{"array shape", []NamedField{{"x", NDArrayField{DType: "<f4"}}}, one(), WriterOptions{}, "empty shape"},
		{"array dtype", []NamedField{{"x", NDArrayField{DType: "float128x", Shape: []int{1}}}}, one(), WriterOptions{}, "not a numpy type"},
		{"huge array", []NamedField{{"x", NDArrayField{DType: "<f8", Shape: []int{ps}}}}, one(), WriterOptions{PageSize: ps}, "exceed the page size"},
		{"channels", []NamedField{{"im", RGBImageField{}}}, one(transform.NewImage(2, 2, 1)), WriterOptions{}, "1-channel image for a 3-channel field"},
		{"quality", []NamedField{{"im", RGBImageField{JPEGQuality: 101}}}, one(), WriterOptions{}, "quality 101"},
		{"bad json", []NamedField{{"j", JSONField{}}}, one(json.RawMessage("{")), WriterOptions{}, `JSON text "{" is not valid`},
		{"unencodable json", []NamedField{{"j", JSONField{}}}, one(math.NaN()), WriterOptions{}, "unsupported value"},
		{"big int", []NamedField{{"x", IntField{}}}, one(uint64(math.MaxUint64)), WriterOptions{}, "does not fit in an int64"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "x.beton")
		err := Write(context.Background(), path, c.fields, c.src, c.opt)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", c.name, err, c.want)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("%s: files left behind: %v", c.name, left)
		}
	}
}

func TestWriteAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "data.beton")
	if err := os.WriteFile(path, []byte("previous"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	src := FuncSource(1000, func(i int, out []any) error {
		if i == 637 {
			return boom
		}
		out[0] = make([]byte, 5000)
		return nil
	})
	for _, workers := range []int{1, 4} {
		err := Write(context.Background(), path, []NamedField{{"b", BytesField{}}}, src, WriterOptions{Workers: workers})
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "sample 637") {
			t.Errorf("%d workers: err = %v", workers, err)
		}
		if b, _ := os.ReadFile(path); string(b) != "previous" {
			t.Errorf("%d workers: existing file changed", workers)
		}
		if left, _ := os.ReadDir(dir); len(left) != 1 {
			t.Errorf("%d workers: files left behind: %v", workers, left)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow := FuncSource(1000, func(i int, out []any) error {
		if i == 10 {
			cancel()
		}
		out[0] = int64(i)
		return nil
	})
	if err := Write(ctx, path, []NamedField{{"x", IntField{}}}, slow, WriterOptions{Workers: 2}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("cancelled: files left behind: %v", left)
	}
}

func TestWriteNoVariableData(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 5} {
		src := FuncSource(n, func(i int, out []any) error { out[0], out[1] = float64(i), i; return nil })
		b := writeFile(t, []NamedField{{"f", FloatField{}}, {"i", IntField{}}}, src, WriterOptions{})
		// No pages: the (empty) allocation table follows the metadata.
		if want := HeaderSize + 2*DescriptorSize + 16*n; len(b) != want || int(parseHeader(b).allocPtr) != want {
			t.Errorf("%d samples: %d bytes, table at %d, want %d", n, len(b), parseHeader(b).allocPtr, want)
		}
		path := filepath.Join(t.TempDir(), "n.beton")
		os.WriteFile(path, b, 0o644)
		r, err := Open(path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.NumSamples() != n || (n > 0 && (r.Int(1, n-1) != int64(n-1) || r.Page(0) != -1)) {
			t.Errorf("%d samples: read back wrong", n)
		}
		r.Close()
	}
}

func TestProgress(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	fields, src := rawAllFieldsSource(t)
	writeFile(t, fields, src, WriterOptions{Progress: &buf})
	out := buf.String()
	if !strings.Contains(out, "out.beton 100% |") || !strings.Contains(out, "| 64/64 [") || !strings.HasSuffix(out, "samples/s]\n") {
		t.Errorf("progress output %q", out)
	}
}

func TestCanonicalDType(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"float32": "<f4", "uint8": "|u1", "bool": "|b1", "<f4": "<f4", "=i8": "<i8",
		">f8": ">f8", "|i2": "<i2", "<u1": "|u1", "|S5": "|S5", "<U3": "<U3", "<M8[ns]": "<M8[ns]",
	} {
		got, err := canonicalDType(in)
		if err != nil || got != want {
			t.Errorf("canonicalDType(%q) = %q, %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "f4", "<x4", "<f", "<f0", "<f+4", "|O8", "<M8[ns"} {
		if got, err := canonicalDType(bad); err == nil {
			t.Errorf("canonicalDType(%q) = %q, want an error", bad, got)
		}
	}
}
