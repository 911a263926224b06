package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/internal/peers"
)

func TestBenchModelUsage(t *testing.T) {
	runCLICases(t, []cliCase{
		{"listed", []string{"bench", "--help"}, exitOK, []string{"model", "allreduce"}, nil, false},
		{"help", []string{"bench", "model", "--help"}, exitOK, []string{"Usage: flock bench model", "-peer PEER", "-image SIDE"}, nil, false},
		{"bad batch", []string{"bench", "model", "--batch", "0"}, exitUsage, nil, []string{"batch 0"}, false},
		{"unknown peer", []string{"bench", "model", "--peer", "jax"}, exitUsage, nil, []string{`unknown peer "jax"`, "torch2-compile"}, false},
		{"unknown peer in a list", []string{"bench", "model", "--peer", "torch2,tf"}, exitUsage, nil, []string{`unknown peer "tf"`}, false},
		{"peer twice", []string{"bench", "model", "--peer", "torch2,torch2"}, exitUsage, nil, []string{`peer "torch2" given twice`}, false},
		{"stray argument", []string{"bench", "model", "resnet18"}, exitUsage, nil, []string{`unexpected argument "resnet18"`}, false},
		{"missing peer script", []string{"bench", "model", "--peer", "torch", "--peer-script", "/nonexistent/p.py"}, exitFailure, nil, []string{"/nonexistent/p.py"}, false},
		{"worker: unknown model", []string{"bench", modelWorker, "--model", "resnet9000"}, exitFailure, nil, []string{"resnet9000"}, false},
	})
}

// TestBenchModelPeersVenv: the PyTorch 2 peers need bench/peers/setup.sh's
// environment, and its absence is one clear line naming the script.
func TestBenchModelPeersVenv(t *testing.T) {
	t.Setenv(peers.VenvEnv, filepath.Join(t.TempDir(), "none"))
	script := filepath.Join("..", "..", "bench", "peers", "torch_model.py")
	runCLICases(t, []cliCase{
		{"torch2", []string{"bench", "model", "--peer", "torch2", "--peer-script", script}, exitFailure, nil, []string{"bench/peers/setup.sh", "FLOCK_PEERS_VENV"}, false},
		{"torch and torch2-compile", []string{"bench", "model", "--peer", "torch,torch2-compile", "--peer-script", script}, exitFailure, nil, []string{"bench/peers/setup.sh"}, false},
	})
}

