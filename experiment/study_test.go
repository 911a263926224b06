package experiment

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/train"
)

// TestStudyPlan checks the two phases of a study: every arm's tuning runs
// hold out the validation images; an arm's final runs appear once its
// tuning is done, at the rate of the highest validation accuracy (the
// lower rate on a tie), without the held-out images.
func TestStudyPlan(t *testing.T) {
	arm := func(name string) Arm {
		return Arm{Name: name, Label: strings.ToUpper(name), Args: func(lr float64) []string { return []string{"--lr", formatRate(lr)} }}
	}
	s := Study{Arms: []Arm{arm("a"), arm("b")}, Rates: []float64{0.1, 0.2, 0.4}, TuneSeed: 1, Seeds: []uint64{1, 2, 3}, ValImages: 100, Common: []string{"--epochs", "2"}}
	tune := s.Tuning()
	if len(tune) != 6 || tune[0].ID != "tune/a/lr0.1" || strings.Join(tune[0].Args, " ") != "--epochs 2 --seed 1 --val-images 100 --lr 0.1" {
		t.Fatalf("tuning runs %v", tune)
	}
	done := map[string]Record{}
	if f, tuning := s.Final(done); len(f) != 0 || strings.Join(tuning, ",") != "a,b" {
		t.Fatalf("nothing tuned: final %v, tuning %v", f, tuning)
	}
	// a: 0.2 and 0.4 tie at the top; b still lacks a rate.
	for lr, acc := range map[float64]float64{0.1: 0.5, 0.2: 0.7, 0.4: 0.7} {
		done[TuneID("a", lr)] = Record{TestAcc: acc}
	}
	done[TuneID("b", 0.1)] = Record{TestAcc: 0.9}
	f, tuning := s.Final(done)
	if len(f) != 3 || strings.Join(tuning, ",") != "b" {
		t.Fatalf("a tuned: final %v, tuning %v", f, tuning)
	}
	if f[2].ID != "a/seed3" || strings.Join(f[2].Args, " ") != "--epochs 2 --seed 3 --lr 0.2" {
		t.Errorf("final run %s: %q, want a/seed3 at lr 0.2 without --val-images", f[2].ID, f[2].Args)
	}
	if lr, acc, ok := s.Chosen(s.Arms[0], done); !ok || lr != 0.2 || acc != 0.7 {
		t.Errorf("Chosen(a) = %v, %v, %v; want 0.2, 0.7, true", lr, acc, ok)
	}
	if runs, complete := s.Runs(done); complete || len(runs) != 6+3 {
		t.Errorf("Runs with b untuned: %d runs, complete %v; want 9, false", len(runs), complete)
	}
	for _, lr := range s.Rates {
		done[TuneID("b", lr)] = Record{TestAcc: 0.5}
	}
	for _, arm := range []string{"a", "b"} {
		for _, seed := range s.Seeds {
			done[fmt.Sprintf("%s/seed%d", arm, seed)] = Record{}
		}
	}
	if runs, complete := s.Runs(done); !complete || len(runs) != 6+6 {
		t.Errorf("Runs with every run done: %d runs, complete %v; want 12, true", len(runs), complete)
	}
	// A second call must not share the common flags' backing array.
	f2, _ := s.Final(done)
	if strings.Join(f[0].Args, " ") != strings.Join(f2[0].Args, " ") || strings.Join(s.Common, " ") != "--epochs 2" {
		t.Errorf("runs share flags: %q, %q, common %q", f[0].Args, f2[0].Args, s.Common)
	}
}

