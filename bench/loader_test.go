package bench_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/bench"
)

// TestMeasureLoader measures a few batches of FFCV's JPEG test file with
// each pipeline and checks the record's arithmetic.
func TestMeasureLoader(t *testing.T) {
	file := filepath.Join("..", "testdata", "ffcv", "jpeg_q90_max256.beton")
	for _, dec := range []string{bench.DecoderRRC, bench.DecoderCenter} {
		res, err := bench.MeasureLoader(context.Background(), bench.LoaderConfig{File: file, Decoder: dec, Size: 64, BatchSize: 8, Workers: 2, Warmup: 2, Batches: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Impl != bench.ImplFlock || res.Images != 80 || res.Workers != 2 || res.Seconds <= 0 || res.FirstBatchS <= 0 || res.PeakRSSMB <= 0 {
			t.Fatalf("%s: record %+v", dec, res)
		}
		if math.Abs(res.ImagesPerSec-80/res.Seconds) > 1e-9*res.ImagesPerSec || math.Abs(res.PerWorker-res.ImagesPerSec/2) > 1e-9*res.PerWorker {
			t.Errorf("%s: rates %v, %v for 80 images in %v s", dec, res.ImagesPerSec, res.PerWorker, res.Seconds)
		}
		if !(res.P50S > 0 && res.P50S <= res.P99S) {
			t.Errorf("%s: percentiles p50 %v p99 %v", dec, res.P50S, res.P99S)
		}
	}
	raw := filepath.Join("..", "testdata", "ffcv", "fmnist_500_ndarray.beton")
	if _, err := bench.MeasureLoader(context.Background(), bench.LoaderConfig{File: raw, Decoder: bench.DecoderRaw, BatchSize: 100, Workers: 1, Batches: 7}); err != nil {
		t.Fatal(err)
	}
	_, err := bench.MeasureLoader(context.Background(), bench.LoaderConfig{File: raw, Decoder: bench.DecoderRRC, Size: 8, BatchSize: 10, Workers: 1, Batches: 1})
	if err == nil || !strings.Contains(err.Error(), "RandomResizedCrop cannot read a ndarray field") {
		t.Errorf("rrc on arrays: %v", err)
	}
}

// TestSummarizeLoader checks the round-by-round ratios and the exclusion
// of the warm-up round.
func TestSummarizeLoader(t *testing.T) {
	r := func(impl string, pair, workers int, perWorker, perCPU float64) bench.LoaderResult {
		return bench.LoaderResult{Impl: impl, Pair: pair, WarmupPair: pair == 0, Workers: workers, PerWorker: perWorker, PerCPUSecond: perCPU, AllocsPerBatch: float64(pair)}
	}
	sums := bench.SummarizeLoader([]bench.LoaderResult{
		r("flock", 0, 1, 1000, 1), r("torch", 0, 1, 1, 1),
		r("flock", 1, 1, 300, 600), r("torch", 1, 1, 200, 300),
		r("flock", 2, 1, 330, 700), r("torch", 2, 1, 300, 350),
		r("flock", 1, 2, 100, 100), r("torch", 1, 2, 50, 25),
	}, "torch")
	if len(sums) != 2 || sums[0].Workers != 1 || sums[1].Workers != 2 {
		t.Fatalf("summaries %+v", sums)
	}
	s := sums[0]
	if s.Ratio.N != 2 || math.Abs(s.Ratio.Min-1.1) > 1e-12 || math.Abs(s.Ratio.Max-1.5) > 1e-12 || s.CPURatio.Median != 2 {
		t.Errorf("ratios %+v, per CPU-s %+v", s.Ratio, s.CPURatio)
	}
	if s.Flock.PerWorker.Median != 315 || s.Flock.AllocsPerBatch != 1.5 || sums[1].Ratio.Median != 2 {
		t.Errorf("figures %+v, %+v", s.Flock, sums[1])
	}
	var b strings.Builder
	if err := bench.WriteLoaderTable(&b, sums, "torch"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| 1 | 315 (300–330) | 250 (200–300) | 1.30 (1.10–1.50) |") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestLoaderSummaryRecordWithoutCPURatio: a peer whose runs measured no
// CPU time (too short for the clock's ticks) leaves the per-CPU-second
// ratio without figures; the summary record still encodes as JSON.
func TestLoaderSummaryRecordWithoutCPURatio(t *testing.T) {
	res := []bench.LoaderResult{
		{Impl: bench.ImplFlock, Workers: 1, Pair: 1, PerWorker: 100, PerCPUSecond: 90},
		{Impl: bench.ImplTorch, Workers: 1, Pair: 1, PerWorker: 50},
	}
	sums := bench.SummarizeLoader(res, bench.ImplTorch)
	if len(sums) != 1 || sums[0].CPURatio.N != 0 || sums[0].Ratio.N != 1 {
		t.Fatalf("summaries %+v, want one with a ratio of images/s and none per CPU-second", sums)
	}
	b, err := json.Marshal(sums[0].Record(bench.ImplTorch))
	if err != nil {
		t.Fatalf("summary record: %v", err)
	}
	if !strings.Contains(string(b), `"ratio_flock_torch_per_cpu_s":null`) || !strings.Contains(string(b), `"ratio_flock_torch":{`) {
		t.Errorf("summary record %s: want the ratio of images/s and a null per-CPU-second ratio", b)
	}
}
