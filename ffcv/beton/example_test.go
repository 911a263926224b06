package beton_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flockml/flock/ffcv/beton"
	"github.com/flockml/flock/ffcv/transform"
)

func Example() {
	dir, err := os.MkdirTemp("", "beton")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.beton")

	// Four 2×2 RGB images with a label and a weight.
	fields := []beton.NamedField{
		{Name: "image", Field: beton.RGBImageField{Mode: beton.WriteRaw}},
		{Name: "label", Field: beton.IntField{}},
		{Name: "weight", Field: beton.FloatField{}},
	}
	src := beton.FuncSource(4, func(i int, out []any) error {
		img := transform.NewImage(2, 2, 3)
		for k := range img.Pix {
			img.Pix[k] = byte(10*i + k)
		}
		out[0], out[1], out[2] = img, i%2, float64(i)/4
		return nil
	})
	if err := beton.Write(context.Background(), path, fields, src, beton.WriterOptions{}); err != nil {
		panic(err)
	}

	r, err := beton.Open(path, beton.ReadOptions{})
	if err != nil {
		panic(err)
	}
	defer r.Close()
	image, _ := r.FieldIndex("image")
	for i := range r.NumSamples() {
		img, err := r.Image(image, i)
		if err != nil {
			panic(err)
		}
		fmt.Printf("sample %d: %dx%d pixels %v… label %d weight %.2f page %d\n",
			i, img.Width, img.Height, img.Data[:3], r.Int(1, i), r.Float(2, i), r.Page(i))
	}
	// Output:
	// sample 0: 2x2 pixels [0 1 2]… label 0 weight 0.00 page 1
	// sample 1: 2x2 pixels [10 11 12]… label 1 weight 0.25 page 1
	// sample 2: 2x2 pixels [20 21 22]… label 0 weight 0.50 page 1
	// sample 3: 2x2 pixels [30 31 32]… label 1 weight 0.75 page 1
}
