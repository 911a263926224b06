// Benchmarks of the kernels with vector loops (vec.go), on the kernel path
// in use: compare paths with FLOCK_CPU_KERNELS=avx512|avx2|go.
package cpu_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

func BenchmarkMaxPool2d(b *testing.B) {
	cases := []struct {
		name string
		x    backend.Shape
		p    backend.PoolParams
	}{
		{"2x2s2_128x16x28x28", backend.Shape{128, 16, 28, 28}, backend.PoolParams{KernelH: 2, KernelW: 2, StrideH: 2, StrideW: 2, DilationH: 1, DilationW: 1}},
		{"3x3s2p1_8x64x112x112", backend.Shape{8, 64, 112, 112}, backend.PoolParams{KernelH: 3, KernelW: 3, StrideH: 2, StrideW: 2, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dev := cpu.New()
			oh, ow := c.p.OutputSize(c.x[2], c.x[3])
			ys := backend.Shape{c.x[0], c.x[1], oh, ow}
			x := benchView(b, dev, c.x)
			y := benchView(b, dev, ys)
			buf, err := dev.Alloc(ys.NumElements() * 8)
			if err != nil {
				b.Fatal(err)
			}
			idx := backend.Contiguous(buf, backend.Int64, ys)
			b.SetBytes(int64(c.x.NumElements()*4 + ys.NumElements()*12))
			for b.Loop() {
				if err := dev.Pool2d(backend.MaxPool, y, idx, x, c.p); err != nil {
					b.Fatal(fmt.Sprint(err))
				}
			}
		})
	}
}

func BenchmarkSumBias(b *testing.B) {
	cases := []struct {
		name string
		x    backend.Shape
		axes []int
	}{
		{"linear_4160x768", backend.Shape{4160, 768}, []int{0}},
		{"conv_128x16x28x28", backend.Shape{128, 16, 28, 28}, []int{0, 2, 3}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			dev := cpu.New()
			x := benchView(b, dev, c.x)
			kept := backend.Shape{}
			for i, d := range c.x {
				if !slices.Contains(c.axes, i) {
					kept = append(kept, d)
				}
			}
			y := benchView(b, dev, kept)
			b.SetBytes(int64(4 * c.x.NumElements()))
			for b.Loop() {
				if err := dev.Reduce(backend.Sum, y, x, c.axes, backend.ReduceParams{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStridedUnary scales a [B, T, H, d] tensor viewed as [B, H, T, d]
// (attention heads) into a contiguous tensor: runs of d elements.
func BenchmarkStridedUnary(b *testing.B) {
	dev := cpu.New()
	x := benchView(b, dev, backend.Shape{64, 65, 3, 64})
	x.Shape, x.Strides = backend.Shape{64, 3, 65, 64}, []int{65 * 3 * 64, 64, 3 * 64, 1}
	y := benchView(b, dev, x.Shape)
	b.SetBytes(int64(8 * x.NumElements()))
	for b.Loop() {
		if err := dev.Unary(backend.MulScalar, y, x, 0.125); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchNormReLU compares a training step of batch norm and ReLU
// (forward and backward) fused with the two kernels in turn.
func BenchmarkBatchNormReLU(b *testing.B) {
	shape := backend.Shape{64, 64, 32, 32}
	dev := cpu.New()
	x, y, t := benchView(b, dev, shape), benchView(b, dev, shape), benchView(b, dev, shape)
	dy, dx := benchView(b, dev, shape), benchView(b, dev, shape)
	c := backend.Shape{64}
	w, bias, sm, sis, dw, db := benchView(b, dev, c), benchView(b, dev, c), benchView(b, dev, c), benchView(b, dev, c), benchView(b, dev, c), benchView(b, dev, c)
	p := backend.NormParams{Eps: 1e-5, Training: true}
	b.Run("fused", func(b *testing.B) {
		for b.Loop() {
			if err := dev.BatchNormReLU(y, sm, sis, x, w, bias, backend.View{}, backend.View{}, p); err != nil {
				b.Fatal(err)
			}
			if err := dev.BatchNormReLUBackward(dx, dw, db, dy, y, x, w, sm, sis, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pair", func(b *testing.B) {
		for b.Loop() {
			if err := dev.BatchNorm(t, sm, sis, x, w, bias, backend.View{}, backend.View{}, p); err != nil {
				b.Fatal(err)
			}
			if err := dev.Unary(backend.ReLU, y, t, 0); err != nil {
				b.Fatal(err)
			}
			if err := dev.Binary(backend.ReLUGrad, t, dy, y); err != nil {
				b.Fatal(err)
			}
			if err := dev.BatchNormBackward(dx, dw, db, t, x, w, sm, sis, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSGDStep(b *testing.B) {
	for _, n := range []int{1 << 18, 11 << 20} {
		b.Run(backend.Shape{n}.String(), func(b *testing.B) {
			dev := cpu.New()
			s := backend.Shape{n}
			w, g, buf := benchView(b, dev, s), benchView(b, dev, s), benchView(b, dev, s)
			p := backend.SGDParams{LR: 0.01, Momentum: 0.9}
			b.SetBytes(int64(20 * n))
			for b.Loop() {
				if err := dev.SGDStep(w, g, buf, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
