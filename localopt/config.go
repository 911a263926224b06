package localopt

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/train"
)

func init() {
	train.RegisterStrategy(train.StrategyKind{
		Name:     "local",
		Summary:  "Local SGD/AdamW/LARS: parameters averaged every H steps, H from --sync",
		Settings: func() train.StrategySettings { return DefaultSettings() },
		Pattern:  pattern,
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			opt, err := s.(*Settings).options(run)
			if err != nil {
				return nil, err
			}
			return NewLocal(c, opt)
		},
	})
	train.RegisterStrategy(train.StrategyKind{
		Name:     "diloco",
		Summary:  "DiLoCo: an outer Nesterov SGD steps with the averaged change every H steps",
		Settings: func() train.StrategySettings { return DefaultSettings() },
		Pattern:  pattern,
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			set := s.(*Settings)
			opt, err := set.options(run)
			if err != nil {
				return nil, err
			}
			return NewDiLoCo(c, opt, OuterOptions{LR: set.OuterLR, Momentum: set.OuterMomentum, Nesterov: set.OuterNesterov})
		},
	})
}

// pattern is how Local's and DiLoCo's synchronizations travel: all-reduces,
// inside the nodes too in a two-level run.
func pattern(s train.StrategySettings) train.CommPattern {
	p := train.CommPattern{Kind: "allreduce"}
	if set := s.(*Settings); set.InnerH > 0 {
		p.NodeSize = set.NodeSize
	}
	return p
}

// Settings configure Local and DiLoCo as flock train's flags do
// (train.StrategySettings).
type Settings struct {
	// Sync chooses H: "constant" (H), "post-local" (1 before
	// PostLocalSwitch epochs, then H), "power" (max(HBase,
	// ⌊(Alpha/η)^Gamma⌋)) or "qsr" (the power rule with Gamma = 2).
	Sync  string  `json:"sync,omitempty"`
	H     int     `json:"h,omitempty"`
	HBase int     `json:"h_base,omitempty"`
	Alpha float64 `json:"alpha,omitempty"`
	Gamma float64 `json:"gamma,omitempty"`
	// PostLocalSwitch is the switch of post-local SGD, in epochs
	// (fractions allowed, rounded to whole steps).
	PostLocalSwitch float64 `json:"post_local_switch,omitempty"`
	// AverageState names, comma-separated, the optimizer state fields
	// averaged with the parameters at each synchronization by Local
	// (StateFields); by default optimizer state stays local.
	AverageState string `json:"average_state,omitempty"`
	// BNBatches is the number of training micro-batches on which batch
	// norm's running statistics are re-estimated before each evaluation
	// (0: keep each worker's running statistics, averaged).
	BNBatches int `json:"bn_batches,omitempty"`
	// OuterLR, OuterMomentum and OuterNesterov set DiLoCo's outer SGD.
	OuterLR       float64 `json:"outer_lr,omitempty"`
	OuterMomentum float64 `json:"outer_momentum,omitempty"`
	OuterNesterov bool    `json:"outer_nesterov,omitempty"`
	// SyncBits sends each synchronization's values in 8 or 4 bits with a
	// scale per train.DefaultQuantBlock values (0: float32s), and
	// ErrorFeedback carries what quantization took over to the next
	// synchronization (train.Quantization).
	SyncBits      int  `json:"sync_bits,omitempty"`
	ErrorFeedback bool `json:"error_feedback,omitempty"`
	// InnerH makes a two-level run: inside each node of NodeSize workers
	// (0: the launcher's ranks per node) the parameters are averaged every
	// InnerH steps of a round (Options.NodeSize); 0: one level.
	InnerH   int `json:"inner_h,omitempty"`
	NodeSize int `json:"node_size,omitempty"`
	// Fragments and Overlap stream Local's and DiLoCo's synchronizations
	// (Options.Fragments, Options.Overlap).
	Fragments int `json:"fragments,omitempty"`
	Overlap   int `json:"overlap,omitempty"`
}

var _ train.StrategySettings = (*Settings)(nil)

// DefaultSettings are flock train's: QSR with α = 0.2 and Hbase = 4,
// batch-norm statistics re-estimated on 16 batches, DiLoCo's outer
// Nesterov SGD at lr 0.7 and momentum 0.9.
func DefaultSettings() *Settings {
	return &Settings{Sync: "qsr", H: 8, HBase: 4, Alpha: 0.2, Gamma: 2, BNBatches: 16, OuterLR: 0.7, OuterMomentum: 0.9, OuterNesterov: true}
}

