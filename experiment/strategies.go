package experiment

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/flockml/flock/nn/models"
)

// GridStrategy is one strategy of the strategies grid: the flock train
// flags that select it, on top of the grid's common ones (StrategyRuns).
type GridStrategy struct {
	// Name is its ID in the grid, Label its name in reports.
	Name, Label string
	// Args returns its flags for runs of the given number of epochs.
	Args func(epochs int) []string
}

// fixed returns args whatever the number of epochs.
func fixed(args ...string) func(int) []string { return func(int) []string { return args } }

// The learning rates of the grid: 0.05 for SGD (Nesterov momentum) — at
// 8 workers × 128 images data parallel's batch is 1024, and flock train's
// 0.15 for 4 workers diverges there on some seeds —, AdamW's usual 10⁻³,
// and LARS's, untuned for JointSpar's shared draws and tuned for LARS and
// balanced draws; QSR's α keeps α/η at the peak the same (4/3)
// for SGD and AdamW, so that H starts at Hbase in both.
const (
	sgdLR      = "0.05"
	sgdAlpha   = "0.0667"
	adamwLR    = "1e-3"
	adamwAlpha = "1.33e-3"
	// larsLR is the best of 4, 8, 16, 32, 48 and 64 for balanced draws
	// and of 16, 32, 48 and 64 for data-parallel LARS, both with the
	// trust ratio on every parameter, seed 1.
	larsLR = "32"
)

