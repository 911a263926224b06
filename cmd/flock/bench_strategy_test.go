package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/internal/peers"
)

// TestBenchStrategyPeersVenv: the torchft peer needs bench/peers/setup.sh's
// environment, and its absence is one clear line naming the script.
func TestBenchStrategyPeersVenv(t *testing.T) {
	t.Setenv(peers.VenvEnv, filepath.Join(t.TempDir(), "none"))
	runCLICases(t, []cliCase{
		{"torchft", []string{"bench", "strategy", "--measure", "sync", "--peer", "torchft", "--peer-script", filepath.Join("..", "..", "bench", "peers", "torchft_sync.py")},
			exitFailure, nil, []string{"bench/peers/setup.sh", "FLOCK_PEERS_VENV"}, false},
	})
}

func TestBenchStrategyUsage(t *testing.T) {
	runCLICases(t, []cliCase{
		{"listed", []string{"bench", "--help"}, exitOK, []string{"strategy"}, nil, false},
		{"help", []string{"bench", "strategy", "--help"}, exitOK, []string{"Usage: flock bench strategy", "-measure MEASUREMENTS", "-nproc", "2(n-1)/n"}, nil, false},
		{"unknown measurement", []string{"bench", "strategy", "--measure", "steps,gossip"}, exitUsage, nil, []string{`measure "gossip"`}, false},
		{"unknown model", []string{"bench", "strategy", "--model", "resnet9000"}, exitUsage, nil, []string{`unknown model "resnet9000"`}, false},
		{"no pairs", []string{"bench", "strategy", "--pairs", "0"}, exitUsage, nil, []string{"pairs 0"}, false},
		{"one process", []string{"bench", "strategy", "--nproc", "1"}, exitUsage, nil, []string{"nproc 1: want ≥ 2"}, false},
		{"stray argument", []string{"bench", "strategy", "local"}, exitUsage, nil, []string{`unexpected argument "local"`}, false},
		{"unknown peer", []string{"bench", "strategy", "--peer", "horovod"}, exitUsage, nil, []string{`unknown peer "horovod" (peers: torchft)`}, false},
		{"peer without sync", []string{"bench", "strategy", "--measure", "steps", "--peer", "torchft"}, exitUsage, nil, []string{"want --measure with sync"}, false},
		{"worker: bad flag", []string{"bench", "strategy", strategyWorker, "--iters", "x"}, exitUsage, nil, nil, true},
		{"steps table", []string{"bench", "strategy", "--measure", "steps", "--model", "mlp", "--batch", "4", "--steps", "1", "--pairs", "1"}, exitOK,
			[]string{"round 0 (warm-up)  steps  single", "round 1  steps  local", "| mlp | 269322 | 4 | 1 |", "single/local"}, nil, false},
	})
}

// TestBenchStrategy builds flock and runs both measurements at a tiny size
// (the MLP, 2 steps, 1 pair; the sync over 2 processes), checking the JSON
// records and the Markdown results.
func TestBenchStrategy(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", "strategy", "--model", "mlp", "--batch", "8", "--steps", "2", "--pairs", "1",
		"--image", "8", "--channels", "1", "--iters", "2", "--warmup", "1", "--json", "--out", dir}
	const (
		stepsParams = 8*8*256 + 256 + 256*256 + 256 + 256*10 + 10
		syncBytes   = 4 * stepsParams
	)
	counts := map[string]int{}
	for _, line := range runJSONLines(t, args...) {
		var rec struct {
			Record     string                       `json:"record"`
			Measure    string                       `json:"measure"`
			Impl       string                       `json:"impl"`
			Model      string                       `json:"model"`
			Params     int                          `json:"params"`
			MsStep     float64                      `json:"ms_per_step"`
			Syncs      int64                        `json:"syncs"`
			NProc      int                          `json:"nproc"`
			Bytes      int64                        `json:"bytes"`
			BusBW      float64                      `json:"busbw_gbps"`
			Pair       int                          `json:"pair"`
			RatioSteps *struct{ Median, N float64 } `json:"ratio_single_local"`
			RatioSync  *struct{ Median, N float64 } `json:"ratio_sync_allreduce"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", string(line), err)
		}
		counts[rec.Record]++
		switch rec.Record {
		case "steps":
			counts["steps "+rec.Impl]++
			if rec.Model != "mlp" || rec.Params != stepsParams || !(rec.MsStep > 0) || rec.Syncs != 0 {
				t.Errorf("record %s: want the mlp's %d parameters, a positive time and no synchronization", line, stepsParams)
			}
		case "sync":
			counts["sync "+rec.Impl]++
			if rec.NProc != 2 || rec.Bytes != syncBytes || !(rec.BusBW > 0) {
				t.Errorf("record %s: want 2 ranks, %d bytes and a positive bandwidth", line, syncBytes)
			}
		case "summary":
			counts["summary "+rec.Measure]++
			r := rec.RatioSteps
			if rec.Measure == "sync" {
				r = rec.RatioSync
			}
			if r == nil || r.N != 1 || !(r.Median > 0) {
				t.Errorf("summary %s: want a ratio over 1 pair", line)
			}
		}
	}
	want := map[string]int{
		"machine": 1, "steps": 4, "sync": 4, "summary": 2,
		"steps single": 2, "steps local": 2, "sync local-sync": 2, "sync allreduce": 2,
		"summary steps": 1, "summary sync": 1,
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%d %q records, want %d (all: %v)", counts[k], k, n, counts)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "strategy_*.md"))
	if len(matches) != 1 {
		t.Fatalf("results %v, want one Markdown file", matches)
	}
	md, _ := os.ReadFile(matches[0])
	for _, s := range []string{"flock bench strategy --model mlp", fmt.Sprintf("| mlp | %d | 8 | 2 |", stepsParams), "| mlp | 2 |", "single/local", "sync/all-reduce"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("Markdown results lack %q:\n%s", s, md)
		}
	}
}
