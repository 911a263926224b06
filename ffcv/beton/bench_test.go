package beton

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/flockml/flock/ffcv/transform"
)

func BenchmarkReadImage(b *testing.B) {
	for _, opt := range cacheModes {
		b.Run(opt.Cache.String(), func(b *testing.B) {
			r := openTest(b, "jpeg_q90_max256.beton", ReadOptions{Cache: opt.Cache})
			n := r.NumSamples()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				img, err := r.Image(0, i%n)
				if err != nil || len(img.Data) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, c := range []struct {
		name  string
		n     int
		side  int
		field RGBImageField
	}{
		{"raw32", 4096, 32, RGBImageField{}},
		{"jpeg256", 64, 256, RGBImageField{Mode: WriteJPEG}},
		{"jpeg500max256", 32, 500, RGBImageField{Mode: WriteJPEG, MaxResolution: 256}},
	} {
		b.Run(c.name, func(b *testing.B) {
			imgs := make([]transform.Image, 16)
			for i := range imgs {
				imgs[i] = testImage(c.side, c.side*3/4, 3, i)
			}
			src := FuncSource(c.n, func(i int, out []any) error {
				out[0], out[1] = imgs[i%len(imgs)], i
				return nil
			})
			fields := []NamedField{{"image", c.field}, {"label", IntField{}}}
			path := filepath.Join(b.TempDir(), "b.beton")
			for b.Loop() {
				if err := Write(context.Background(), path, fields, src, WriterOptions{PageSize: 2 << 20}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.n*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