// TestBenchModel runs a tiny measurement of the small CNN through the built
// binary (each run is a child process) and checks the JSON records.
// FLOCK_TEST_TORCH=1 adds the PyTorch peer (needs /usr/bin/python3 with
// PyTorch and torchvision), FLOCK_TEST_PEERS=1 the PyTorch 2 peers (needs
// bench/peers/setup.sh's environment; torch.compile takes a minute).
func TestBenchModel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock; skipped in -short mode")
	}
	dir := t.TempDir()
	args := []string{"bench", "model", "--model", "cnn", "--batch", "4", "--image", "28", "--channels", "1",
		"--warmup", "1", "--steps", "2", "--pairs", "1", "--json", "--out", dir, "--peak-gflops", "100"}
	var peers []string
	if os.Getenv("FLOCK_TEST_TORCH") == "1" {
		peers = append(peers, "torch")
	}
	if os.Getenv("FLOCK_TEST_PEERS") == "1" {
		peers = append(peers, "torch2", "torch2-compile")
	}
	if len(peers) > 0 {
		args = append(args, "--peer", strings.Join(peers, ","), "--peer-script", filepath.Join("..", "..", "bench", "peers", "torch_model.py"))
	}
	impls := append([]string{"flock"}, peers...)
	counts := map[string]int{}
	for _, line := range runJSONLines(t, args...) {
		var rec struct {
			Record       string  `json:"record"`
			Impl         string  `json:"impl"`
			Model        string  `json:"model"`
			Params       int     `json:"params"`
			ImagesPerSec float64 `json:"img_per_s"`
			StepMs       float64 `json:"step_ms"`
			StepFLOPs    float64 `json:"step_flops"`
			GFLOPS       float64 `json:"gflops"`
			PeakFraction float64 `json:"peak_fraction"`
			PeakRSS      int64   `json:"peak_rss_bytes"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", string(line), err)
		}
		key := rec.Record
		if key == "" {
			key = rec.Impl
			if rec.Model != "cnn" || rec.Params != 105866 || rec.ImagesPerSec <= 0 || rec.StepFLOPs <= 0 || rec.PeakRSS <= 0 {
				t.Errorf("record %s: want the cnn's 105866 parameters and positive rates, FLOPs and memory", string(line))
			}
			if want := rec.GFLOPS / 100; rec.PeakFraction != want {
				t.Errorf("peak fraction %v, want GFLOP/s over the given peak = %v", rec.PeakFraction, want)
			}
		}
		counts[key]++
	}
	if counts["machine"] != 1 || counts["summary"] != 1 {
		t.Errorf("record counts %v, want one machine and one summary record", counts)
	}
	for _, impl := range impls {
		if counts[impl] != 2 {
			t.Errorf("%d %s records, want 2 (warm-up and one measured round)", counts[impl], impl)
		}
	}
	for _, ext := range []string{".jsonl", ".md"} {
		m, _ := filepath.Glob(filepath.Join(dir, "model_*"+ext))
		if len(m) != 1 {
			t.Errorf("%d model_*%s files in --out, want 1", len(m), ext)
		}
	}
}

// TestBenchModelPeak runs the CNN on 3-channel 32×32 images without
// --peak-gflops: the peak is measured as flock bench gemm measures it, not
// guessed from the nominal clock. With FLOCK_TEST_TORCH=1 the PyTorch peer
// builds the same 3-channel network.
func TestBenchModelPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock; skipped in -short mode")
	}
	args := []string{"bench", "model", "--model", "cnn", "--batch", "2", "--image", "32", "--channels", "3",
		"--warmup", "0", "--steps", "1", "--pairs", "1", "--json"}
	if os.Getenv("FLOCK_TEST_TORCH") == "1" {
		args = append(args, "--peer", "torch", "--peer-script", filepath.Join("..", "..", "bench", "peers", "torch_model.py"))
	}
	// conv(3→16) + conv(16→32) + linear(32·8·8→64) + linear(64→10).
	const params = 3*16*9 + 16 + 16*32*9 + 32 + 32*8*8*64 + 64 + 64*10 + 10
	runs := 0
	for _, line := range runJSONLines(t, args...) {
		var rec struct {
			Record       string  `json:"record"`
			Impl         string  `json:"impl"`
			Params       int     `json:"params"`
			Peak         float64 `json:"peak_gflops"`
			PeakEstimate string  `json:"peak_estimate"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", string(line), err)
		}
		switch {
		case rec.Record == "machine":
			measured := cpu.KernelPath() != "go"
			if measured && (rec.Peak <= 0 || !strings.Contains(rec.PeakEstimate, "independent FMAs")) ||
				!measured && (rec.Peak != 0 || !strings.Contains(rec.PeakEstimate, "not measured")) {
				t.Errorf("machine record: peak %v GFLOP/s (%s), want it measured by independent FMAs on the %s kernels", rec.Peak, rec.PeakEstimate, cpu.KernelPath())
			}
		case rec.Record == "":
			runs++
			if rec.Params != params {
				t.Errorf("%s: %d parameters, want %d", rec.Impl, rec.Params, params)
			}
		}
	}
	if runs == 0 {
		t.Error("no measurement records")
	}
}

func TestBenchModelProfile(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := runBenchModel([]string{"--profile", "--peer", "torch"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--profile measures flock alone") {
		t.Errorf("--profile with a peer: status %d, %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := runBenchModel([]string{"--profile", "--model", "mlp", "--batch", "4", "--image", "28", "--channels", "1", "--steps", "1", "--warmup", "0"}, &stdout, &stderr); code != exitOK ||
		!strings.Contains(stdout.String(), "| MatMul 4×") {
		t.Errorf("--profile: status %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
