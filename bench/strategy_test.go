package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/dist"
)

// TestRunStrategySteps runs the step measurement of the MLP at a tiny size:
// both Trainers take the same steps (equal losses), Local never
// synchronizes, and the summary has the measured pair only.
func TestRunStrategySteps(t *testing.T) {
	cfg := bench.StrategyStepsConfig{Model: "mlp", Batch: 8, Image: 28, Channels: 1, Classes: 10, Steps: 2, Pairs: 1, Seed: 1}
	var emitted int
	ms, err := bench.RunStrategySteps(context.Background(), cfg, func(bench.StrategyStepsMeasurement) { emitted++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 || emitted != 4 {
		t.Fatalf("%d measurements, %d emitted, want 4", len(ms), emitted)
	}
	for i, m := range ms {
		impl := []string{bench.ImplSingle, bench.ImplLocal}[i%2]
		if m.Record != "steps" || m.Impl != impl || m.Pair != i/2 || m.WarmupPair != (i < 2) || m.FirstStep != 2*(i/2) ||
			m.Steps != 2 || m.Params != 269322 || !(m.MsPerStep > 0) || !(m.ImagesPerSec > 0) || m.Syncs != 0 {
			t.Errorf("measurement %d: %+v", i, m)
		}
		if i%2 == 1 && m.TrainLoss != ms[i-1].TrainLoss {
			t.Errorf("pair %d: local's loss %v, single's %v: want the same steps", m.Pair, m.TrainLoss, ms[i-1].TrainLoss)
		}
	}
	if !strings.HasPrefix(ms[1].Strategy, "Local SGD") {
		t.Errorf("local strategy %q", ms[1].Strategy)
	}
	s := bench.SummarizeStrategySteps(ms)
	if s.Single.N != 1 || s.Local.N != 1 || s.Ratio.N != 1 || s.Ratio.Median != ms[2].MsPerStep/ms[3].MsPerStep {
		t.Errorf("summary %+v", s)
	}
	var b bytes.Buffer
	if err := bench.WriteStrategyStepsTable(&b, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| mlp | 269322 | 8 | 2 |") || !strings.Contains(b.String(), "single/local") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestRunStrategyStepsErrors(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []bench.StrategyStepsConfig{
		{Model: "mlp", Batch: 0, Image: 28, Channels: 1, Classes: 10, Steps: 1},
		{Model: "mlp", Batch: 8, Image: 28, Channels: 1, Classes: 10, Steps: 0},
		{Model: "resnet9000", Batch: 8, Image: 28, Channels: 1, Classes: 10, Steps: 1},
	} {
		if _, err := bench.RunStrategySteps(ctx, cfg, nil); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}

// TestStrategySyncWorker runs two ranks of the synchronization measurement
// in this process and checks what rank 0 reports.
func TestStrategySyncWorker(t *testing.T) {
	cfg := bench.StrategySyncWorkerConfig{Model: "mlp", Image: 8, Channels: 1, Classes: 10, Warmup: 1, Iters: 2, Pairs: 1, Seed: 1}
	const params = 8*8*256 + 256 + 256*256 + 256 + 256*10 + 10
	comms := dist.NewLocal(2)
	outs := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = bench.StrategySyncWorker(context.Background(), c, cfg, &outs[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if outs[1].Len() > 0 {
		t.Errorf("rank 1 wrote %q", outs[1].String())
	}
	dec := json.NewDecoder(&outs[0])
	var samples []bench.AllReduceSample
	for dec.More() {
		var s bench.AllReduceSample
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	if len(samples) != 4 {
		t.Fatalf("%d samples, want 4 (2 pairs × 2 kinds): %+v", len(samples), samples)
	}
	for i, s := range samples {
		impl := []string{bench.ImplLocalSync, bench.ImplAllReduce}[i%2]
		if s.Impl != impl || s.NProc != 2 || s.Bytes != 4*params || len(s.Seconds) != 2 || !(s.Seconds[0] > 0) {
			t.Errorf("sample %d: %+v, want %s over 2 ranks of %d bytes with 2 timings", i, s, impl, 4*params)
		}
	}
}

func TestStrategySyncErrors(t *testing.T) {
	ctx := context.Background()
	good := bench.StrategySyncWorkerConfig{Model: "mlp", Image: 8, Channels: 1, Classes: 10, Iters: 1, Pairs: 1}
	bad := good
	bad.Iters = 0
	if err := bench.StrategySyncWorker(ctx, dist.NewLocal(1)[0], bad, nil); err == nil || !strings.Contains(err.Error(), "iters 0") {
		t.Errorf("no iters: %v", err)
	}
	unknown := good
	unknown.Model = "resnet9000"
	if err := bench.StrategySyncWorker(ctx, dist.NewLocal(1)[0], unknown, nil); err == nil || !strings.Contains(err.Error(), "resnet9000") {
		t.Errorf("unknown model: %v", err)
	}
	if _, err := bench.RunStrategySync(ctx, bench.StrategySyncConfig{StrategySyncWorkerConfig: good, NProc: 2}, nil); err == nil {
		t.Error("no worker command: no error")
	}
	if _, err := bench.RunStrategySync(ctx, bench.StrategySyncConfig{StrategySyncWorkerConfig: good, NProc: 0, Flock: []string{"x"}}, nil); err == nil {
		t.Error("no processes: no error")
	}
}

// TestSummarizeStrategySync checks that the warm-up pair is left out and
// the ratio is taken pair by pair.
func TestSummarizeStrategySync(t *testing.T) {
	var ms []bench.StrategySyncMeasurement
	bw := [][2]float64{{0.1, 1}, {0.9, 1}, {1.5, 2}, {3, 4}}
	for pair, b := range bw {
		for k, impl := range []string{bench.ImplLocalSync, bench.ImplAllReduce} {
			m := bench.StrategySyncMeasurement{Record: "sync", Model: "resnet18"}
			m.Impl, m.NProc, m.Bytes, m.Transport = impl, 2, 44_696_360, "shm"
			m.BusBW, m.Pair, m.WarmupPair = b[k], pair, pair == 0
			ms = append(ms, m)
		}
	}
	s := bench.SummarizeStrategySync(ms)
	if s.Sync.N != 3 || s.AllReduce.N != 3 || s.Ratio.N != 3 || s.Ratio.Median != 0.75 || s.Ratio.Min != 0.75 || s.Ratio.Max != 0.9 ||
		s.Sync.Median != 1.5 || s.AllReduce.Median != 2 || s.NProc != 2 || s.Model != "resnet18" {
		t.Errorf("summary %+v", s)
	}
	var b bytes.Buffer
	if err := bench.WriteStrategySyncTable(&b, s); err != nil {
		t.Fatal(err)
	}
	want := "| resnet18 | 2 | shm | 44.70 MB | 1.500 (0.900–3.000) | 2.000 (1.000–4.000) | 0.750 (0.750–0.900) | ≥ 0.90 missed | 3 |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("table:\n%s\nwant the row\n%s", b.String(), want)
	}
	if none := bench.SummarizeStrategySync(ms[:2]); none.Ratio.N != 0 || !math.IsNaN(none.Ratio.Median) {
		t.Errorf("warm-up pair only: %+v", none)
	}
}
