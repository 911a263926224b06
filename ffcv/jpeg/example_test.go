package jpeg_test

import (
	"bytes"
	"fmt"

	"github.com/flockml/flock/ffcv/jpeg"
	"github.com/flockml/flock/ffcv/transform"
)

func Example() {
	// Encode a small gradient, then decode it at full and half size.
	img := transform.NewImage(64, 48, 3)
	for y := 0; y < 48; y++ {
		for x := 0; x < 64; x++ {
			p := img.Pix[(y*64+x)*3:]
			p[0], p[1], p[2] = uint8(4*x), uint8(5*y), 128
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, 90); err != nil {
		panic(err)
	}
	w, h, comps, err := jpeg.DecodeConfig(buf.Bytes())
	if err != nil {
		panic(err)
	}
	fmt.Println(w, h, comps)

	d := jpeg.NewDecoder() // libjpeg-turbo if present, else pure Go
	defer d.Close()
	for _, denom := range []int{1, 2} {
		sw, sh := jpeg.ScaledSize(w, h, denom)
		dst := transform.NewImage(sw, sh, 3)
		if err := d.Decode(dst, buf.Bytes(), denom); err != nil {
			panic(err)
		}
		fmt.Println(sw, sh)
	}
	// Output:
	// 64 48 3
	// 64 48
	// 32 24
}
