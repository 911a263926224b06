package ffcv

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/flockml/flock/tensor"
)

// TestImageStream checks that an ImageStream hands out the Loader's batches
// as tensors equal to the columns, ends an epoch with io.EOF, seeks, and
// refuses pipelines that do not give float32 CHW images and int labels.
func TestImageStream(t *testing.T) {
	t.Parallel()
	pipes := map[string]Pipeline{
		"image": {NDArrayDecoder{}, ToCHW{}, Normalize{Mean: []float64{72.9}, Std: []float64{90}}},
		"label": {IntDecoder{}, Squeeze{}},
	}
	ref := openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 100, Order: Random, Seed: 3, Pipelines: pipes})
	want := collect(t, ref)
	s, err := NewImageStream(openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 100, Order: Random, Seed: 3, Pipelines: pipes}),
		ImageStreamOptions{Classes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if c, h, w, k := s.Shape(); c != 1 || h != 28 || w != 28 || k != 10 {
		t.Fatalf("Shape() = %d, %d, %d, %d: want 1, 28, 28, 10", c, h, w, k)
	}
	for i := range s.BatchesPerEpoch() {
		b, err := s.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(b.X.Shape(), []int{100, 1, 28, 28}) || b.X.DType() != tensor.Float32 || b.Y.DType() != tensor.Int64 {
			t.Fatalf("batch %d: images %v %v, labels %v", i, b.X.DType(), b.X.Shape(), b.Y.DType())
		}
		if !slices.Equal(b.Indices, want.indices[i]) || !slices.Equal(b.X.Float32s(), floats(want.cols[i]["image"])) {
			t.Errorf("batch %d differs from the Loader's", i)
		}
		b.Release()
	}
	if _, err := s.Next(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last batch: %v, want io.EOF", err)
	}
	if p := s.Position(); p.Epoch != 1 || p.Batch != 0 {
		t.Fatalf("position %v after an epoch: want epoch 1 batch 0", p)
	}

	for _, c := range []struct {
		name    string
		pipes   map[string]Pipeline
		classes int
		want    string
	}{
		{"uint8 images", map[string]Pipeline{"image": {NDArrayDecoder{}}}, 10, "want float32 [C, H, W]"},
		{"no labels", map[string]Pipeline{"image": pipes["image"], "label": nil}, 10, `field "label" is not loaded`},
		{"no classes", nil, 0, "0 classes"},
		{"labels not squeezed", map[string]Pipeline{"image": pipes["image"], "label": {IntDecoder{}}}, 10, "want an int64 scalar"},
	} {
		l := openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 10, Pipelines: c.pipes})
		if _, err := NewImageStream(l, ImageStreamOptions{Classes: c.classes}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Labels beyond the classes given.
	s, err = NewImageStream(openTest(t, "fmnist_500_ndarray.beton", Options{BatchSize: 100, Pipelines: pipes}), ImageStreamOptions{Classes: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "outside [0, 2)") {
		t.Errorf("labels beyond 2 classes: error %v", err)
	}
}

// floats reads native-order float32 bytes.
func floats(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}
