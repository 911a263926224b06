package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// benchView returns a contiguous float32 view of shape filled with values in
// [-1, 1).
func benchView(b *testing.B, c *cpu.Backend, shape backend.Shape) backend.View {
	b.Helper()
	buf, err := c.Alloc(shape.NumElements() * 4)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Free(buf) })
	v := backend.Contiguous(buf, backend.Float32, shape)
	rng := rand.New(rand.NewPCG(1, uint64(len(shape))))
	data := cpu.F32(v)
	for i := range data {
		data[i] = 2*rng.Float32() - 1
	}
	return v
}

func reportGFLOPS(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkMatMul(b *testing.B) {
	cases := []struct {
		name           string
		batch, m, n, k int
	}{
		{"256x256x256", 1, 256, 256, 256},
		{"1024x1024x1024", 1, 1024, 1024, 1024},
		// A 64→64 3×3 convolution on a 56×56 plane as one product:
		// [3136 positions × 576 taps]·[576 × 64 channels].
		{"m3136_k576_n64", 1, 3136, 64, 576},
		{"batch256_32x32x32", 256, 32, 32, 32},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dev := cpu.New()
			x := benchView(b, dev, backend.Shape{c.batch, c.m, c.k})
			y := benchView(b, dev, backend.Shape{c.batch, c.k, c.n})
			z := benchView(b, dev, backend.Shape{c.batch, c.m, c.n})
			p := backend.MatMulParams{Alpha: 1}
			b.ResetTimer()
			for range b.N {
				if err := dev.MatMul(z, x, y, p); err != nil {
					b.Fatal(err)
				}
			}
			reportGFLOPS(b, 2*float64(c.batch*c.m*c.n*c.k))
		})
	}
}

// convBench is a ResNet-like convolution.
type convBench struct {
	n, c, hw, o, k, stride, pad int
	groups                      int // 0 for 1
}

func (c convBench) String() string {
	s := fmt.Sprintf("N%d_%dto%d_%dx%d_k%d_s%d", c.n, c.c, c.o, c.hw, c.hw, c.k, c.stride)
	if c.groups > 1 {
		s += fmt.Sprintf("_g%d", c.groups)
	}
	return s
}

var convBenches = []convBench{
	{n: 8, c: 64, hw: 56, o: 64, k: 3, stride: 1, pad: 1},
	{n: 8, c: 128, hw: 28, o: 128, k: 3, stride: 1, pad: 1},
	{n: 2, c: 3, hw: 224, o: 64, k: 7, stride: 2, pad: 3},
	{n: 8, c: 256, hw: 14, o: 1024, k: 1, stride: 1, pad: 0},
	// ResNet-18's small-stem stages at 32×32, batch 64.
	{n: 64, c: 64, hw: 32, o: 64, k: 3, stride: 1, pad: 1},
	{n: 64, c: 64, hw: 32, o: 128, k: 3, stride: 2, pad: 1},
	{n: 64, c: 128, hw: 16, o: 128, k: 3, stride: 1, pad: 1},
	{n: 64, c: 256, hw: 8, o: 256, k: 3, stride: 1, pad: 1},
	{n: 64, c: 512, hw: 4, o: 512, k: 3, stride: 1, pad: 1},
	// Depthwise.
	{n: 64, c: 64, hw: 32, o: 64, k: 3, stride: 1, pad: 1, groups: 64},
	{n: 64, c: 256, hw: 16, o: 256, k: 3, stride: 2, pad: 1, groups: 256},
}

// runConvBench benchmarks one convolution kernel; run gets the views x, w
// and y and runs the kernel once.
func runConvBench(b *testing.B, run func(dev *cpu.Backend, x, w, y backend.View, p backend.ConvParams) error) {
	for _, c := range convBenches {
		b.Run(c.String(), func(b *testing.B) {
			dev := cpu.New()
			g := max(1, c.groups)
			p := backend.ConvParams{StrideH: c.stride, StrideW: c.stride, PadH: c.pad, PadW: c.pad, DilationH: 1, DilationW: 1, Groups: g}
			oh, ow := p.OutputSize(c.hw, c.hw, c.k, c.k)
			x := benchView(b, dev, backend.Shape{c.n, c.c, c.hw, c.hw})
			w := benchView(b, dev, backend.Shape{c.o, c.c / g, c.k, c.k})
			y := benchView(b, dev, backend.Shape{c.n, c.o, oh, ow})
			b.ResetTimer()
			for range b.N {
				if err := run(dev, x, w, y, p); err != nil {
					b.Fatal(err)
				}
			}
			reportGFLOPS(b, 2*float64(c.n*c.o*c.c/g*c.k*c.k*oh*ow))
		})
	}
}

func BenchmarkConv2dForward(b *testing.B) {
	runConvBench(b, func(dev *cpu.Backend, x, w, y backend.View, p backend.ConvParams) error {
		return dev.Conv2d(y, x, w, p)
	})
}

func BenchmarkConv2dBackwardData(b *testing.B) {
	runConvBench(b, func(dev *cpu.Backend, x, w, y backend.View, p backend.ConvParams) error {
		return dev.Conv2dBackwardData(x, y, w, p)
	})
}

func BenchmarkConv2dBackwardWeight(b *testing.B) {
	runConvBench(b, func(dev *cpu.Backend, x, w, y backend.View, p backend.ConvParams) error {
		return dev.Conv2dBackwardWeight(w, x, y, p)
	})
}
