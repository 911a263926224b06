package sparse

import (
	"flag"
	"fmt"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/train"
)

func init() {
	train.RegisterStrategy(train.StrategyKind{
		Name:     "jointspar",
		Summary:  "data parallel over a sample of the layers: each step computes and averages the gradients of about --budget of them",
		Settings: func() train.StrategySettings { return DefaultSettings() },
		Alone:    true,
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			set := s.(*Settings)
			return New(c, Options{Budget: set.Budget, PMin: set.PMin, PerWorker: set.PerWorker, Balanced: set.Balanced, Seed: run.Config.Seed, Context: run.Context})
		},
	})
}

// Settings configure JointSpar as flock train's flags do
// (train.StrategySettings); see Options.
type Settings struct {
	// Budget is the fraction of layers computed and sent per step, in
	// (0, 1]; PMin the smallest inclusion probability (0: Options' default);
	// PerWorker draws the layers per worker, Balanced from one draw that
	// deals them out.
	Budget    float64 `json:"budget,omitempty"`
	PMin      float64 `json:"p_min,omitempty"`
	PerWorker bool    `json:"per_worker,omitempty"`
	Balanced  bool    `json:"balanced,omitempty"`
}

var _ train.StrategySettings = (*Settings)(nil)

// DefaultSettings are flock train's: half of the layers per step.
func DefaultSettings() *Settings { return &Settings{Budget: 0.5} }

// Flags implements train.StrategySettings.
func (s *Settings) Flags(fs *flag.FlagSet) {
	fs.Float64Var(&s.Budget, "budget", s.Budget, "jointspar: the fraction of layers whose gradients a step computes and sends, in (0, 1]")
	fs.Float64Var(&s.PMin, "p-min", s.PMin, "jointspar: the smallest probability of drawing a layer (0: min(0.05, budget); with --balanced-draws on K workers min(max(0.05, 1/K), budget))")
	fs.BoolVar(&s.PerWorker, "per-worker-draws", s.PerWorker, "jointspar: each worker draws its own layers, so each layer's update averages over the workers that drew it (K times less sampling variance on K workers; saves computation, not bytes)")
	fs.BoolVar(&s.Balanced, "balanced-draws", s.Balanced, "jointspar: per-worker draws dealt out from one shared draw, each layer to ⌊K·p⌋ or ⌈K·p⌉ of the K workers (implies --per-worker-draws; no sampling variance beyond the rounding of K·p); a layer's holders average it and send it on, so bytes are saved where fewer than K workers hold a layer")
}

// Validate implements train.StrategySettings.
func (s *Settings) Validate(string) error {
	switch {
	case !(s.Budget > 0 && s.Budget <= 1):
		return fmt.Errorf("budget %v: want a fraction of the layers in (0, 1]", s.Budget)
	case s.PMin != 0 && !(s.PMin > 0 && s.PMin <= s.Budget):
		return fmt.Errorf("p-min %v: want 0 < p-min ≤ budget (%v)", s.PMin, s.Budget)
	}
	return nil
}
