package ffcv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
	"github.com/flockml/flock/npy"
	"github.com/flockml/flock/tensor"
)

const testdata = "../testdata/ffcv"

func openTest(t testing.TB, name string, opt Options) *Loader {
	t.Helper()
	l, err := Open(filepath.Join(testdata, name), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// collect reads the rest of the current epoch and returns deep copies of
// the batches' columns (name → bytes of each batch) and indices.
type epochData struct {
	indices [][]int
	cols    []map[string][]byte
	lambda  [][]float32
}

func collect(t testing.TB, l *Loader) epochData {
	t.Helper()
	var d epochData
	for b, err := range l.Epoch(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		d.indices = append(d.indices, slices.Clone(b.Indices))
		m := map[string][]byte{}
		for _, c := range b.Columns {
			if c.DType == 0 {
				m[c.Name] = bytes.Join(c.Bytes, []byte{0xff})
				continue
			}
			m[c.Name] = slices.Clone(c.Raw())
		}
		d.cols = append(d.cols, m)
		if c := b.Column("label"); c != nil && c.Lambda != nil {
			d.lambda = append(d.lambda, slices.Clone(c.Lambda[:b.Len()]))
		}
	}
	return d
}

func equalEpochs(t *testing.T, what string, a, b epochData) {
	t.Helper()
	if len(a.indices) != len(b.indices) {
		t.Fatalf("%s: %d and %d batches", what, len(a.indices), len(b.indices))
	}
	for k := range a.indices {
		if !slices.Equal(a.indices[k], b.indices[k]) {
			t.Fatalf("%s: batch %d: indices %v and %v", what, k, a.indices[k], b.indices[k])
		}
		for name, v := range a.cols[k] {
			if !bytes.Equal(v, b.cols[k][name]) {
				t.Fatalf("%s: batch %d: field %q differs", what, k, name)
			}
		}
	}
	for k := range a.lambda {
		if !slices.Equal(a.lambda[k], b.lambda[k]) {
			t.Fatalf("%s: batch %d: mixup weights differ", what, k)
		}
	}
}

// TestRawAllFields reads every field of FFCV's raw_all_fields.beton with
// the default pipelines and checks each value against what the file's
// generator wrote (testdata/ffcv/README.md).
func TestRawAllFields(t *testing.T) {
	t.Parallel()
	l := openTest(t, "raw_all_fields.beton", Options{BatchSize: 10, KeepLast: true, Workers: 3})
	want, err := npy.ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	if err != nil {
		t.Fatal(err)
	}
	if l.BatchesPerEpoch() != 7 || l.Len() != 64 {
		t.Fatalf("%d batches of %d samples, want 7 of 64", l.BatchesPerEpoch(), l.Len())
	}
	seen := 0
	for b, err := range l.Epoch(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		img := b.Column("image")
		if !slices.Equal(img.Shape, []int{b.Len(), 32, 32, 3}) || img.DType != tensor.Uint8 {
			t.Fatalf("image column %v %v", img.DType, img.Shape)
		}
		labels, weights := b.Column("label").Int64s(), b.Column("weight").Float64s()
		vec, blobs, metas := b.Column("vec").Float32s(), b.Column("blob").Bytes, b.Column("meta").Bytes
		if got := b.Column("vec").Shape; !slices.Equal(got, []int{b.Len(), 3, 4}) {
			t.Fatalf("vec shape %v", got)
		}
		for row, i := range b.Indices {
			if i != seen {
				t.Fatalf("sequential order: sample %d at position %d", i, seen)
			}
			seen++
			if !bytes.Equal(img.Uint8s()[row*3072:(row+1)*3072], want.Data[i*3072:(i+1)*3072]) {
				t.Errorf("sample %d: image differs", i)
			}
			if labels[row] != int64(7*i%10) || weights[row] != float64(i)/3 {
				t.Errorf("sample %d: label %d weight %v, want %d %v", i, labels[row], weights[row], 7*i%10, float64(i)/3)
			}
			for k := range 12 {
				if vec[row*12+k] != float32(k*(i+1)) {
					t.Fatalf("sample %d: vec %v", i, vec[row*12:row*12+12])
				}
			}
			if !bytes.Equal(blobs[row], bytes.Repeat([]byte{byte(i)}, i%17+1)) {
				t.Errorf("sample %d: blob %v", i, blobs[row])
			}
			var meta struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			}
			if err := json.Unmarshal(metas[row], &meta); err != nil || meta.ID != i || meta.Name != fmt.Sprintf("sample-%d", i) {
				t.Errorf("sample %d: meta %q (%v)", i, metas[row], err)
			}
		}
	}
	if seen != 64 {
		t.Fatalf("%d samples read, want 64", seen)
	}
	if p := l.Position(); p != (Position{Epoch: 1}) {
		t.Errorf("position after the epoch %+v, want epoch 1 batch 0", p)
	}
}

// TestFashionMNISTNDArray reads FFCV's fmnist_500_ndarray.beton (uint8
// (28, 28) arrays) raw and normalised, and compares it with the first 500
// Fashion-MNIST test images when they are installed.
func TestFashionMNISTNDArray(t *testing.T) {
	t.Parallel()
	const mean, std = 0.2860 * 255, 0.3530 * 255
	l := openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 100, Workers: 2})
	n := openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 100, Workers: 2, Pipelines: map[string]Pipeline{
		"image": {NDArrayDecoder{}, ToCHW{}, Normalize{Mean: []float64{mean}, Std: []float64{std}}},
	}})
	raw, norm := collect(t, l), collect(t, n)
	if len(raw.cols) != 5 {
		t.Fatalf("%d batches, want 5", len(raw.cols))
	}
	var pixels []byte
	var labels []int64
	for k := range raw.cols {
		pixels = append(pixels, raw.cols[k]["image"]...)
		labels = append(labels, f64toi(raw.cols[k]["label"])...)
		x := f32(norm.cols[k]["image"])
		for i, p := range raw.cols[k]["image"] {
			if want := float32((float64(p) - mean) / std); math.Abs(float64(x[i]-want)) > 1e-6 {
				t.Fatalf("batch %d value %d: normalised %v, want %v", k, i, x[i], want)
			}
		}
	}
	if testing.Short() || raceEnabled {
		t.Skip("comparison with the Fashion-MNIST files skipped in -short mode and under the race detector (slow to decompress)")
	}
	_, test, err := dataset.LoadFashionMNIST(context.Background(), dataset.FashionMNISTOptions{})
	if errors.Is(err, dataset.ErrNotFound) {
		t.Skipf("Fashion-MNIST not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pixels, test.Pixels[:500*784]) {
		t.Error("pixels differ from the Fashion-MNIST test set")
	}
	for i, y := range labels {
		if y != int64(test.Labels[i]) {
			t.Fatalf("label %d: %d, want %d", i, y, test.Labels[i])
		}
	}
}

