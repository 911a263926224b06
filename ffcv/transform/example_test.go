package transform_test

import (
	"fmt"

	"github.com/flockml/flock/ffcv/transform"
)

// A training augmentation chain for one sample: random-resized-crop to
// 224×224, random horizontal flip and normalization into a float32 CHW
// batch slot, all randomness keyed by (seed, epoch, sample).
func Example() {
	img := transform.NewImage(256, 192, 3) // e.g. a decoded JPEG
	for i := range img.Pix {
		img.Pix[i] = uint8(i % 251)
	}
	norm := transform.NewNormalizer(transform.ImageNetMean, transform.ImageNetStd)
	out := transform.NewImage(224, 224, 3)
	slot := make([]float32, 3*224*224)

	const seed, epoch, sample = 42, 3, 17
	r := transform.NewRand(seed, epoch, sample, 0)
	crop := transform.RandomResizedCropRect(img.Width, img.Height, transform.DefaultScale, transform.DefaultRatio, &r)
	transform.Resize(out, img, crop, transform.Area)
	transform.RandomFlipHorizontal(out, 0.5, &r)
	norm.ToCHW(slot, out)

	// The same key gives the same crop, whatever else was drawn meanwhile.
	again := transform.NewRand(seed, epoch, sample, 0)
	same := transform.RandomResizedCropRect(img.Width, img.Height, transform.DefaultScale, transform.DefaultRatio, &again)
	fmt.Println(crop.In(img.Width, img.Height), crop == same, len(slot))
	// Output: true true 150528
}

func ExampleCenterCropRect() {
	// FFCV's evaluation crop of a 256×192 image for 224-pixel outputs.
	fmt.Println(transform.CenterCropRect(256, 192, 224.0/256))
	// Output: Rect{X:44 Y:12 W:168 H:168}
}
