package beton

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/npy"
)

const testdata = "../../testdata/ffcv"

var cacheModes = []ReadOptions{{Cache: MMap}, {Cache: Process, CacheBytes: 1}}

func openTest(t testing.TB, name string, opt ReadOptions) *Reader {
	t.Helper()
	r, err := Open(filepath.Join(testdata, name), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func fieldIndex(t testing.TB, r *Reader, name string) int {
	t.Helper()
	f, ok := r.FieldIndex(name)
	if !ok {
		t.Fatalf("no field %q", name)
	}
	return f
}

func TestLayoutRowMatchesNumpy(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/layouts.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Types   []string
		Offsets []int
		Size    int
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	types := map[string]FieldType{}
	for _, ft := range []FieldType{FloatType, IntType, RGBImageType, BytesType, NDArrayType, JSONType, TorchTensorType} {
		types[ft.String()] = ft
	}
	for _, c := range cases {
		fields := make([]FieldInfo, len(c.Types))
		for i, name := range c.Types {
			ft, ok := types[name]
			if !ok {
				t.Fatalf("unknown type %q", name)
			}
			fields[i].Type = ft
		}
		size := layoutRow(fields)
		var offs []int
		for _, f := range fields {
			offs = append(offs, f.offset)
		}
		if size != c.Size || !slices.Equal(offs, c.Offsets) {
			t.Errorf("%v: offsets %v size %d, numpy %v %d", c.Types, offs, size, c.Offsets, c.Size)
		}
	}
}

func TestRawAllFields(t *testing.T) {
	t.Parallel()
	images, err := npy.ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	pix, err := images.Uint8()
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range cacheModes {
		t.Run(opt.Cache.String(), func(t *testing.T) {
			t.Parallel()
			r := openTest(t, "raw_all_fields.beton", opt)
			checkRawAllFields(t, r, pix)
		})
	}
}

// checkRawAllFields checks every value testdata/ffcv/README.md documents
// for raw_all_fields.beton.
func checkRawAllFields(t *testing.T, r *Reader, pix []byte) {
	t.Helper()
	if r.NumSamples() != 64 || r.PageSize() != 2<<20 {
		t.Fatalf("%d samples, page size %d", r.NumSamples(), r.PageSize())
	}
	var names []string
	for _, f := range r.Fields() {
		names = append(names, f.Name+":"+f.Type.String())
	}
	if want := "image:rgb_image label:int weight:float vec:ndarray blob:bytes meta:json"; strings.Join(names, " ") != want {
		t.Fatalf("fields %v, want %s", names, want)
	}
	vec := r.Fields()[3]
	if vec.DType != "<f4" || !slices.Equal(vec.Shape, []int{3, 4}) || vec.ArrayBytes() != 48 {
		t.Fatalf("vec: %s %v %d bytes", vec.DType, vec.Shape, vec.ArrayBytes())
	}
	fImg, fLabel, fWeight := fieldIndex(t, r, "image"), fieldIndex(t, r, "label"), fieldIndex(t, r, "weight")
	fVec, fBlob, fMeta := fieldIndex(t, r, "vec"), fieldIndex(t, r, "blob"), fieldIndex(t, r, "meta")
	const n = 32 * 32 * 3
	for i := range 64 {
		img, err := r.Image(fImg, i)
		if err != nil {
			t.Fatal(err)
		}
		if img.JPEG || img.Width != 32 || img.Height != 32 || img.Channels != 3 {
			t.Fatalf("sample %d: image %+v", i, ImageRef{JPEG: img.JPEG, Width: img.Width, Height: img.Height, Channels: img.Channels})
		}
		if !bytes.Equal(img.Data, pix[i*n:(i+1)*n]) {
			t.Fatalf("sample %d: pixels differ from images.npy", i)
		}
		if got := r.Int(fLabel, i); got != int64(7*i%10) {
			t.Errorf("sample %d: label %d, want %d", i, got, 7*i%10)
		}
		if got := r.Float(fWeight, i); got != float64(i)/3 {
			t.Errorf("sample %d: weight %v, want %v", i, got, float64(i)/3)
		}
		v, err := r.NDArray(fVec, i)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 12 {
			got := math.Float32frombits(binary.LittleEndian.Uint32(v[4*k:]))
			if want := float32(k * (i + 1)); got != want {
				t.Fatalf("sample %d: vec[%d] = %v, want %v", i, k, got, want)
			}
		}
		blob, err := r.Bytes(fBlob, i)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Repeat([]byte{byte(i)}, i%17+1); !bytes.Equal(blob, want) {
			t.Errorf("sample %d: blob %v, want %v", i, blob, want)
		}
		meta, err := r.JSON(fMeta, i)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			ID   int
			Name string
		}
		if err := json.Unmarshal(meta, &m); err != nil || m.ID != i || m.Name != fmt.Sprintf("sample-%d", i) {
			t.Errorf("sample %d: meta %q (%v)", i, meta, err)
		}
		if r.DataSize(fMeta, i) != len(meta)+1 {
			t.Errorf("sample %d: meta stored in %d bytes, text has %d", i, r.DataSize(fMeta, i), len(meta))
		}
		if p := r.Page(i); p != 1 {
			t.Errorf("sample %d: page %d, want 1 (the first page after the metadata)", i, p)
		}
	}
}

func TestFashionMNISTNDArray(t *testing.T) {
	t.Parallel()
	images, labels := fashionMNIST(t, 500)
	for _, opt := range cacheModes {
		r := openTest(t, "fmnist_500_ndarray.beton", opt)
		if r.NumSamples() != 500 {
			t.Fatalf("%d samples", r.NumSamples())
		}
		fi := r.Fields()[0]
		if fi.Name != "image" || fi.Type != NDArrayType || fi.DType != "|u1" || !slices.Equal(fi.Shape, []int{28, 28}) {
			t.Fatalf("image field %+v", fi)
		}
		fImg, fLabel := fieldIndex(t, r, "image"), fieldIndex(t, r, "label")
		for i := range 500 {
			a, err := r.NDArray(fImg, i)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, images[i*784:(i+1)*784]) {
				t.Fatalf("%v: sample %d: pixels differ from t10k", opt.Cache, i)
			}
			if got := r.Int(fLabel, i); got != int64(labels[i]) {
				t.Fatalf("%v: sample %d: label %d, want %d", opt.Cache, i, got, labels[i])
			}
		}
	}
}

