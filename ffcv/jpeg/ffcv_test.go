package jpeg

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/ffcv/transform"
	"github.com/flockml/flock/npy"
)

// FFCV's own loader output for the first 8 samples of the test file with
// CenterCropRGBImageDecoder((224, 224), ratio=224/256): libjpeg-turbo with
// its fast DCT, then OpenCV's INTER_AREA. With the fast DCT the result is
// expected to be identical; the accurate DCT moves samples by a few levels
// (the fast one truncates, so it is darker by about 0.8 on average).
var ffcvLimits = map[bool]struct {
	maxDiff int
	mean    float64
}{
	true:  {0, 0},
	false: {8, 1.2},
}

func TestCenterCropMatchesFFCV(t *testing.T) {
	ref, err := npy.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "jpeg_q90_max256.centercrop224.first8.npy"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Uint8()
	if err != nil || len(ref.Shape) != 4 || ref.Shape[1] != 224 || ref.Shape[2] != 224 || ref.Shape[3] != 3 {
		t.Fatalf("reference %v %v", ref.Shape, err)
	}
	beton, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "jpeg_q90_max256.beton"))
	if err != nil {
		t.Fatal(err)
	}
	jpegs := extractJPEGs(beton)
	out := transform.NewImage(224, 224, 3)
	decoders := []*Decoder{NewGoDecoder()}
	if tj, err := newDecoder("turbo"); err == nil {
		defer tj.Close()
		decoders = append(decoders, tj)
	}
	for _, d := range decoders {
		for _, fastDCT := range []bool{true, false} {
			d.SetFastDCT(fastDCT)
			lim := ffcvLimits[fastDCT]
			for i := 0; i < ref.Shape[0]; i++ {
				img := decodeWith(t, d, jpegs[i], 1, 3)
				crop := transform.CenterCropRect(img.Width, img.Height, 224.0/256)
				transform.Resize(out, img, crop, transform.Area)
				w := transform.ImageOf(want[i*224*224*3:(i+1)*224*224*3], 224, 224, 3)
				maxd, mean := diff(out, w)
				if maxd > lim.maxDiff || mean > lim.mean {
					t.Errorf("%s fastDCT=%v sample %d: max |diff| %d, mean %.3f; limits %d, %v", d.Backend(), fastDCT, i, maxd, mean, lim.maxDiff, lim.mean)
				}
				if testing.Verbose() {
					t.Logf("%s fastDCT=%v sample %d: max |diff| %d, mean %.3f", d.Backend(), fastDCT, i, maxd, mean)
				}
			}
		}
	}
}
