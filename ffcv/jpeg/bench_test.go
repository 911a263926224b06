package jpeg

import (
	"bytes"
	"fmt"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/flockml/flock/ffcv/transform"
)

// benchJPEGs returns the 256×256 q90 JPEGs of the FFCV test file.
func benchJPEGs(b *testing.B) [][]byte {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ffcv", "jpeg_q90_max256.beton"))
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for _, j := range extractJPEGs(data) {
		if w, h, _, _ := DecodeConfig(j); w == 256 && h == 256 {
			out = append(out, j)
		}
	}
	if len(out) == 0 {
		b.Fatal("no 256×256 JPEGs")
	}
	return out
}

// perCPU measures images per second of wall time and, where the thread's
// CPU time is available, per CPU second (steadier on a shared machine).
// Call it before the loop and call the result after.
func perCPU(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		cpu := threadCPU() - start
		runtime.UnlockOSThread()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "img/s")
		if cpu > 0 {
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "img/cpu-s")
		}
	}
}

// BenchmarkDecode decodes 256×256 q90 JPEGs into RGB: image/jpeg (with
// its own YCbCr result, not converted), the pure-Go decoder and
// libjpeg-turbo, at full and half size.
func BenchmarkDecode(b *testing.B) {
	jpegs := benchJPEGs(b)
	b.Run("image-jpeg", func(b *testing.B) {
		report := perCPU(b)
		for i := 0; b.Loop(); i++ {
			if _, err := stdjpeg.Decode(bytes.NewReader(jpegs[i%len(jpegs)])); err != nil {
				b.Fatal(err)
			}
		}
		report()
	})
	for _, backend := range []string{"go", "go-fastdct", "turbo", "turbo-fastdct"} {
		d, err := newDecoder(strings.TrimSuffix(backend, "-fastdct"))
		if err != nil {
			b.Logf("%s: %v", backend, err)
			continue
		}
		d.SetFastDCT(strings.HasSuffix(backend, "-fastdct"))
		for _, denom := range []int{1, 2} {
			sw, sh := ScaledSize(256, 256, denom)
			dst := transform.NewImage(sw, sh, 3)
			b.Run(fmt.Sprintf("%s/1:%d", backend, denom), func(b *testing.B) {
				report := perCPU(b)
				for i := 0; b.Loop(); i++ {
					if err := d.Decode(dst, jpegs[i%len(jpegs)], denom); err != nil {
						b.Fatal(err)
					}
				}
				report()
			})
		}
		d.Close()
	}
}

// BenchmarkPipeline is the training augmentation chain of one sample:
// decode, random-resized-crop to 224×224, random horizontal flip and
// normalization into a float32 CHW batch slot.
func BenchmarkPipeline(b *testing.B) {
	jpegs := benchJPEGs(b)
	norm := transform.NewNormalizer(transform.ImageNetMean, transform.ImageNetStd)
	slot := make([]float32, 3*224*224)
	out := transform.NewImage(224, 224, 3)
	img := transform.NewImage(256, 256, 3)
	for _, backend := range []string{"go", "go-fastdct", "turbo", "turbo-fastdct"} {
		d, err := newDecoder(strings.TrimSuffix(backend, "-fastdct"))
		if err != nil {
			b.Logf("%s: %v", backend, err)
			continue
		}
		d.SetFastDCT(strings.HasSuffix(backend, "-fastdct"))
		for _, f := range []transform.Filter{transform.Area, transform.Bilinear} {
			b.Run(backend+"/"+f.String(), func(b *testing.B) {
				report := perCPU(b)
				for i := 0; b.Loop(); i++ {
					if err := d.Decode(img, jpegs[i%len(jpegs)], 1); err != nil {
						b.Fatal(err)
					}
					r := transform.NewRand(0, 0, uint64(i), 0)
					crop := transform.RandomResizedCropRect(256, 256, transform.DefaultScale, transform.DefaultRatio, &r)
					transform.Resize(out, img, crop, f)
					transform.RandomFlipHorizontal(out, 0.5, &r)
					norm.ToCHW(slot, out)
				}
				report()
			})
		}
		d.Close()
	}
}