func f64toi(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		for k := 7; k >= 0; k-- {
			out[i] = out[i]<<8 | int64(b[8*i+k])
		}
	}
	return out
}

// jpegPipelines is the training pipeline of the benchmark, with mixup.
func jpegPipelines(size int) map[string]Pipeline {
	return map[string]Pipeline{
		"image": {RandomResizedCrop{Width: size, Height: size}, Flip{}, Translate{Padding: 2}, Cutout{Size: 8},
			ToCHW{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd}, Mixup{Alpha: 0.4}},
		"label": {IntDecoder{}, Squeeze{}, LabelMixup{Alpha: 0.4}},
	}
}

// TestDeterminism checks that the batches, augmentations included, do not
// depend on the number of workers, and that they change with the epoch
// and the seed.
func TestDeterminism(t *testing.T) {
	t.Parallel()
	read := func(workers int, seed uint64, epoch int) epochData {
		l := openTest(t, "jpeg_q90_max256.beton", Options{BatchSize: 7, Workers: workers, Order: Random, Seed: seed, KeepLast: true, Pipelines: jpegPipelines(64)})
		if err := l.Seek(Position{Epoch: epoch}); err != nil {
			t.Fatal(err)
		}
		return collect(t, l)
	}
	one := read(1, 5, 1)
	if len(one.indices) != 7 {
		t.Fatalf("%d batches, want 7", len(one.indices))
	}
	for _, w := range []int{2, 8} {
		equalEpochs(t, fmt.Sprintf("%d workers vs 1", w), one, read(w, 5, 1))
	}
	other := read(2, 5, 2)
	if bytes.Equal(other.cols[0]["image"], one.cols[0]["image"]) {
		t.Error("epochs 1 and 2 give the same first batch")
	}
	// The same samples in another epoch get other augmentations.
	seq := func(epoch int) []byte {
		l := openTest(t, "jpeg_q90_max256.beton", Options{BatchSize: 4, Workers: 2, Seed: 5, Pipelines: jpegPipelines(64)})
		l.Seek(Position{Epoch: epoch})
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		return slices.Clone(b.Column("image").Raw())
	}
	if bytes.Equal(seq(0), seq(1)) {
		t.Error("augmentations do not change with the epoch")
	}
}

