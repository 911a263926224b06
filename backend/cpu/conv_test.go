package cpu

import (
	"runtime"
	"runtime/debug"
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
	view := func(s ...int) backend.View {
		shape := backend.Shape(s)
		buf, err := c.Alloc(shape.NumElements() * 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Free(buf) })
		v := backend.Contiguous(buf, backend.Float32, shape)
		clear(F32(v))
		return v
	}
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
