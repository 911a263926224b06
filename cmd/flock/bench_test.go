package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchUsage(t *testing.T) {
	runCLICases(t, []cliCase{
		{"no benchmark", []string{"bench"}, exitUsage, nil, []string{"Usage: flock bench"}, true},
		{"help", []string{"bench", "--help"}, exitOK, []string{"allreduce"}, nil, false},
		{"help bench", []string{"help", "bench"}, exitOK, []string{"allreduce"}, nil, false},
		{"allreduce help", []string{"bench", "allreduce", "-h"}, exitOK, []string{"2(n-1)/n"}, nil, false},
		{"unknown benchmark", []string{"bench", "matmul"}, exitUsage, nil, []string{`unknown benchmark "matmul"`}, false},
		{"bad nproc", []string{"bench", "allreduce", "--nproc", "2,0"}, exitUsage, nil, []string{`nproc "0": want ≥ 1`}, false},
		{"bad size", []string{"bench", "allreduce", "--size", "1MiB,6B"}, exitUsage, nil, []string{`size "6B": want a positive multiple of 4`}, false},
		{"size not a number", []string{"bench", "allreduce", "--size", "big"}, exitUsage, nil, []string{`size "big"`}, false},
		{"unknown peer", []string{"bench", "allreduce", "--peer", "nccl"}, exitUsage, nil, []string{`unknown peer "nccl"`}, false},
		{"no iters", []string{"bench", "allreduce", "--iters", "0"}, exitUsage, nil, []string{"iters 0"}, false},
		{"stray argument", []string{"bench", "allreduce", "gloo"}, exitUsage, nil, []string{`unexpected argument "gloo"`}, false},
		{"missing peer script", []string{"bench", "allreduce", "--peer", "gloo", "--peer-script", "/nonexistent/x.py"}, exitFailure, nil, []string{"/nonexistent/x.py"}, false},
	})
}

// TestBenchAllReduce builds flock and runs a tiny all-reduce benchmark over
// 2 processes, checking the JSON records. FLOCK_TEST_GLOO=1 adds the Gloo
// peer (needs /usr/bin/python3 with PyTorch; slow to start).
func TestBenchAllReduce(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", "allreduce", "--nproc", "2", "--size", "4KiB,64KiB", "--pairs", "1", "--warmup", "1", "--iters", "2", "--json", "--out", dir}
	impls := []string{"flock"}
	if os.Getenv("FLOCK_TEST_GLOO") == "1" {
		args = append(args, "--peer", "gloo", "--peer-script", filepath.Join("..", "..", "bench", "peers", "gloo_allreduce.py"))
		impls = append(impls, "gloo")
	}
	counts := map[string]int{}
	for _, line := range runJSONLines(t, args...) {
		var rec struct {
			Record string  `json:"record"`
			Impl   string  `json:"impl"`
			NProc  int     `json:"nproc"`
			Bytes  int64   `json:"bytes"`
			BusBW  float64 `json:"busbw_gbps"`
			AlgBW  float64 `json:"algbw_gbps"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("line %q: %v", string(line), err)
		}
		counts[rec.Record]++
		if rec.Record == "allreduce" {
			counts[rec.Impl]++
			if rec.NProc != 2 || (rec.Bytes != 4<<10 && rec.Bytes != 64<<10) || rec.BusBW <= 0 || rec.BusBW != rec.AlgBW {
				t.Errorf("record %s: want 2 ranks, a requested size, busbw = algbw > 0", string(line))
			}
		}
	}
	if counts["machine"] != 1 || counts["allreduce"] != 4*len(impls) || counts["summary"] != 2 {
		t.Errorf("record counts %v", counts)
	}
	for _, impl := range impls {
		if counts[impl] != 4 {
			t.Errorf("%d %s records, want 4", counts[impl], impl)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "allreduce_*.md"))
	if len(matches) != 1 {
		t.Fatalf("results %v, want one Markdown file", matches)
	}
	md, _ := os.ReadFile(matches[0])
	if !strings.Contains(string(md), "| 2 | 64KiB |") || !strings.Contains(string(md), "flock bench allreduce --nproc 2") {
		t.Errorf("Markdown results:\n%s", md)
	}
}