// TestResume checks that seeking to (epoch, batch) reproduces the rest of
// that epoch, for every order, also in distributed mode.
func TestResume(t *testing.T) {
	t.Parallel()
	for _, order := range []Order{Sequential, Random, QuasiRandom} {
		for _, world := range []int{1, 3} {
			opt := Options{BatchSize: 3, Workers: 2, Order: order, Seed: 11, Rank: world - 1, World: world, Pipelines: jpegPipelines(32)}
			full := openTest(t, "jpeg_q90_max256.beton", opt)
			full.Seek(Position{Epoch: 2})
			all := collect(t, full)
			resumed := openTest(t, "jpeg_q90_max256.beton", opt)
			if err := resumed.Seek(Position{Epoch: 2, Batch: 2}); err != nil {
				t.Fatal(err)
			}
			rest := collect(t, resumed)
			tail := epochData{indices: all.indices[2:], cols: all.cols[2:], lambda: all.lambda[2:]}
			equalEpochs(t, fmt.Sprintf("%v world %d", order, world), tail, rest)
			if got, want := resumed.Position(), (Position{Epoch: 3}); got != want {
				t.Errorf("position %+v, want %+v", got, want)
			}
		}
	}
}

// TestDistributed checks through the loader that, for every order, the
// ranks together visit every sample of the subset once per epoch plus the
// padding, with the samples' own labels.
func TestDistributed(t *testing.T) {
	t.Parallel()
	subset := []int{0, 2, 3, 5, 7, 8, 11, 13, 17, 19, 20, 23, 29, 31, 37, 41, 43, 47}
	for _, order := range []Order{Sequential, Random, QuasiRandom} {
		const world = 4
		counts := map[int]int{}
		for rank := range world {
			l := openTest(t, "raw_all_fields.beton", Options{BatchSize: 2, Workers: 2, Order: order, Seed: 3, Rank: rank, World: world,
				Indices: subset, KeepLast: true, Pipelines: map[string]Pipeline{"label": {IntDecoder{}, Squeeze{}}}})
			l.Seek(Position{Epoch: 1})
			if l.Len() != 5 {
				t.Fatalf("rank %d: %d samples per epoch, want ⌈18/4⌉ = 5", rank, l.Len())
			}
			for b, err := range l.Epoch(context.Background()) {
				if err != nil {
					t.Fatal(err)
				}
				for row, i := range b.Indices {
					counts[i]++
					if got := b.Column("label").Int64s()[row]; got != int64(7*i%10) {
						t.Fatalf("sample %d: label %d", i, got)
					}
				}
			}
		}
		total := 0
		for _, i := range subset {
			if counts[i] < 1 || counts[i] > 2 {
				t.Errorf("%v: sample %d visited %d times", order, i, counts[i])
			}
			total += counts[i]
		}
		if total != 20 || len(counts) != len(subset) {
			t.Errorf("%v: %d visits of %d samples, want 20 visits of the %d of the subset", order, total, len(counts), len(subset))
		}
	}
}