// TestStudyIntervals checks the intervals against values computed by hand:
// Student's t quantile t(0.975, 2) = 4.302653, and Welch's interval for
// two samples of three.
func TestStudyIntervals(t *testing.T) {
	if got, want := tCI95(1, 3), 4.302653/math.Sqrt(3); math.Abs(got-want) > 1e-5 {
		t.Errorf("tCI95(1, 3) = %v, want %v", got, want)
	}
	if got := tCI95(1, 1); got != 0 {
		t.Errorf("tCI95 of one value = %v, want 0", got)
	}
	// a: mean 2, variance 1; b: mean 0, variance 4. se² = 1/3 + 4/3;
	// ν = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 2.941176; t(0.975, ν) =
	// 3.218759 (the t density integrated numerically for fractional ν).
	d, h := welch([]float64{1, 2, 3}, []float64{-2, 0, 2})
	if want := 3.218759 * math.Sqrt(5.0/3); d != 2 || math.Abs(h-want) > 1e-5*want {
		t.Errorf("welch = %v ± %v, want 2 ± %v", d, h, want)
	}
	if _, h := welch([]float64{1}, []float64{1, 2}); !math.IsNaN(h) {
		t.Errorf("welch of one value: half-width %v, want NaN", h)
	}
}

// TestWriteStudy writes the report of a study whose arm b is not tuned
// yet and checks that the chosen rate is marked and the comparison
// waits for b.
func TestWriteStudy(t *testing.T) {
	arm := func(name string) Arm {
		return Arm{Name: name, Label: "arm " + name, Args: func(lr float64) []string { return nil }}
	}
	s := Study{Name: "s", Arms: []Arm{arm("a"), arm("b")}, Rates: []float64{0.1, 0.2}, Seeds: []uint64{1, 2}, Compare: [][2]string{{"a", "b"}}}
	done := map[string]Record{
		TuneID("a", 0.1): {TestAcc: 0.80}, TuneID("a", 0.2): {TestAcc: 0.85},
		"a/seed1": {TestAcc: 0.9, Comm: train.CommStats{Sent: 1 << 20, Syncs: 4}},
		"a/seed2": {TestAcc: 0.92, Comm: train.CommStats{Sent: 3 << 20, Syncs: 6}},
	}
	dir := t.TempDir()
	if err := WriteStudy(dir, "title", "flock experiment s", []Study{s}, done); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "study.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	for _, want := range []string{"# title", "| arm a | 80.00 | **85.00** (edge) | 2 | 91.00 ± 1.41 |", "| 2.0 | 5 |", "| arm b | – | – | 0 |", "| arm a − arm b | – | – | – |"} {
		if !strings.Contains(md, want) {
			t.Errorf("study.md lacks %q:\n%s", want, md)
		}
	}
}

// TestGridKeepDiverged runs a grid whose run diverges: with KeepDiverged
// it is recorded as diverged, without it the grid fails.
func TestGridKeepDiverged(t *testing.T) {
	m := &dataset.Images{N: 64, H: 4, W: 4, C: 1, Pixels: make([]uint8, 64*16), Labels: make([]int32, 64), Classes: []string{"a", "b"}}
	for i := range m.Pixels {
		m.Pixels[i] = uint8(i * 7)
	}
	for i := range m.Labels {
		m.Labels[i] = int32(i % 2)
	}
	setup := func(Run) (Setup, error) {
		cfg := train.DefaultConfig()
		cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR, cfg.WarmupEpochs = "mlp", 2, 16, 1e30, 0
		cfg.Strategy = train.StrategyConfig{Name: "dp"}
		return Setup{Config: cfg, Workers: 2, MaxNonFiniteSteps: 2}, nil
	}
	data := job.Images{Train: m, Test: m}
	for _, keep := range []bool{true, false} {
		g := &Grid{Runs: []Run{{ID: "dp/seed1", Strategy: "dp"}}, Done: map[string]Record{}, Path: filepath.Join(t.TempDir(), "runs.jsonl"), Jobs: 1,
			Setup: setup, Build: data.Build, StepsPerEpoch: data.StepsPerEpoch, TestImages: m.N, KeepDiverged: keep}
		err := g.Run(context.Background())
		rec, ok := g.Done["dp/seed1"]
		switch {
		case keep && (err != nil || !ok || !rec.Diverged || rec.TestAcc != 0):
			t.Errorf("KeepDiverged: err %v, record %+v (recorded %v), want a diverged record", err, rec, ok)
		case !keep && (err == nil || ok):
			t.Errorf("without KeepDiverged: err %v, recorded %v; want the run failed", err, ok)
		}
	}
}
