package ffcv_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flockml/flock/ffcv"
	"github.com/flockml/flock/ffcv/beton"
)

// Write twenty 8×8 RGB images with labels to a .beton file, then load them
// in shuffled batches of 8 with a training pipeline: random-resized-crop to
// 6×6, flip, channel-first float32 normalised pixels, and int64 labels.
func Example() {
	dir, err := os.MkdirTemp("", "ffcv-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.beton")

	src := &ffcv.ArraySource{N: 20, H: 8, W: 8, C: 3, Pixels: make([]uint8, 20*8*8*3), Labels: make([]int64, 20)}
	for i := range src.Pixels {
		src.Pixels[i] = uint8(i)
	}
	for i := range src.Labels {
		src.Labels[i] = int64(i % 4)
	}
	if err := beton.Write(context.Background(), path, src.Fields(), src, beton.WriterOptions{PageSize: beton.MinPageSize}); err != nil {
		fmt.Println(err)
		return
	}

	l, err := ffcv.Open(path, ffcv.Options{
		BatchSize: 8, Order: ffcv.Random, Seed: 1, Workers: 2,
		Pipelines: map[string]ffcv.Pipeline{
			"image": {ffcv.RandomResizedCrop{Width: 6, Height: 6}, ffcv.Flip{}, ffcv.ToCHW{},
				ffcv.Normalize{Mean: ffcv.ImageNetMean, Std: ffcv.ImageNetStd}},
			"label": {ffcv.IntDecoder{}, ffcv.Squeeze{}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	fmt.Println("batches per epoch:", l.BatchesPerEpoch())
	for b, err := range l.Epoch(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		x := b.Column("image").Tensor()
		y := b.Column("label").Tensor()
		fmt.Println(b.Pos, x.Shape(), x.DType(), y.Shape(), y.DType())
		x.Release()
		y.Release()
	}
	fmt.Println("next:", l.Position())
	// Output:
	// batches per epoch: 2
	// {0 0} [8 3 6 6] float32 [8] int64
	// {0 1} [8 3 6 6] float32 [8] int64
	// next: {1 0}
}

// Load the first 10 images of an FFCV file for evaluation: centre crops of
// 224×224 decoded exactly as FFCV's CenterCropRGBImageDecoder decodes them
// (MatchFFCV), normalised, in order. An evaluation loader keeps the last,
// smaller batch.
func Example_evaluation() {
	indices := make([]int, 10)
	for i := range indices {
		indices[i] = i
	}
	l, err := ffcv.Open(filepath.Join("..", "testdata", "ffcv", "jpeg_q90_max256.beton"), ffcv.Options{
		BatchSize: 4, Indices: indices, Decode: ffcv.MatchFFCV,
		Pipelines: map[string]ffcv.Pipeline{
			"image": {ffcv.CenterCrop{Width: 224, Height: 224}, ffcv.ToCHW{},
				ffcv.Normalize{Mean: ffcv.ImageNetMean, Std: ffcv.ImageNetStd}},
			"label": {ffcv.IntDecoder{}, ffcv.Squeeze{}},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	for b, err := range l.Epoch(context.Background()) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(b.Indices, b.Column("image").Shape, b.Column("label").Int64s())
	}
	// Output:
	// [0 1 2 3] [4 3 224 224] [0 1 2 3]
	// [4 5 6 7] [4 3 224 224] [4 5 6 7]
	// [8 9] [2 3 224 224] [8 9]
}