// SyncRules lists the accepted values of Settings.Sync.
var SyncRules = []string{"constant", "post-local", "power", "qsr"}

// StateFields lists the optimizer state fields Local may average: SGD's
// and LARS's momentum, AdamW's first and second moments.
var StateFields = []string{"momentum_buffer", "exp_avg", "exp_avg_sq"}

// Flags implements train.StrategySettings.
func (s *Settings) Flags(fs *flag.FlagSet) {
	fs.StringVar(&s.Sync, "sync", s.Sync, "how local and diloco choose H each round: constant (--h), post-local (H = 1, then --h after --post-local-switch), power (max(Hbase, ⌊(α/η)^γ⌋)), qsr (power with γ = 2)")
	fs.IntVar(&s.H, "h", s.H, "`H` of the constant and post-local rules")
	fs.IntVar(&s.HBase, "h-base", s.HBase, "`Hbase` of the power and qsr rules (also their H during the warm-up)")
	fs.Float64Var(&s.Alpha, "qsr-alpha", s.Alpha, "`α` of the power and qsr rules (0: H = Hbase throughout)")
	fs.Float64Var(&s.Gamma, "power-gamma", s.Gamma, "`γ` of the power rule")
	fs.Float64Var(&s.PostLocalSwitch, "post-local-switch", s.PostLocalSwitch, "when post-local SGD starts its local steps, in `EPOCHS`")
	fs.StringVar(&s.AverageState, "average-state", s.AverageState, "optimizer state averaged with the parameters by local, comma-separated `FIELDS`: momentum_buffer, exp_avg, exp_avg_sq (default: none, kept per worker)")
	fs.IntVar(&s.BNBatches, "bn-batches", s.BNBatches, "training micro-batches on which local and diloco re-estimate batch-norm statistics before each evaluation (0: average the workers' own)")
	fs.Float64Var(&s.OuterLR, "outer-lr", s.OuterLR, "diloco's outer learning rate")
	fs.Float64Var(&s.OuterMomentum, "outer-momentum", s.OuterMomentum, "diloco's outer momentum")
	fs.BoolVar(&s.OuterNesterov, "outer-nesterov", s.OuterNesterov, "diloco's outer Nesterov momentum (--outer-nesterov=false to turn off)")
	fs.IntVar(&s.SyncBits, "sync-bits", s.SyncBits, fmt.Sprintf("local and diloco send what a synchronization averages (local: the change since the last one; diloco: the pseudo-gradient) in `BITS` 8 or 4, with a scale per %d values (0: float32)", train.DefaultQuantBlock))
	fs.IntVar(&s.InnerH, "inner-h", s.InnerH, "local and diloco on two levels: also average inside each node every `H` steps of a round (0: one level)")
	fs.IntVar(&s.NodeSize, "node-size", s.NodeSize, "with --inner-h, the workers per node, `N` consecutive ranks (0: the launcher's LOCAL_WORLD_SIZE; in-process workers need it)")
	fs.IntVar(&s.Fragments, "fragments", s.Fragments, "local and diloco: cut the model into `P` fragments synchronized at staggered steps of each round, a P-th of the bytes each (0 or 1: the whole model at the round's end)")
	fs.IntVar(&s.Overlap, "overlap", s.Overlap, "local and diloco: each synchronization's all-reduce runs while the next `STEPS` local steps compute, and its mean is merged then, keeping the worker's own progress since (0: wait for it)")
	fs.BoolVar(&s.ErrorFeedback, "error-feedback", s.ErrorFeedback, "with --sync-bits, each worker adds what quantization took from its last contribution to the next")
}

