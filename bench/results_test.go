package bench_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/bench"
)

func TestMachineRecord(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := bench.MachineRecord([]string{"flock", "bench", "gemm", "--rounds", "3"}, start, map[string]any{"rounds": 3})
	for k, want := range map[string]any{"record": "machine", "command": "flock bench gemm --rounds 3", "start": "2026-03-04T05:06:07Z", "rounds": 3} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v", k, rec[k], want)
		}
	}
	for _, k := range []string{"nproc", "gomaxprocs", "go", "goarch", "cpu_model", "loadavg"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("no %s in %v", k, rec)
		}
	}
}

// TestResultsWrite writes each benchmark's results and checks the files:
// their names, one JSON line per record, and the report's title, command
// and table.
func TestResultsWrite(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	machine := func(name string, settings map[string]any) map[string]any {
		return bench.MachineRecord([]string{"flock", "bench", name}, start, settings)
	}
	ar := bench.AllReduceConfig{Pairs: 1, Warmup: 1, Iters: 2}
	arMs := []bench.AllReduceMeasurement{
		{Record: "allreduce", AllReduceSample: bench.AllReduceSample{Impl: bench.ImplFlock, NProc: 2, Bytes: 4096}, BusBW: 1, Pair: 0, WarmupPair: true},
		{Record: "allreduce", AllReduceSample: bench.AllReduceSample{Impl: bench.ImplFlock, NProc: 2, Bytes: 4096}, BusBW: 2, Pair: 1},
	}
	gemm := bench.GemmConfig{Threads: []int{1}, Rounds: 1, MinTime: time.Millisecond}
	gemmMs := []bench.GemmMeasurement{{Record: "gemm", Impl: bench.ImplFlock, M: 8, K: 8, N: 8, Threads: 1, GFLOPS: 3, Round: 1}}
	loader := bench.LoaderComparison{Workers: []int{1}, Pairs: 1}
	loaderRun := bench.LoaderConfig{File: "x.beton", Decoder: bench.DecoderRRC, Size: 16, BatchSize: 4, Batches: 2}
	loaderMs := []bench.LoaderResult{{Record: "run", Impl: bench.ImplFlock, Workers: 1, PerWorker: 10, PerCPUSecond: 9, Pair: 1}}
	model := bench.ModelComparison{Models: []string{"cnn"}, Pairs: 1, Peak: 100, PeakEstimate: "given"}
	modelMs := []bench.ModelMeasurement{{Impl: bench.ImplFlock, Round: 1, ModelStepResult: bench.ModelStepResult{Model: "cnn", ImagesPerSec: 5}}}
	steps := bench.StrategyStepsConfig{Model: "mlp", Batch: 4, Steps: 1, Pairs: 1}
	stepsMs := []bench.StrategyStepsMeasurement{
		{Record: "steps", Impl: bench.ImplSingle, Model: "mlp", MsPerStep: 2, Pair: 1},
		{Record: "steps", Impl: bench.ImplLocal, Model: "mlp", MsPerStep: 2, Pair: 1},
	}
	for _, c := range []struct {
		name, title, table string
		res                interface{ Write(string) error }
		records            int
	}{
		{"allreduce", "# All-reduce bus bandwidth (2026-03-04)", "| 2 | 4KiB |",
			bench.AllReduceResults{Machine: machine("allreduce", ar.MachineSettings()), Start: start, Config: ar, Measurements: arMs,
				Summaries: bench.SummarizeAllReduce(arMs, "")}, 1 + 2 + 1},
		{"gemm", "# SGEMM GFLOP/s (2026-03-04)", "| 8x8x8 | 1 |",
			bench.GemmResults{Machine: machine("gemm", gemm.MachineSettings(nil)), Start: start, Config: gemm, Measurements: gemmMs,
				Summaries: bench.SummarizeGemm(gemmMs, "")}, 1 + 1 + 1},
		{"loader", "# Data loader throughput (2026-03-04)", "| 1 | 10 (10–10) |",
			bench.LoaderResults{Machine: machine("loader", loader.MachineSettings(loaderRun)), Start: start, Config: loader, Measurements: loaderMs,
				Summaries: bench.SummarizeLoader(loaderMs, "")}, 1 + 1 + 1},
		{"model", "# Training steps of models (2026-03-04)", "| cnn | flock |",
			bench.ModelResults{Machine: machine("model", model.MachineSettings()), Start: start, Config: model, Measurements: modelMs,
				Summaries: bench.SummarizeModels(modelMs, model.Models, nil)}, 1 + 1 + 1},
		{"strategy", "# Cost of Local SGD (2026-03-04)", "| mlp | 0 | 0 | 0 | 2.00 (2.00–2.00) |",
			bench.StrategyResults{Machine: machine("strategy", bench.StrategyConfig{Steps: &steps}.MachineSettings()), Start: start,
				Config: bench.StrategyConfig{Steps: &steps}, Steps: stepsMs}, 1 + 2 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "results")
			if err := c.res.Write(dir); err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(dir, c.name+"_2026-03-04")
			f, err := os.Open(base + ".jsonl")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lines := 0
			for sc := bufio.NewScanner(f); sc.Scan(); lines++ {
				if lines == 0 && !strings.Contains(sc.Text(), `"record":"machine"`) {
					t.Errorf("first record %s, want the machine record", sc.Text())
				}
			}
			if lines != c.records {
				t.Errorf("%d records, want %d", lines, c.records)
			}
			md, err := os.ReadFile(base + ".md")
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{c.title, "```\nflock bench " + c.name + "\n```", c.table, "## Setup", "- Records: `" + c.name + "_2026-03-04.jsonl`."} {
				if !strings.Contains(string(md), want) {
					t.Errorf("report lacks %q:\n%s", want, md)
				}
			}
		})
	}
}
