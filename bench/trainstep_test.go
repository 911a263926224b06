package bench_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/bench"
)

func TestMeasureTrainStep(t *testing.T) {
	lin := func(i, o int) int { return i*o + o }
	conv := func(i, o int) int { return 9*i*o + o }
	tests := []struct {
		model  string
		params int
	}{
		{"mlp", lin(784, 256) + lin(256, 256) + lin(256, 10)},
		{"cnn", conv(1, 16) + conv(16, 32) + lin(32*7*7, 64) + lin(64, 10)},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			cfg := bench.TrainStepConfig{Model: tc.model, Batch: 16, Warmup: 1, Steps: 2, Seed: 3}
			r, err := bench.MeasureTrainStep(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != cfg.Model || r.Batch != cfg.Batch || r.Warmup != cfg.Warmup || r.Steps != cfg.Steps {
				t.Errorf("result %+v does not echo config %+v", r, cfg)
			}
			if r.Params != tc.params {
				t.Errorf("%d parameters, want %d", r.Params, tc.params)
			}
			if !(r.Seconds > 0) || math.IsInf(r.ImagesPerSec, 0) {
				t.Fatalf("elapsed %v s, %v img/s", r.Seconds, r.ImagesPerSec)
			}
			if want := float64(cfg.Batch*cfg.Steps) / r.Seconds; math.Abs(r.ImagesPerSec-want) > 1e-9*want {
				t.Errorf("%v img/s, want batch·steps/seconds = %v", r.ImagesPerSec, want)
			}
			if want := 1000 * r.Seconds / float64(cfg.Steps); math.Abs(r.MillisPerStep-want) > 1e-9*want {
				t.Errorf("%v ms/step, want %v", r.MillisPerStep, want)
			}
			// Ten classes and small initial logits: the first loss is near ln 10.
			if math.Abs(r.LossFirst-math.Log(10)) > 0.5 || math.IsNaN(r.LossLast) {
				t.Errorf("losses %v → %v, want the first near ln 10 = %.3f", r.LossFirst, r.LossLast, math.Log(10))
			}
		})
	}
}

func TestMeasureTrainStepErrors(t *testing.T) {
	tests := []bench.TrainStepConfig{
		{Model: "resnet9000", Batch: 4, Steps: 1},
		{Model: "mlp", Batch: 0, Steps: 1},
		{Model: "mlp", Batch: 4, Steps: 0},
		{Model: "mlp", Batch: 4, Warmup: -1, Steps: 1},
	}
	for _, cfg := range tests {
		if _, err := bench.MeasureTrainStep(cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// TestTrainStepSteadyState checks that a step releases everything it makes
// (after the first steps the buffer pool serves every allocation) and that
// the steps train: the loss on the fixed batch goes down.
func TestTrainStepSteadyState(t *testing.T) {
	for _, model := range []string{"mlp", "cnn"} {
		s, err := bench.NewTrainStep(model, 8, 1)
		if err != nil {
			t.Fatal(err)
		}
		first := s.Run()
		s.Run()
		_, before, _ := cpu.Default().PoolStats()
		var last float64
		for range 8 {
			last = s.Run()
		}
		_, after, _ := cpu.Default().PoolStats()
		s.Release()
		if after != before {
			t.Errorf("%s: %d buffer-pool misses over 8 steady-state steps, want 0", model, after-before)
		}
		if !(last < first) {
			t.Errorf("%s: loss %v → %v over 10 steps on one batch, want a decrease", model, first, last)
		}
	}
}

// BenchmarkTrainStep measures one training step (forward, cross-entropy,
// backward, SGD with momentum) of each model at batch 128, reporting
// images per second.
func BenchmarkTrainStep(b *testing.B) {
	for _, model := range []string{"mlp", "cnn"} {
		for _, batch := range []int{128} {
			b.Run(fmt.Sprintf("%s/batch=%d", model, batch), func(b *testing.B) {
				s, err := bench.NewTrainStep(model, batch, 1)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Release()
				for range 3 {
					s.Run()
				}
				steps := 0
				for b.Loop() {
					s.Run()
					steps++
				}
				b.ReportMetric(float64(steps*batch)/b.Elapsed().Seconds(), "img/s")
			})
		}
	}
}
