package cpu

import (
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/flockml/flock/backend"
)

// TestConvScratchReused checks that the im2col scratch and the partial
// weight gradients come from the pool: after a warm-up, a call allocates far
// less than the scratch it uses.
func TestConvScratchReused(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations of its own")
	}
	c := New()
	view := func(s ...int) backend.View { return testView(t, c, 0, s...) }
	x, w, y := view(4, 16, 24, 24), view(16, 16, 3, 3), view(4, 16, 24, 24)
	p := backend.ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 1}
	s, err := convGeometry("test", x, w, y, p)
	if err != nil {
		t.Fatal(err)
	}
	scratchBytes := uint64(s.taps() * s.plan().width * 4)
	kernels := map[string]func() error{
		"forward":         func() error { return c.Conv2d(y, x, w, p) },
		"backward data":   func() error { return c.Conv2dBackwardData(x, y, w, p) },
		"backward weight": func() error { return c.Conv2dBackwardWeight(w, x, y, p) },
	}
	for name, run := range kernels {
		// A collection empties sync.Pools: finish any cycle under way, then
		// keep collections out of the warm-up and the measurement.
		runtime.GC()
		gc := debug.SetGCPercent(-1)
		// Warm up over several calls: one call may run every task on one
		// goroutine, leaving the pool short of what concurrent tasks need.
		for range 5 {
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		const runs = 10
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			if err := run(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		runtime.ReadMemStats(&after)
		debug.SetGCPercent(gc)
		// A call that allocated its scratch would cost at least scratchBytes;
		// an extra scratch now and then, when more tasks run at once than
		// during the warm-up, stays well below half of it per call.
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > scratchBytes/2 {
			t.Errorf("%s: %d bytes allocated per call; the scratch alone is %d", name, per, scratchBytes)
		}
	}
}

// TestConvThreadCountIndependent checks that the three convolution kernels
// give bitwise the same float32 results on 1, 2 and 5 goroutines.
func TestConvThreadCountIndependent(t *testing.T) {
	c := New()
	view := func(seed int, s ...int) backend.View { return testView(t, c, seed, s...) }
	x, w, y := view(1, 6, 24, 12, 12), view(2, 32, 24, 3, 3), view(3, 6, 32, 12, 12)
	p := backend.ConvParams{StrideH: 1, StrideW: 1, PadH: 1, PadW: 1, DilationH: 1, DilationW: 1, Groups: 1}
	run := func(threads int) (fwd, dx, dw []float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(threads))
		out, gx, gw := view(0, 6, 32, 12, 12), view(0, 6, 24, 12, 12), view(0, 32, 24, 3, 3)
		if err := c.Conv2d(out, x, w, p); err != nil {
			t.Fatal(err)
		}
		if err := c.Conv2dBackwardData(gx, y, w, p); err != nil {
			t.Fatal(err)
		}
		if err := c.Conv2dBackwardWeight(gw, x, y, p); err != nil {
			t.Fatal(err)
		}
		return F32(out), F32(gx), F32(gw)
	}
	f1, x1, w1 := run(1)
	for _, threads := range []int{2, 5} {
		f, dx, dw := run(threads)
		for name, pair := range map[string][2][]float32{"forward": {f1, f}, "data gradient": {x1, dx}, "weight gradient": {w1, dw}} {
			for i := range pair[0] {
				if pair[0][i] != pair[1][i] {
					t.Fatalf("%s on %d goroutines: element %d is %v, on 1 it is %v", name, threads, i, pair[1][i], pair[0][i])
				}
			}
		}
	}
}

// testView returns a float32 view of the given shape from c, freed when
// the test ends, filled from seed (all zero for seed 0).
func testView(t *testing.T, c *Backend, seed int, s ...int) backend.View {
	t.Helper()
	shape := backend.Shape(s)
	buf, err := c.Alloc(shape.NumElements() * 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(buf) })
	v := backend.Contiguous(buf, backend.Float32, shape)
	data := F32(v)
	for i := range data {
		data[i] = 0
		if seed != 0 {
			data[i] = float32((i*7919+seed)%1009)/1009 - 0.5
		}
	}
	return v
}

// TestConvWeightSplitColumns checks the weight gradient of convolutions
// with too few channels to share among goroutines (a stem's 3), whose
// columns are cut into runs summed apart, against a direct sum, and that
// it is bitwise the same on 1, 2 and 5 goroutines.
func TestConvWeightSplitColumns(t *testing.T) {
	c := New()
	const n, ci, h, o, k, stride, pad = 3, 3, 64, 8, 7, 2, 3
	oh := (h+2*pad-k)/stride + 1
	x, dy := testView(t, c, 1, n, ci, h, h), testView(t, c, 2, n, o, oh, oh)
	p := backend.ConvParams{StrideH: stride, StrideW: stride, PadH: pad, PadW: pad, DilationH: 1, DilationW: 1, Groups: 1}
	s, err := convGeometry("test", x, testView(t, c, 0, o, ci, k, k), dy, p)
	if err != nil {
		t.Fatal(err)
	}
	if pl := s.plan(); !(s.groups*s.cg < convWeightSplitChannels && pl.blocks >= convWeightParts) {
		t.Fatalf("the shape does not cut its columns: %d channels, %d blocks", s.cg, pl.blocks)
	}
	xs, dys := F32(x), F32(dy)
	want := make([]float64, o*ci*k*k)
	for b := range n {
		for oc := range o {
			for i := range oh {
				for j := range oh {
					g := float64(dys[((b*o+oc)*oh+i)*oh+j])
					for cc := range ci {
						for kh := range k {
							for kw := range k {
								ih, iw := i*stride-pad+kh, j*stride-pad+kw
								if ih >= 0 && ih < h && iw >= 0 && iw < h {
									want[((oc*ci+cc)*k+kh)*k+kw] += g * float64(xs[((b*ci+cc)*h+ih)*h+iw])
								}
							}
						}
					}
				}
			}
		}
	}
	var first []float32
	for _, threads := range []int{1, 2, 5} {
		prev := runtime.GOMAXPROCS(threads)
		dw := testView(t, c, 0, o, ci, k, k)
		err := c.Conv2dBackwardWeight(dw, x, dy, p)
		runtime.GOMAXPROCS(prev)
		if err != nil {
			t.Fatal(err)
		}
		got := F32(dw)
		for i, v := range want {
			if d := math.Abs(float64(got[i]) - v); d > 1e-4*(1+math.Abs(v)) {
				t.Fatalf("%d goroutines: dw[%d] = %v, want %v", threads, i, got[i], v)
			}
		}
		if first == nil {
			first = append([]float32(nil), got...)
		} else if !slices.Equal(first, got) {
			t.Fatalf("%d goroutines: not bitwise the result on 1", threads)
		}
	}
}
