package bench_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/tensor"
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

// TestMeasureModelStepProfile checks a profiled step of the small CNN: its
// kernel calls per step (two convolutions forward, each with its weight
// gradient; the first has no input gradient), the same losses as an
// unprofiled step, a table naming them, and the default device restored.
func TestMeasureModelStepProfile(t *testing.T) {
	dev := tensor.DefaultDevice()
	cfg := bench.ModelStepConfig{Model: "cnn", Batch: 4, Image: 28, Channels: 1, Classes: 10, Warmup: 1, Steps: 2, Seed: 1}
	plain, err := bench.MeasureModelStep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Profile = true
	r, err := bench.MeasureModelStep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tensor.DefaultDevice() != dev {
		t.Errorf("default device %v after a profiled step, want %v back", tensor.DefaultDevice(), dev)
	}
	if r.LossFirst != plain.LossFirst || r.LossLast != plain.LossLast {
		t.Errorf("profiled losses %v, %v; unprofiled %v, %v", r.LossFirst, r.LossLast, plain.LossFirst, plain.LossLast)
	}
	calls := map[string]float64{}
	for _, p := range r.Profile {
		calls[p.Op] = p.CallsPerStep
		if p.MsPerStep < 0 {
			t.Errorf("%s: %v ms", p.Op, p.MsPerStep)
		}
	}
	for op, want := range map[string]float64{
		"Conv2d 4×1×28×28 * 16×1×3×3":               1,
		"Conv2dBackwardWeight 4×1×28×28 * 16×1×3×3": 1,
		"Conv2dBackwardData 4×1×28×28 * 16×1×3×3":   0,
		"Conv2dBackwardData 4×16×14×14 * 32×16×3×3": 1,
	} {
		if calls[op] != want {
			t.Errorf("%s: %v calls per step, want %v", op, calls[op], want)
		}
	}
	var b strings.Builder
	if err := bench.WriteProfile(&b, r, 3); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "| kernel call |") || !strings.Contains(out, "other kinds") || strings.Count(out, "\n| ") != 5 {
		t.Errorf("profile table with 3 rows and the rest:\n%s", out)
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

// fakeModelStep stands in for a measurement command, run by /bin/sh: it
// reports the model and batch it is given, a step of $1 ms and, for a
// peer ($2 not empty), that version and 2 s of compilation but no FLOPs.
const fakeModelStep = `ms=$1; peer=$2; shift 2
while [ $# -gt 0 ]; do case $1 in --model) model=$2;; --batch) batch=$2;; esac; shift; done
echo "log line"
if [ -z "$peer" ]; then
  echo "{\"model\":\"$model\",\"batch\":$batch,\"step_ms\":$ms,\"img_per_s\":$((batch * 1000 / ms)),\"forward_flops\":1e6,\"step_flops\":3e6,\"gflops\":1.2,\"peak_rss_bytes\":1024}"
else
  echo "{\"model\":\"$model\",\"batch\":$batch,\"step_ms\":$ms,\"img_per_s\":$((batch * 1000 / ms)),\"version\":\"$peer\",\"compile_s\":2}"
fi
`

// TestRunModelComparison runs a comparison of fake commands: rounds, the
// peer's FLOPs taken from flock's, the fraction of peak, and the summary's
// ratio and table.
func TestRunModelComparison(t *testing.T) {
	t.Parallel()
	cfg := bench.ModelComparison{
		Models: []string{"cnn", "mlp"}, Pairs: 2, Peers: []string{bench.ImplTorch2Compile},
		Step:         bench.ModelStepConfig{Batch: 8, Image: 28, Channels: 1, Classes: 10, Warmup: 1, Steps: 2},
		Flock:        []string{"/bin/sh", "-c", fakeModelStep, "fake", "10", ""},
		PeerCommands: map[string][]string{bench.ImplTorch2Compile: {"/bin/sh", "-c", fakeModelStep, "fake", "20", "2.fake"}},
		Peak:         24,
	}
	var emitted int
	ms, err := bench.RunModelComparison(context.Background(), cfg, func(bench.ModelMeasurement) { emitted++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3*2*2 || emitted != len(ms) {
		t.Fatalf("%d measurements, %d emitted, want 12", len(ms), emitted)
	}
	for i, m := range ms {
		impl := []string{bench.ImplFlock, bench.ImplTorch2Compile}[i%2]
		if m.Impl != impl || m.Round != i/4 || m.Warmup != (i < 4) || m.Model != cfg.Models[i/2%2] || m.StepFLOPs != 3e6 {
			t.Errorf("measurement %d: %+v", i, m)
		}
		// flock reports 1.2 GFLOP/s; the peer's is flock's 3 MFLOP per
		// image, 8 images in 20 ms: 1.2 too, against a peak of 24.
		if math.Abs(m.GFLOPS-1.2) > 1e-9 || math.Abs(m.PeakFraction-1.2/24) > 1e-9 {
			t.Errorf("measurement %d: %v GFLOP/s, %v of peak, want 1.2 and 0.05", i, m.GFLOPS, m.PeakFraction)
		}
	}
	sums := bench.SummarizeModels(ms, cfg.Models, cfg.Peers)
	if len(sums) != 2 || len(sums[0].Peers) != 1 {
		t.Fatalf("summaries %+v", sums)
	}
	p := sums[0].Peers[0]
	if p.Ratio.N != 2 || p.Ratio.Median != 2 || p.CompileS != 2 || p.Version != "2.fake" || sums[0].Flock.ImagesPerSec.N != 2 {
		t.Errorf("summary of cnn %+v", sums[0])
	}
	var b strings.Builder
	if err := bench.WriteModelTable(&b, sums, cfg.Peers, cfg.Peak, "given"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| cnn | torch2-compile | 0 | 400.0 (400.0–400.0) |", " 2.00 (2.00–2.00) |", "Peak: 24 GFLOP/s (given).", "cnn torch2-compile: torch.compile took 2.0 s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRunModelComparisonFailure(t *testing.T) {
	t.Parallel()
	cfg := bench.ModelComparison{Models: []string{"cnn"}, Step: bench.ModelStepConfig{Batch: 1, Steps: 1}, Flock: []string{"/bin/sh", "-c", "exit 3"}}
	_, err := bench.RunModelComparison(context.Background(), cfg, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "flock cnn: /bin/sh -c exit 3") {
		t.Errorf("error %v, want one naming the implementation, the model and the command", err)
	}
}
