package dataset_test

import (
	"fmt"

	"github.com/flockml/flock/dataset"
)

// A Loader over a tiny synthetic set of ten 2×3 RGB images, sharded over two
// ranks: rank 1 sees five images per epoch, in batches of two.
func ExampleLoader() {
	ds := &dataset.Images{
		N: 10, H: 2, W: 3, C: 3,
		Pixels:  make([]uint8, 10*2*3*3),
		Labels:  []int32{0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
		Classes: []string{"dark", "light"},
	}
	for i := range ds.Pixels {
		ds.Pixels[i] = uint8(i)
	}
	l, err := dataset.NewLoader(ds, dataset.LoaderOptions{
		BatchSize: 2, Shuffle: true, Seed: 1, Rank: 1, World: 2,
		Mean: []float64{0.5}, Std: []float64{0.5},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("batches per epoch:", l.BatchesPerEpoch())
	for b := range l.Epoch() {
		fmt.Println(b.Pos, b.X.Shape(), b.X.DType(), b.Y.Shape(), b.Y.DType())
		b.Release()
	}
	fmt.Println("next:", l.Position())
	// Output:
	// batches per epoch: 3
	// {0 0} [2 3 2 3] float32 [2] int64
	// {0 1} [2 3 2 3] float32 [2] int64
	// {0 2} [1 3 2 3] float32 [1] int64
	// next: {1 0}
}
