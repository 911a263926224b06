package cuda_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
)

// The benchmarks of this file need a GPU; bench/gpu/run.sh runs them and
// sets them beside their ceilings (the device-to-device copy bandwidth, the
// matrix products of PyTorch) and beside PyTorch's training steps.

func benchGPU(b *testing.B) *cuda.Backend {
	b.Helper()
	if ok, err := cuda.Available(); !ok {
		b.Skipf("needs a GPU: %v", err)
	}
	g, err := cuda.New(0, cuda.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func sync(b *testing.B, g *cuda.Backend) {
	if err := g.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

func view(b *testing.B, g *cuda.Backend, dt backend.DType, shape ...int) backend.View {
	s := backend.Shape(shape)
	buf, err := g.Alloc(s.NumElements() * dt.Size())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Free(buf) })
	v := backend.Contiguous(buf, dt, s)
	if err := g.Fill(v, 1); err != nil {
		b.Fatal(err)
	}
	return v
}

// memoryElems is the element count of the memory-bound benchmarks: 64 Mi
// float32s, 256 MiB, far beyond any cache.
const memoryElems = 64 << 20

// BenchmarkMemory measures the bandwidth (bytes read plus written per
// second) of the copy ceiling and of elementwise and reduction kernels.
func BenchmarkMemory(b *testing.B) {
	g := benchGPU(b)
	n := memoryElems
	x, y, z := view(b, g, backend.Float32, n), view(b, g, backend.Float32, n), view(b, g, backend.Float32, n)
	rows := view(b, g, backend.Float32, n/1024, 1024)
	rowsOut := view(b, g, backend.Float32, n/1024, 1024)
	sum := view(b, g, backend.Float32, n/1024)
	half := view(b, g, backend.BFloat16, n)
	total := view(b, g, backend.Float32)
	cases := []struct {
		name  string
		bytes int
		run   func() error
	}{
		{"copy_d2d", 8 * n, func() error { return g.Copy(y, x) }},
		{"copy_kernel_f32_to_bf16", 6 * n, func() error { return g.Copy(half, x) }},
		{"unary_exp", 8 * n, func() error { return g.Unary(backend.Exp, y, x, 0) }},
		{"binary_add", 12 * n, func() error { return g.Binary(backend.Add, z, x, y) }},
		{"reduce_sum_rows", 4 * n, func() error { return g.Reduce(backend.Sum, sum, rows, []int{1}, backend.ReduceParams{}) }},
		{"reduce_sum_all", 4 * n, func() error { return g.Reduce(backend.Sum, total, x, []int{0}, backend.ReduceParams{}) }},
		{"softmax_rows", 8 * n, func() error { return g.Softmax(rowsOut, rows, 1, false) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			if err := c.run(); err != nil {
				b.Fatal(err)
			}
			sync(b, g)
			b.SetBytes(int64(c.bytes))
			b.ResetTimer()
			for range b.N {
				if err := c.run(); err != nil {
					b.Fatal(err)
				}
			}
			sync(b, g)
		})
	}
}

// BenchmarkMatMul measures square products (4096³ by default, or
// FLOCK_GPU_MATMUL_N) in float32, TF32 and bf16 autocast, reporting TFLOP/s.
func BenchmarkMatMul(b *testing.B) {
	g := benchGPU(b)
	n := 4096
	if s := os.Getenv("FLOCK_GPU_MATMUL_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	old := g.Options()
	defer g.SetOptions(old)
	x, y, z := view(b, g, backend.Float32, n, n), view(b, g, backend.Float32, n, n), view(b, g, backend.Float32, n, n)
	for _, c := range []struct {
		name string
		opts cuda.Options
	}{
		{"fp32", cuda.Options{}},
		{"tf32", cuda.Options{TF32: true}},
		{"bf16_autocast", cuda.Options{Autocast: backend.BFloat16}},
	} {
		b.Run(fmt.Sprintf("%s_%d", c.name, n), func(b *testing.B) {
			if err := g.SetOptions(c.opts); err != nil {
				b.Fatal(err)
			}
			run := func() {
				if err := g.MatMul(z, x, y, backend.MatMulParams{Alpha: 1}); err != nil {
					b.Fatal(err)
				}
			}
			run()
			sync(b, g)
			b.ResetTimer()
			for range b.N {
				run()
			}
			sync(b, g)
			b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
		})
	}
}

// BenchmarkModelStep measures training steps (forward, backward, SGD) of
// the models in FLOCK_GPU_MODELS (default resnet50,vit_base_p16) at batch
// FLOCK_GPU_BATCH (default 128) on 224×224 images with 1000 classes, with
// bf16 autocast unless FLOCK_GPU_AUTOCAST=off, reporting images per second.
func BenchmarkModelStep(b *testing.B) {
	g := benchGPU(b)
	names := "resnet50,vit_base_p16"
	if s := os.Getenv("FLOCK_GPU_MODELS"); s != "" {
		names = s
	}
	batch := 128
	if s := os.Getenv("FLOCK_GPU_BATCH"); s != "" {
		batch, _ = strconv.Atoi(s)
	}
	opts := cuda.Options{TF32: true, Autocast: backend.BFloat16}
	if os.Getenv("FLOCK_GPU_AUTOCAST") == "off" {
		opts.Autocast = backend.Invalid
	}
	old := g.Options()
	defer g.SetOptions(old)
	if err := g.SetOptions(opts); err != nil {
		b.Fatal(err)
	}
	prev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(g)
	defer tensor.SetDefaultDevice(prev)
	known := map[string]bool{}
	for _, n := range models.Names() {
		known[n] = true
	}
	for _, name := range strings.Split(names, ",") {
		b.Run(fmt.Sprintf("%s_b%d", name, batch), func(b *testing.B) {
			if !known[name] {
				b.Skipf("model %s is not registered in nn/models (have %v)", name, models.Names())
			}
			s, err := bench.NewModelStep(name, models.Config{InChannels: 3, Height: 224, Width: 224, NumClasses: 1000}, batch, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Release()
			for range 3 {
				s.Run()
			}
			sync(b, g)
			b.ResetTimer()
			for range b.N {
				s.Run()
			}
			sync(b, g)
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "img/s")
		})
	}
}