// TestCloseEarly stops iterations early in several ways and checks that no
// goroutine is left behind.
func TestCloseEarly(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, how := range []string{"break", "close", "cancel", "held"} {
		l, err := Open(filepath.Join(testdata, "jpeg_q90_max256.beton"), Options{BatchSize: 4, Workers: 4, Order: Random, Pipelines: jpegPipelines(48)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		for b, err := range l.Epoch(ctx) {
			if how == "cancel" && n == 2 {
				if !errors.Is(err, context.Canceled) {
					t.Errorf("cancel: error %v, want context.Canceled", err)
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			_ = b.Len()
			n++
			if n == 2 {
				switch how {
				case "break":
				case "close":
					l.Close()
				case "cancel":
					cancel()
					continue
				case "held":
					b2, err := l.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					_ = b2 // left unreleased
				}
				break
			}
		}
		if how == "break" {
			if p := l.Position(); p != (Position{Batch: 2}) {
				t.Errorf("break: position %+v, want batch 2", p)
			}
		}
		cancel()
		l.Close()
		if _, err := l.Next(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: Next after Close: %v, want ErrClosed", how, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after closing, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestRingHeld checks that a caller holding every slot gets an error
// rather than a deadlock, and can go on after releasing.
func TestRingHeld(t *testing.T) {
	t.Parallel()
	l := openTest(t, "raw_all_fields.beton", Options{BatchSize: 2, Workers: 2, BatchesAhead: 1})
	var held []Batch
	for range 3 {
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, b)
	}
	if _, err := l.Next(context.Background()); err == nil {
		t.Fatal("Next with every slot held: no error")
	}
	held[0].Release()
	held[0].Release() // twice does nothing
	b, err := l.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b.Pos != (Position{Batch: 3}) || b.Indices[0] != 6 {
		t.Errorf("batch %+v indices %v, want batch 3 from sample 6", b.Pos, b.Indices)
	}
	if held[1].Indices[0] != 2 {
		t.Errorf("a held batch changed: indices %v", held[1].Indices)
	}
}

// TestLastBatchDefault checks who keeps an epoch's last, smaller batch of
// the 64 samples in batches of 10: evaluation loaders (sequential, nothing
// random) by default, training loaders only with KeepLast, nobody with
// DropLast.
func TestLastBatchDefault(t *testing.T) {
	t.Parallel()
	center := map[string]Pipeline{"image": {CenterCrop{Width: 16, Height: 16}, ToCHW{}, Normalize{Mean: []float64{128}, Std: []float64{64}}}}
	flip := map[string]Pipeline{"image": {SimpleImageDecoder{}, Flip{}}}
	for _, c := range []struct {
		name    string
		opt     Options
		batches int
	}{
		{"sequential, default pipelines", Options{}, 7},
		{"sequential, centre crop", Options{Pipelines: center}, 7},
		{"sequential, DropLast", Options{DropLast: true}, 6},
		{"sequential, random flip", Options{Pipelines: flip}, 6},
		{"sequential, random flip, KeepLast", Options{Pipelines: flip, KeepLast: true}, 7},
		{"random order", Options{Order: Random}, 6},
		{"random order, KeepLast", Options{Order: Random, KeepLast: true}, 7},
	} {
		c.opt.BatchSize, c.opt.Workers = 10, 2
		l := openTest(t, "raw_all_fields.beton", c.opt)
		if l.BatchesPerEpoch() != c.batches || l.KeepsLast() != (c.batches == 7) {
			t.Errorf("%s: %d batches per epoch (keeps last: %v), want %d", c.name, l.BatchesPerEpoch(), l.KeepsLast(), c.batches)
		}
		n := 0
		for b, err := range l.Epoch(context.Background()) {
			if err != nil {
				t.Fatal(err)
			}
			n += b.Len()
		}
		if want := min(64, c.batches*10); n != want {
			t.Errorf("%s: %d samples in an epoch, want %d", c.name, n, want)
		}
	}
	if _, err := Open(filepath.Join(testdata, "raw_all_fields.beton"), Options{BatchSize: 10, KeepLast: true, DropLast: true}); err == nil {
		t.Error("KeepLast and DropLast together: no error")
	}
}

// TestPipelineErrors checks that bad pipelines are refused when the loader
// is made, naming the field and the problem.
func TestPipelineErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    map[string]Pipeline
		want string
	}{
		{map[string]Pipeline{"nope": {IntDecoder{}}}, `pipeline for "nope": no such field`},
		{map[string]Pipeline{"label": {FloatDecoder{}}}, "FloatDecoder cannot read a int field"},
		{map[string]Pipeline{"label": {Squeeze{}}}, "want a decoder"},
		{map[string]Pipeline{"image": {SimpleImageDecoder{}, Normalize{Mean: []float64{1, 2}, Std: []float64{1}}}}, "2 means"},
		{map[string]Pipeline{"image": {SimpleImageDecoder{}, ToCHW{}, Flip{}}}, "Flip after ToCHW"},
		{map[string]Pipeline{"label": {IntDecoder{}, Flip{}}}, "Flip needs images"},
		{map[string]Pipeline{"image": {RandomResizedCrop{}}}, "output size 0×0"},
		{map[string]Pipeline{"image": nil, "label": nil, "weight": nil, "vec": nil, "blob": nil, "meta": nil}, "no field to load"},
	} {
		_, err := Open(filepath.Join(testdata, "raw_all_fields.beton"), Options{BatchSize: 4, Pipelines: c.p})
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("pipelines %v: error %v, want one containing %q", c.p, err, c.want)
		}
	}
	if _, err := Open(filepath.Join(testdata, "jpeg_q90_max256.beton"), Options{BatchSize: 4}); err == nil ||
		!bytes.Contains([]byte(err.Error()), []byte("SimpleImageDecoder needs images of one size")) {
		t.Errorf("SimpleImageDecoder on mixed sizes: %v", err)
	}
}

// TestCenterCropMatchesFFCV decodes the first 8 images of
// jpeg_q90_max256.beton with CenterCrop 224 (ratio 224/256, area
// resampling) and compares them with what FFCV's own loader returned
// (libjpeg-turbo's fast DCT and OpenCV's INTER_AREA). Decoders differ in
// rounding, so the comparison allows a small difference: mean absolute
// difference ≤ 1.5 and maximum ≤ 8 per pixel value (measured: mean 1.00,
// maximum 5, with either JPEG decoder).
func TestCenterCropMatchesFFCV(t *testing.T) {
	t.Parallel()
	ref, err := npy.ReadFile(filepath.Join(testdata, "jpeg_q90_max256.centercrop224.first8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	l := openTest(t, "jpeg_q90_max256.beton", Options{BatchSize: 8, Workers: 2, Indices: seq(8), Pipelines: map[string]Pipeline{
		"image": {CenterCrop{Width: 224, Height: 224}},
	}})
	b, err := l.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	got := b.Column("image").Uint8s()
	if len(got) != len(ref.Data) {
		t.Fatalf("%d pixels, want %d", len(got), len(ref.Data))
	}
	var sum, maxd int
	for i, v := range got {
		d := int(v) - int(ref.Data[i])
		d = max(d, -d)
		sum += d
		maxd = max(maxd, d)
	}
	mean := float64(sum) / float64(len(got))
	t.Logf("centre crop vs FFCV: mean |Δ| %.3f, max |Δ| %d (%s)", mean, maxd, l.workers[0].decoder().Backend())
	if mean > 1.5 || maxd > 8 {
		t.Errorf("centre crop differs from FFCV's: mean |Δ| %.3f, max |Δ| %d", mean, maxd)
	}
}

// TestMatchFFCV checks that MatchFFCV decoding gives FFCV's own CenterCrop
// output exactly, with the pure-Go JPEG decoder and with libjpeg-turbo when
// it is present, and that at an output small enough for the default to
// decode at a reduced scale it still decodes at full size: its pixels equal
// those of the low-level pieces (a full-size fast-IDCT jpeg.Decoder, then
// transform.Resize with Area).
func TestMatchFFCV(t *testing.T) {
	ref, err := npy.ReadFile(filepath.Join(testdata, "jpeg_q90_max256.centercrop224.first8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	backends := []string{"go"}
	if ok, _ := jpeg.TurboAvailable(); ok {
		backends = append(backends, "turbo")
	}
	load := func(size int, dec Decoding) ([]uint8, *Loader) {
		l := openTest(t, "jpeg_q90_max256.beton", Options{BatchSize: 8, Workers: 2, Indices: seq(8), Decode: dec, Pipelines: map[string]Pipeline{
			"image": {CenterCrop{Width: size, Height: size}},
		}})
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		return slices.Clone(b.Column("image").Uint8s()), l
	}
	for _, backend := range backends {
		t.Setenv("FLOCK_JPEG", backend)
		got, l := load(224, MatchFFCV)
		if be := l.workers[0].decoder().Backend(); (be == "go") != (backend == "go") {
			t.Fatalf("FLOCK_JPEG=%s decodes with %s", backend, be)
		}
		if n := diffCount(got, ref.Data); n != 0 {
			t.Errorf("%s: MatchFFCV CenterCrop 224 differs from FFCV's output in %d of %d values", backend, n, len(got))
		}

		// At 64×64 the default decodes these 256-pixel images at 1/2 or 1/4.
		got, l = load(64, MatchFFCV)
		scaled, _ := load(64, Scaled)
		r := l.Reader()
		fi, _ := r.FieldIndex("image")
		dec, err := jpeg.OpenDecoder(backend)
		if err != nil {
			t.Fatal(err)
		}
		dec.SetFastDCT(true)
		want := make([]uint8, 0, len(got))
		out := transform.NewImage(64, 64, 3)
		for i := range 8 {
			img, err := r.Image(fi, i)
			if err != nil {
				t.Fatal(err)
			}
			full := transform.NewImage(img.Width, img.Height, 3)
			if err := dec.Decode(full, img.Data, 1); err != nil {
				t.Fatal(err)
			}
			transform.Resize(out, full, transform.CenterCropRect(img.Width, img.Height, 224.0/256), transform.Area)
			want = append(want, out.Pix...)
		}
		dec.Close()
		if n := diffCount(got, want); n != 0 {
			t.Errorf("%s: MatchFFCV CenterCrop 64 differs from a full-size fast-IDCT decode in %d of %d values", backend, n, len(got))
		}
		if diffCount(scaled, want) == 0 {
			t.Errorf("%s: the default decoding at 64×64 equals the full-size one; the test no longer covers scaled decoding", backend)
		}
		mean, maxd := absDiff(scaled, want)
		t.Logf("%s: Scaled against MatchFFCV at 64×64: mean |Δ| %.3f, max |Δ| %d", backend, mean, maxd)
	}

	_, err = Open(filepath.Join(testdata, "jpeg_q90_max256.beton"), Options{BatchSize: 4, Decode: MatchFFCV, Pipelines: map[string]Pipeline{
		"image": {CenterCrop{Width: 32, Height: 32, Filter: transform.Bilinear}},
	}})
	if err == nil || !strings.Contains(err.Error(), "FFCV resizes with Area") {
		t.Errorf("MatchFFCV with a bilinear filter: error %v", err)
	}
}

// TestMatchFFCVNonSquare checks MatchFFCV against FFCV's own CenterCrop
// output on non-square JPEGs (400×300, 300×400, 300×225, 225×300), whose
// centre crops FFCV area-resizes by factors that are not whole numbers, to
// 160×160 and 128×128: every value equal, with the pure-Go decoder and with
// libjpeg-turbo when it is present.
func TestMatchFFCVNonSquare(t *testing.T) {
	backends := []string{"go"}
	if ok, _ := jpeg.TurboAvailable(); ok {
		backends = append(backends, "turbo")
	}
	for _, size := range []int{160, 128} {
		ref, err := npy.ReadFile(filepath.Join(testdata, fmt.Sprintf("jpeg_nonsquare.centercrop%d.npy", size)))
		if err != nil {
			t.Fatal(err)
		}
		for _, backend := range backends {
			t.Setenv("FLOCK_JPEG", backend)
			l := openTest(t, "jpeg_nonsquare.beton", Options{BatchSize: 4, Workers: 1, Indices: seq(4), Decode: MatchFFCV, Pipelines: map[string]Pipeline{
				"image": {CenterCrop{Width: size, Height: size}},
			}})
			b, err := l.Next(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := b.Column("image").Uint8s()
			if n := diffCount(got, ref.Data); n != 0 {
				t.Errorf("%s: MatchFFCV CenterCrop %d differs from FFCV's output in %d of %d values", backend, size, n, len(got))
			}
			b.Release()
		}
	}
}

// diffCount returns the number of positions where a and b differ (all of
// them when the lengths differ).
func diffCount(a, b []uint8) int {
	if len(a) != len(b) {
		return max(len(a), len(b))
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// absDiff returns the mean and the largest absolute difference of a and b.
func absDiff(a, b []uint8) (mean float64, maxd int) {
	sum := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		d = max(d, -d)
		sum += d
		maxd = max(maxd, d)
	}
	return float64(sum) / float64(len(a)), maxd
}

// TestSteadyStateAllocations checks that batches allocate (almost) nothing
// once the loader runs: at most one allocation per batch on average, the
// start of each epoch's workers included, for raw images with every
// transform and for JPEGs with the training pipeline.
func TestSteadyStateAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	t.Run("raw", func(t *testing.T) {
		steadyAllocs(t, openTest(t, "raw_all_fields.beton", Options{BatchSize: 8, Workers: 2, Order: QuasiRandom, Pipelines: map[string]Pipeline{
			"image": {RandomResizedCrop{Width: 24, Height: 24}, Flip{}, Translate{Padding: 2}, Cutout{Size: 4},
				ToCHW{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd}, Mixup{Alpha: 0.2}},
			"label": {IntDecoder{}, Squeeze{}, LabelMixup{Alpha: 0.2}},
			"vec":   {NDArrayDecoder{}},
			"meta":  {BytesDecoder{}},
		}}))
	})
	t.Run("jpeg", func(t *testing.T) {
		l := openTest(t, "jpeg_q90_max256.beton", Options{BatchSize: 8, Workers: 2, Order: Random, Pipelines: map[string]Pipeline{
			"image": {RandomResizedCrop{Width: 96, Height: 96}, Flip{}, ToCHW{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd}},
			"label": {IntDecoder{}, Squeeze{}},
		}})
		t.Logf("JPEG decoder: %s", jpegBackend())
		steadyAllocs(t, l)
	})
}

func jpegBackend() string {
	d := jpeg.NewDecoder()
	defer d.Close()
	return d.Backend()
}

func steadyAllocs(t *testing.T, l *Loader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := func() {
		b, err := l.Next(ctx)
		if err == io.EOF {
			b, err = l.Next(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
	}
	for range 20 {
		next() // warm up: scratch grows, every epoch order computed once
	}
	var a, z runtime.MemStats
	runtime.ReadMemStats(&a)
	const batches = 60
	for range batches {
		next()
	}
	runtime.ReadMemStats(&z)
	per := float64(z.Mallocs-a.Mallocs) / batches
	t.Logf("%.2f allocations, %.0f bytes per batch", per, float64(z.TotalAlloc-a.TotalAlloc)/batches)
	if per > 1 {
		t.Errorf("%.2f allocations per batch at steady state, want ≤ 1", per)
	}
}

// TestProcessCache reads a file through the process cache with
// prefetching and checks it gives the same batches as the page cache.
func TestProcessCache(t *testing.T) {
	t.Parallel()
	for _, order := range []Order{Random, QuasiRandom} {
		opt := Options{BatchSize: 5, Workers: 2, Order: order, Seed: 1, Pipelines: jpegPipelines(32)}
		a := collect(t, openTest(t, "jpeg_q90_max256.beton", opt))
		opt.Cache = ProcessCache
		b := collect(t, openTest(t, "jpeg_q90_max256.beton", opt))
		equalEpochs(t, "process cache vs page cache", a, b)
	}
}

// TestTensor checks that columns become tensors of their dtype and shape.
func TestTensor(t *testing.T) {
	t.Parallel()
	l := openTest(t, "raw_all_fields.beton", Options{BatchSize: 4, Pipelines: map[string]Pipeline{
		"image": {SimpleImageDecoder{}, ToCHW{}, Normalize{Mean: []float64{0}, Std: []float64{255}}},
		"blob":  nil, "meta": nil,
	}})
	b, err := l.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	x, y := b.Column("image").Tensor(), b.Column("label").Tensor()
	defer x.Release()
	defer y.Release()
	if x.DType() != tensor.Float32 || !x.Shape().Equal(tensor.Shape{4, 3, 32, 32}) || y.DType() != tensor.Int64 || !y.Shape().Equal(tensor.Shape{4}) {
		t.Fatalf("tensors %v %v and %v %v", x.DType(), x.Shape(), y.DType(), y.Shape())
	}
	want, _ := npy.ReadFile(filepath.Join(testdata, "raw_all_fields.images.npy"))
	// Channel 2 of pixel (5, 7) of sample 1.
	if got, w := x.At(1, 2, 5, 7), float64(want.Data[3072+(5*32+7)*3+2])/255; math.Abs(got-w) > 1e-6 {
		t.Errorf("x[1,2,5,7] = %v, want %v", got, w)
	}
	if got := y.Int64s(); !slices.Equal(got, []int64{0, 7, 4, 1}) {
		t.Errorf("labels %v", got)
	}
}

// BenchmarkLoader measures the training pipeline (random-resized-crop 224,
// flip, normalise to NCHW float32) over FFCV's JPEG test file with one
// worker; the figure is images/s.
func BenchmarkLoader(b *testing.B) {
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("rrc224/workers=%d", workers), func(b *testing.B) {
			l := openTest(b, "jpeg_q90_max256.beton", Options{BatchSize: 16, Workers: workers, Order: Random, Pipelines: map[string]Pipeline{
				"image": {RandomResizedCrop{Width: 224, Height: 224}, Flip{}, ToCHW{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd}},
				"label": {IntDecoder{}, Squeeze{}},
			}})
			ctx := context.Background()
			images := 0
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				bt, err := l.Next(ctx)
				if err == io.EOF {
					bt, err = l.Next(ctx)
				}
				if err != nil {
					b.Fatal(err)
				}
				images += bt.Len()
				bt.Release()
			}
			b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "img/s")
		})
	}
}

// TestBFloat16 normalises to bfloat16 and checks the values against the
// float32 pipeline, rounded, and the tensor made from them.
func TestBFloat16(t *testing.T) {
	t.Parallel()
	read := func(dt tensor.DType) Batch {
		l := openTest(t, "raw_all_fields.beton", Options{BatchSize: 4, Pipelines: map[string]Pipeline{
			"image": {SimpleImageDecoder{}, ToCHW{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd, DType: dt}},
		}})
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Release)
		return b
	}
	f, h := read(tensor.Float32).Column("image"), read(tensor.BFloat16).Column("image")
	if h.DType != tensor.BFloat16 || !slices.Equal(h.Shape, f.Shape) {
		t.Fatalf("bfloat16 column %v %v", h.DType, h.Shape)
	}
	for i, v := range f.Float32s() {
		if got := math.Float32frombits(uint32(h.BFloat16s()[i]) << 16); math.Abs(float64(got-v)) > math.Abs(float64(v))/128 {
			t.Fatalf("value %d: bfloat16 %v, float32 %v", i, got, v)
		}
	}
	x := h.Tensor()
	defer x.Release()
	if x.DType() != tensor.BFloat16 || x.At(1, 2, 3, 4) != float64(math.Float32frombits(uint32(h.BFloat16s()[3072+2*1024+3*32+4])<<16)) {
		t.Errorf("tensor %v: x[1,2,3,4] = %v", x.DType(), x.At(1, 2, 3, 4))
	}
	if _, err := Open(filepath.Join(testdata, "raw_all_fields.beton"), Options{BatchSize: 4, Pipelines: map[string]Pipeline{
		"image": {SimpleImageDecoder{}, Normalize{Mean: ImageNetMean, Std: ImageNetStd, DType: tensor.BFloat16}},
	}}); err == nil {
		t.Error("bfloat16 without ToCHW: no error")
	}
}