// StrategyGrid is every strategy of flock experiment strategies.
var StrategyGrid = []GridStrategy{
	{"dp", "Data parallel", fixed("--strategy", "dp")},
	{"local-h2", "Local SGD, H = 2", fixed("--strategy", "local", "--sync", "constant", "--h", "2")},
	{"local-h8", "Local SGD, H = 8", fixed("--strategy", "local", "--sync", "constant", "--h", "8")},
	{"post-local", "Post-local SGD, H = 8", func(epochs int) []string {
		// The switch at a quarter of the run, where the cosine
		// schedule's rate has fallen by 15%.
		return []string{"--strategy", "local", "--sync", "post-local", "--h", "8", "--post-local-switch", strconv.FormatFloat(float64(epochs)/4, 'g', -1, 64)}
	}},
	{"local-power1", "Local SGD, H ∝ η⁻¹", fixed("--strategy", "local", "--sync", "power", "--power-gamma", "1", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"local-qsr", "Local SGD, QSR (H ∝ η⁻²)", fixed("--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"local-qsr-nodes", "Local SGD, QSR across nodes of 4, H = 1 inside", fixed("--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", sgdAlpha, "--inner-h", "1", "--node-size", "4")},
	{"local-qsr-q8", "Local SGD, QSR, 8-bit sync", fixed("--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", sgdAlpha, "--sync-bits", "8", "--error-feedback")},
	{"local-qsr-stream", "Local SGD, QSR, 4 fragments, overlap 1", fixed("--strategy", "local", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", sgdAlpha, "--fragments", "4", "--overlap", "1")},
	{"local-power3", "Local SGD, H ∝ η⁻³", fixed("--strategy", "local", "--sync", "power", "--power-gamma", "3", "--h-base", "2", "--qsr-alpha", sgdAlpha)},
	{"adamw-qsr", "Local AdamW, QSR", fixed("--strategy", "local", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", adamwAlpha)},
	{"diloco", "DiLoCo, H = 8", fixed("--strategy", "diloco", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "constant", "--h", "8")},
	{"diloco-qsr", "DiLoCo, QSR", fixed("--strategy", "diloco", "--optimizer", "adamw", "--lr", adamwLR, "--weight-decay", "0.05", "--sync", "qsr", "--h-base", "2", "--qsr-alpha", adamwAlpha)},
	{"dmsgd-exp", "DmSGD, exponential graph", fixed("--strategy", "dmsgd", "--topology", "exp")},
	{"dmsgd-one-peer", "DmSGD, one-peer exp. graph", fixed("--strategy", "dmsgd", "--topology", "one-peer-exp")},
	{"dmsgd-ring", "DmSGD, ring", fixed("--strategy", "dmsgd", "--topology", "ring")},
	{"swarm", "Swarm SGD, H = 2", fixed("--strategy", "swarm", "--topology", "full", "--local-steps", "2")},
	{"swarm-q8", "Swarm SGD, H = 2, 8-bit", fixed("--strategy", "swarm", "--topology", "full", "--local-steps", "2", "--quant-bits", "8")},
	{"jointspar-lars", "JointSpar-LARS, budget 0.5", fixed("--strategy", "jointspar", "--budget", "0.5", "--optimizer", "lars", "--lr", "1")},
	{"lars", "Data parallel, LARS", fixed("--strategy", "dp", "--optimizer", "lars", "--lars-adapt-all", "--lr", larsLR)},
	{"jointspar-balanced", "JointSpar-LARS, budget 0.5, balanced draws", fixed("--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--optimizer", "lars", "--lars-adapt-all", "--lr", larsLR)},
}

// QuickStrategies name the strategies of a grid of seconds (flock
// experiment strategies --quick): one of each communication pattern, and a
// schedule whose H changes.
var QuickStrategies = []string{"dp", "local-h2", "local-qsr", "dmsgd-exp", "swarm"}

// GridOptions size the runs of the strategies grid.
type GridOptions struct {
	// Model is the network every run trains, Workers its in-process
	// workers, Epochs its epochs, Batch the images per worker and step;
	// TrainImages (0: all 60,000) trains on the first images only.
	Model                               string
	Workers, Epochs, Batch, TrainImages int
	// Seeds are the seeds of each strategy's runs; Strategies name the
	// strategies of StrategyGrid to run (nil: all).
	Seeds      []uint64
	Strategies []string
}

// Validate checks o's model and sizes.
func (o GridOptions) Validate() error {
	if !slices.Contains(models.Names(), o.Model) {
		return fmt.Errorf("unknown model %q (models: %s)", o.Model, strings.Join(models.Names(), ", "))
	}
	if o.Workers < 2 || o.Epochs < 1 || o.TrainImages < 0 || o.Batch < 1 {
		return fmt.Errorf("workers %d, epochs %d, train-images %d, batch-size %d: want workers ≥ 2, epochs and batch-size ≥ 1, train-images ≥ 0", o.Workers, o.Epochs, o.TrainImages, o.Batch)
	}
	return nil
}

// InStrategyGrid reports whether StrategyGrid holds a strategy called name.
func InStrategyGrid(name string) bool {
	return slices.ContainsFunc(StrategyGrid, func(g GridStrategy) bool { return g.Name == name })
}

// StrategyRuns lists the runs of the strategies grid that o asks for,
// strategy by strategy in the grid's order, a run per seed: the model, K
// workers, E epochs, B images per worker and step, an evaluation after
// every epoch and a peak learning rate of 0.05 (which a strategy's own
// --lr overrides), flock train's defaults otherwise.
func StrategyRuns(o GridOptions) ([]Run, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	strategies := StrategyGrid
	if o.Strategies != nil {
		for _, s := range o.Strategies {
			if !InStrategyGrid(s) {
				return nil, fmt.Errorf("strategies %q: not in the grid", s)
			}
		}
		strategies = slices.DeleteFunc(slices.Clone(StrategyGrid), func(g GridStrategy) bool { return !slices.Contains(o.Strategies, g.Name) })
	}
	var runs []Run
	for _, s := range strategies {
		for _, seed := range o.Seeds {
			args := []string{"--model", o.Model, "--workers", strconv.Itoa(o.Workers), "--epochs", strconv.Itoa(o.Epochs),
				"--batch-size", strconv.Itoa(o.Batch), "--seed", strconv.FormatUint(seed, 10), "--eval-every", "1", "--log-every", "0", "--lr", sgdLR}
			if o.TrainImages > 0 {
				args = append(args, "--train-images", strconv.Itoa(o.TrainImages))
			}
			runs = append(runs, Run{ID: fmt.Sprintf("%s/seed%d", s.Name, seed), Strategy: s.Name, Label: s.Label, Seed: seed,
				Args: append(args, s.Args(o.Epochs)...)})
		}
	}
	return runs, nil
}