// Validate implements train.StrategySettings: it reports the first
// setting out of range for strategy name ("local" or "diloco").
func (s *Settings) Validate(name string) error {
	switch {
	case !slices.Contains(SyncRules, s.Sync):
		return fmt.Errorf("unknown sync rule %q (want %s)", s.Sync, strings.Join(SyncRules, ", "))
	case (s.Sync == "constant" || s.Sync == "post-local") && s.H < 1:
		return fmt.Errorf("h %d: want ≥ 1", s.H)
	case (s.Sync == "power" || s.Sync == "qsr") && s.HBase < 1:
		return fmt.Errorf("h-base %d: want ≥ 1", s.HBase)
	case !(s.Alpha >= 0) || math.IsInf(s.Alpha, 0):
		return fmt.Errorf("qsr-alpha %v: want a finite value ≥ 0", s.Alpha)
	case s.Sync == "power" && (!(s.Gamma > 0) || math.IsInf(s.Gamma, 0)):
		return fmt.Errorf("power-gamma %v: want a finite value > 0", s.Gamma)
	case !(s.PostLocalSwitch >= 0) || math.IsInf(s.PostLocalSwitch, 0):
		return fmt.Errorf("post-local-switch %v epochs: want ≥ 0", s.PostLocalSwitch)
	case s.BNBatches < 0:
		return fmt.Errorf("bn-batches %d: want ≥ 0", s.BNBatches)
	case name == "diloco" && (!(s.OuterLR > 0) || math.IsInf(s.OuterLR, 0)):
		return fmt.Errorf("outer-lr %v: want a finite value > 0", s.OuterLR)
	case name == "diloco" && !(s.OuterMomentum >= 0 && s.OuterMomentum < 1):
		return fmt.Errorf("outer-momentum %v: want 0 ≤ momentum < 1", s.OuterMomentum)
	case name == "diloco" && s.OuterNesterov && s.OuterMomentum == 0:
		return fmt.Errorf("outer Nesterov momentum needs outer-momentum > 0")
	case s.SyncBits != 0 && s.SyncBits != 8 && s.SyncBits != 4:
		return fmt.Errorf("sync-bits %d: want 8 or 4 (0: float32)", s.SyncBits)
	case s.ErrorFeedback && s.SyncBits == 0:
		return fmt.Errorf("error-feedback needs sync-bits 8 or 4")
	case s.InnerH < 0 || s.NodeSize < 0:
		return fmt.Errorf("inner-h %d, node-size %d: want ≥ 0", s.InnerH, s.NodeSize)
	case s.NodeSize > 0 && s.InnerH == 0:
		return fmt.Errorf("node-size %d needs inner-h", s.NodeSize)
	case s.Fragments < 0 || s.Overlap < 0:
		return fmt.Errorf("fragments %d, overlap %d: want ≥ 0", s.Fragments, s.Overlap)
	case (s.Fragments > 1 || s.Overlap > 0) && (s.SyncBits != 0 || s.InnerH > 0):
		return fmt.Errorf("fragments and overlap send float32s on one level: drop sync-bits and inner-h, or them")
	}
	for _, f := range s.StateFields() {
		if !slices.Contains(StateFields, f) {
			return fmt.Errorf("average-state: unknown optimizer state field %q (want %s)", f, strings.Join(StateFields, ", "))
		}
	}
	return nil
}

// StateFields returns the fields named by AverageState.
func (s *Settings) StateFields() []string {
	var out []string
	for f := range strings.SplitSeq(s.AverageState, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Schedule returns the SyncSchedule that s names, for a run of
// stepsPerEpoch steps per epoch (post-local SGD's switch is in epochs).
func (s *Settings) Schedule(stepsPerEpoch int) (SyncSchedule, error) {
	var sched SyncSchedule
	switch s.Sync {
	case "constant":
		sched = Constant{H: s.H}
	case "post-local":
		sched = PostLocal{SwitchStep: int(math.Round(s.PostLocalSwitch * float64(stepsPerEpoch))), H: s.H}
	case "power":
		sched = Power{Alpha: s.Alpha, Gamma: s.Gamma, Base: s.HBase}
	case "qsr":
		sched = QSR(s.Alpha, s.HBase)
	default:
		return nil, fmt.Errorf("localopt: unknown sync rule %q (want %s)", s.Sync, strings.Join(SyncRules, ", "))
	}
	return sched, Validate(sched)
}

// options returns the Options of a run.
func (s *Settings) options(run train.StrategyRun) (Options, error) {
	sched, err := s.Schedule(run.StepsPerEpoch)
	if err != nil {
		return Options{}, err
	}
	opt := Options{Schedule: sched, AverageState: s.StateFields(), BNBatches: s.BNBatches, Context: run.Context,
		Optimizer: optim.NameOf(run.Config.Optimizer), Quantization: s.Quantization(), Fragments: s.Fragments, Overlap: s.Overlap}
	if s.InnerH > 0 {
		opt.InnerH, opt.NodeSize = s.InnerH, s.NodeSize
		if opt.NodeSize == 0 {
			opt.NodeSize = run.LocalSize
		}
		if opt.NodeSize == 0 {
			return Options{}, errors.New("inner-h: the workers per node are unknown: give node-size")
		}
	}
	return opt, nil
}

// Quantization returns the quantization of the synchronizations s asks for.
func (s *Settings) Quantization() train.Quantization {
	return train.Quantization{Bits: s.SyncBits, ErrorFeedback: s.ErrorFeedback}
}
