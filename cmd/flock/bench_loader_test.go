package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/internal/peers"
)

func TestBenchLoaderUsage(t *testing.T) {
	file := filepath.Join(ffcvTestdata, "jpeg_q90_max256.beton")
	runCLICases(t, []cliCase{
		{"listed", []string{"bench", "--help"}, exitOK, []string{"loader"}, nil, false},
		{"help", []string{"bench", "loader", "--help"}, exitOK, []string{"Usage: flock bench loader", "images/s per worker", "-peer"}, nil, false},
		{"no file", []string{"bench", "loader"}, exitUsage, nil, []string{"give one of --file X.beton and --synthetic N"}, false},
		{"both", []string{"bench", "loader", "--file", file, "--synthetic", "10"}, exitUsage, nil, []string{"give one of"}, false},
		{"decoder", []string{"bench", "loader", "--file", file, "--decoder", "crop"}, exitUsage, nil, []string{`unknown decoder "crop"`}, false},
		{"peer", []string{"bench", "loader", "--file", file, "--peer", "dali"}, exitUsage, nil, []string{`unknown peer "dali"`, "ffcv"}, false},
		{"workers", []string{"bench", "loader", "--file", file, "--workers", "1,0"}, exitUsage, nil, []string{`workers "0": want ≥ 1`}, false},
		{"single", []string{"bench", "loader", "--file", file, "--single"}, exitUsage, nil, []string{"--single measures one worker count"}, false},
		{"missing file", []string{"bench", "loader", "--file", "/nonexistent/x.beton", "--workers", "1", "--single"}, exitFailure, nil, []string{"/nonexistent/x.beton"}, false},
		{"missing peer script", []string{"bench", "loader", "--file", file, "--peer", "torch", "--peer-script", "/nonexistent/p.py"}, exitFailure, nil, []string{"/nonexistent/p.py"}, false},
	})
}

// TestBenchLoaderPeersVenv: the FFCV peer needs bench/peers/setup.sh's
// environment, and its absence is one clear line naming the script.
func TestBenchLoaderPeersVenv(t *testing.T) {
	t.Setenv(peers.VenvEnv, filepath.Join(t.TempDir(), "none"))
	file := filepath.Join(ffcvTestdata, "jpeg_q90_max256.beton")
	runCLICases(t, []cliCase{
		{"ffcv", []string{"bench", "loader", "--file", file, "--peer", "ffcv", "--peer-script", filepath.Join("..", "..", "bench", "peers", "ffcv_loader.py")},
			exitFailure, nil, []string{"bench/peers/setup.sh", "FLOCK_PEERS_VENV"}, false},
		{"default script", []string{"bench", "loader", "--file", file, "--peer", "ffcv"}, exitFailure, nil, []string{filepath.Join("bench", "peers", "ffcv_loader.py")}, false},
	})
}

// TestBenchLoader runs a tiny comparison with the built binary over a
// synthetic file, checking the JSON records and the results written.
// FLOCK_TEST_TORCH=1 adds the PyTorch peer (needs /usr/bin/python3 with
// PyTorch; slow to start), FLOCK_TEST_PEERS=1 the FFCV peer (needs
// bench/peers/setup.sh's environment).
func TestBenchLoader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds flock and runs processes; skipped in -short mode")
	}
	dir := t.TempDir()
	args := []string{"bench", "loader", "--synthetic", "24", "--synthetic-res", "64", "--size", "32", "--batch-size", "8", "--batches", "4", "--warmup", "1",
		"--workers", "1,2", "--pairs", "1", "--json", "--out", dir}
	impls := []string{"flock"}
	if os.Getenv("FLOCK_TEST_TORCH") == "1" {
		args = append(args, "--peer", "torch", "--peer-script", filepath.Join("..", "..", "bench", "peers", "torch_loader.py"))
		impls = append(impls, "torch")
	} else if os.Getenv("FLOCK_TEST_PEERS") == "1" {
		args = append(args, "--peer", "ffcv", "--peer-script", filepath.Join("..", "..", "bench", "peers", "ffcv_loader.py"))
		impls = append(impls, "ffcv")
	}
	counts := map[string]int{}
	for _, line := range runJSONLines(t, args...) {
		var rec struct {
			Record  string  `json:"record"`
			Impl    string  `json:"impl"`
			Images  int     `json:"images"`
			PerWork float64 `json:"img_per_s_per_worker"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", string(line), err)
		}
		counts[rec.Record]++
		if rec.Record == "run" {
			counts[rec.Impl]++
			if rec.Images != 32 || rec.PerWork <= 0 {
				t.Errorf("record %s: want 32 images at a positive rate", string(line))
			}
		}
	}
	if counts["machine"] != 1 || counts["run"] != 4*len(impls) || counts["summary"] != 2 {
		t.Errorf("record counts %v", counts)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "loader_*.md"))
	if len(matches) != 1 {
		t.Fatalf("results %v, want one Markdown file", matches)
	}
	md, _ := os.ReadFile(matches[0])
	if !strings.Contains(string(md), "| 2 | flock |") || !strings.Contains(string(md), "flock bench loader --synthetic 24") {
		t.Errorf("Markdown results:\n%s", md)
	}
}