// fashionMNIST returns the pixels and labels of the first n samples of the
// Fashion-MNIST test set installed by Debian's dataset-fashion-mnist
// package, skipping the test if it is absent.
func fashionMNIST(t testing.TB, n int) (images, labels []byte) {
	const dir = "/usr/share/datasets/fashion-mnist"
	read := func(name string, header, size int) []byte {
		f, err := os.Open(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			t.Skipf("Fashion-MNIST test set not installed (Debian package dataset-fashion-mnist): %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		// IDX: big-endian magic, dimensions, then the elements.
		b := make([]byte, header+n*size)
		if _, err := io.ReadFull(z, b); err != nil {
			t.Fatal(err)
		}
		if binary.BigEndian.Uint32(b) != uint32(0x800+header/4-1) || binary.BigEndian.Uint32(b[4:]) != 10000 {
			t.Fatalf("%s: not the Fashion-MNIST test set", name)
		}
		return b[header:]
	}
	return read("t10k-images-idx3-ubyte.gz", 16, 784), read("t10k-labels-idx1-ubyte.gz", 8, 1)
}

// jpegSize finds the frame size in a JPEG's start-of-frame segment.
func jpegSize(b []byte) (w, h, comps int, ok bool) {
	i := 2
	for i+4 <= len(b) {
		if b[i] != 0xff {
			return 0, 0, 0, false
		}
		m := b[i+1]
		n := int(binary.BigEndian.Uint16(b[i+2:]))
		if m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc && i+9 < len(b) {
			return int(binary.BigEndian.Uint16(b[i+7:])), int(binary.BigEndian.Uint16(b[i+5:])), int(b[i+9]), true
		}
		i += 2 + n
	}
	return 0, 0, 0, false
}

func TestJPEGFile(t *testing.T) {
	t.Parallel()
	labels, err := npy.ReadFile(filepath.Join(testdata, "jpeg_q90_max256.labels.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := labels.Int64()
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range cacheModes {
		r := openTest(t, "jpeg_q90_max256.beton", opt)
		if r.NumSamples() != 48 || r.PageSize() != 8<<20 {
			t.Fatalf("%d samples, page size %d", r.NumSamples(), r.PageSize())
		}
		fImg, fLabel := fieldIndex(t, r, "image"), fieldIndex(t, r, "label")
		sizes := map[[2]int]int{}
		for i := range 48 {
			img, err := r.Image(fImg, i)
			if err != nil {
				t.Fatal(err)
			}
			if !img.JPEG || img.Channels != 3 {
				t.Fatalf("sample %d: JPEG %v, %d channels", i, img.JPEG, img.Channels)
			}
			d := img.Data
			if len(d) < 4 || d[0] != 0xff || d[1] != 0xd8 || d[len(d)-2] != 0xff || d[len(d)-1] != 0xd9 {
				t.Fatalf("sample %d: %d bytes not delimited by FFD8…FFD9", i, len(d))
			}
			w, h, comps, ok := jpegSize(d)
			if !ok || w != img.Width || h != img.Height || comps != 3 {
				t.Fatalf("sample %d: frame %dx%dx%d (found %v), metadata %dx%d", i, w, h, comps, ok, img.Width, img.Height)
			}
			sizes[[2]int{w, h}]++
			if got := r.Int(fLabel, i); got != want[i] || got != int64(i%10) {
				t.Errorf("sample %d: label %d, want %d", i, got, want[i])
			}
		}
		if sizes[[2]int{256, 256}] != 24 || sizes[[2]int{256, 192}] != 24 || len(sizes) != 2 {
			t.Errorf("image sizes %v, want 24 of 256x256 and 24 of 256x192", sizes)
		}
	}
}

func TestConcurrentProcessCache(t *testing.T) {
	t.Parallel()
	images, err := npy.ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	// A cache of two 8 MiB pages over a file of two pages, read from many
	// goroutines while prefetching.
	r := openTest(t, "jpeg_q90_max256.beton", ReadOptions{Cache: Process, CacheBytes: 1, PrefetchWorkers: 2})
	raw := openTest(t, "raw_all_fields.beton", ReadOptions{Cache: Process, CacheBytes: 1})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Go(func() {
			for k := range 200 {
				i := (g*31 + k*7) % 48
				r.Prefetch([]int64{r.Page(i), r.Page((i + 1) % 48)})
				img, err := r.Image(0, i)
				if err != nil {
					errs <- err
					return
				}
				if img.Data[0] != 0xff || img.Data[len(img.Data)-1] != 0xd9 {
					errs <- fmt.Errorf("sample %d: bad JPEG", i)
					return
				}
				j := k % 64
				ri, err := raw.Image(0, j)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(ri.Data, images.Data[j*3072:(j+1)*3072]) {
					errs <- fmt.Errorf("raw sample %d differs", j)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestPrefetchMMap(t *testing.T) {
	t.Parallel()
	r := openTest(t, "jpeg_q90_max256.beton", ReadOptions{})
	r.Prefetch([]int64{-1, 0, 1, 2, 99})
	if r.NumPages() != 2 || r.Page(0) != 1 {
		t.Errorf("NumPages %d, Page(0) %d", r.NumPages(), r.Page(0))
	}
}

func TestAccessorsPanicOnMisuse(t *testing.T) {
	t.Parallel()
	r := openTest(t, "raw_all_fields.beton", ReadOptions{})
	for name, f := range map[string]func(){
		"Float of an int field": func() { r.Float(1, 0) },
		"sample out of range":   func() { r.Int(1, 64) },
		"negative sample":       func() { r.Int(1, -1) },
		"field out of range":    func() { r.Int(6, 0) },
		"Image of bytes":        func() { r.Image(4, 0) },
		"Page out of range":     func() { r.Page(64) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestReadAfterClose(t *testing.T) {
	t.Parallel()
	for _, opt := range cacheModes {
		r, err := Open(filepath.Join(testdata, "raw_all_fields.beton"), opt)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Bytes(4, 0); err == nil {
			t.Errorf("%v: Bytes after Close succeeded", opt.Cache)
		}
		if r.Int(1, 3) != 1 {
			t.Errorf("%v: metadata unreadable after Close", opt.Cache)
		}
		if r.Close() == nil {
			t.Errorf("%v: second Close succeeded", opt.Cache)
		}
	}
}
