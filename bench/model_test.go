package bench_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/bench"
)

func TestMeasureModelStep(t *testing.T) {
	cfg := bench.ModelStepConfig{Model: "cnn", Batch: 4, Image: 28, Channels: 1, Classes: 10, Warmup: 1, Steps: 3, Seed: 1}
	r, err := bench.MeasureModelStep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The small CNN's multiply-adds per image: two 3×3 convolutions and two
	// linear layers. Backward computes the input and weight gradients of
	// each (twice the forward), except the input gradient of the first
	// convolution, which nothing needs since the images are constants.
	fwd := 2.0 * (28*28*16*1*9 + 14*14*32*16*9 + 1568*64 + 64*10)
	if r.ForwardFLOPs != fwd {
		t.Errorf("forward FLOPs per image %v, want %v", r.ForwardFLOPs, fwd)
	}
	firstConv := 2.0 * 28 * 28 * 16 * 9
	if want := 3*fwd - firstConv; r.StepFLOPs != want {
		t.Errorf("step FLOPs per image %v, want %v", r.StepFLOPs, want)
	}
	for name, v := range map[string]float64{"forward": r.ForwardMs, "backward": r.BackwardMs, "optimizer": r.OptimizerMs, "step": r.StepMs} {
		if !(v > 0) {
			t.Errorf("%s median %v ms, want > 0", name, v)
		}
	}
	if want := float64(cfg.Batch) / (r.StepMs / 1000); math.Abs(r.ImagesPerSec-want) > 1e-9*want {
		t.Errorf("%v img/s, want batch / step time = %v", r.ImagesPerSec, want)
	}
	if r.PeakRSS <= 0 {
		t.Errorf("peak RSS %d", r.PeakRSS)
	}
	if _, err := bench.MeasureModelStep(bench.ModelStepConfig{Model: "cnn", Batch: 2, Image: 30, Channels: 1, Classes: 10, Steps: 1}); err == nil {
		t.Error("cnn on 30×30 images: no error")
	}
}

func TestMedian(t *testing.T) {
	if m := bench.Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3 1 2 = %v", m)
	}
	if m := bench.Median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4 1 2 3 = %v", m)
	}
	if m := bench.Median(nil); !math.IsNaN(m) {
		t.Errorf("median of nothing = %v", m)
	}
}
