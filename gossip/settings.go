package gossip

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/train"
)

func init() {
	train.RegisterStrategy(train.StrategyKind{
		Name:     "dmsgd",
		Summary:  "decentralized momentum SGD: each worker averages with its --topology neighbours",
		Settings: func() train.StrategySettings { return DefaultSettings() },
		Pattern: func(s train.StrategySettings) train.CommPattern {
			return train.CommPattern{Kind: "neighbors", Graph: s.(*Settings).TopologyOf("dmsgd")}
		},
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			set := s.(*Settings)
			top, err := set.topology("dmsgd", c.Size(), run.Config.Seed)
			if err != nil {
				return nil, err
			}
			return NewDmSGD(c, DmSGDOptions{Topology: top, LocalSteps: set.LocalSteps, Context: run.Context, Optimizer: optim.NameOf(run.Config.Optimizer)})
		},
	})
	train.RegisterStrategy(train.StrategyKind{
		Name:          "swarm",
		Summary:       "Swarm SGD: after its local steps a worker averages with one partner, asynchronously",
		Settings:      func() train.StrategySettings { return DefaultSettings() },
		Transport:     train.PairsOverTCP,
		NoCheckpoints: "its workers stop at different steps",
		Pattern: func(s train.StrategySettings) train.CommPattern {
			return train.CommPattern{Kind: "pairwise", Graph: s.(*Settings).TopologyOf("swarm")}
		},
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			set := s.(*Settings)
			top, err := set.topology("swarm", c.Size(), run.Config.Seed)
			if err != nil {
				return nil, err
			}
			return NewSwarm(c, SwarmOptions{
				Topology: top, LocalSteps: set.LocalSteps, Geometric: set.Geometric, NonBlocking: set.NonBlocking,
				QuantBits: set.QuantBits, Sequential: set.Sequential, Seed: run.Config.Seed, Timeout: set.PartnerTimeout, Context: run.Context,
			})
		},
	})
}

// Settings configure DmSGD and Swarm as flock train's flags do
// (train.StrategySettings).
type Settings struct {
	// Topology names the graph (one of Kinds): DmSGD's mixing graph,
	// Swarm's partners (static, taken as undirected). Empty means exp for
	// DmSGD and full for Swarm.
	Topology string `json:"topology,omitempty"`
	// LocalSteps is DmSGD's J, the steps between mixings, and Swarm's H,
	// the steps between a worker's interactions (0: 1).
	LocalSteps int `json:"local_steps,omitempty"`
	// Swarm only: QuantBits sends models quantized (0: full precision);
	// NonBlocking lets the initiator go on computing; Geometric draws each
	// round's steps geometric with mean LocalSteps; Sequential runs the
	// reproducible one-pair-per-tick form; PartnerTimeout drops a partner
	// silent that long (0: one minute).
	QuantBits      int           `json:"quant_bits,omitempty"`
	NonBlocking    bool          `json:"non_blocking,omitempty"`
	Geometric      bool          `json:"geometric,omitempty"`
	Sequential     bool          `json:"sequential,omitempty"`
	PartnerTimeout time.Duration `json:"partner_timeout,omitempty"`
}

var _ train.StrategySettings = (*Settings)(nil)

// DefaultSettings are flock train's: each kind's graph, a mixing or an
// interaction after every step.
func DefaultSettings() *Settings { return &Settings{LocalSteps: 1} }

// Flags implements train.StrategySettings.
func (s *Settings) Flags(fs *flag.FlagSet) {
	fs.StringVar(&s.Topology, "topology", s.Topology, "dmsgd: the graph whose neighbours average (default exp), swarm: the graph whose edges are the partners (static, taken as undirected; default full); one of "+strings.Join(Kinds(), ", ")+" ('flock topology' prints them)")
	fs.IntVar(&s.LocalSteps, "local-steps", s.LocalSteps, "dmsgd: `J` local steps between mixings; swarm: H, the local steps between a worker's interactions")
	fs.IntVar(&s.QuantBits, "quant-bits", s.QuantBits, "swarm: send models quantized to `B` bits a coordinate, 1 to 16 (0: full precision)")
	fs.BoolVar(&s.NonBlocking, "non-blocking", s.NonBlocking, "swarm: the initiator goes on computing and applies its partner's answer later")
	fs.BoolVar(&s.Geometric, "geometric", s.Geometric, "swarm: draw each round's local steps geometric with mean --local-steps")
	fs.BoolVar(&s.Sequential, "sequential", s.Sequential, "swarm: one random pair interacts per tick, drawn from --seed (reproducible)")
	fs.DurationVar(&s.PartnerTimeout, "partner-timeout", s.PartnerTimeout, "swarm: drop a partner that does not answer within `D` (0: 1m)")
}

// Validate implements train.StrategySettings for "dmsgd" and "swarm".
func (s *Settings) Validate(name string) error {
	switch {
	case s.Topology != "" && !slices.Contains(Kinds(), s.Topology):
		return fmt.Errorf("unknown topology %q (want %s)", s.Topology, strings.Join(Kinds(), ", "))
	case s.LocalSteps < 0:
		return fmt.Errorf("local-steps %d: want ≥ 0", s.LocalSteps)
	case name == "swarm" && (s.QuantBits < 0 || s.QuantBits > 16):
		return fmt.Errorf("quant-bits %d: want 0 (full precision) to 16", s.QuantBits)
	case name == "swarm" && s.NonBlocking && s.Sequential:
		return fmt.Errorf("--non-blocking and --sequential exclude each other")
	case s.PartnerTimeout < 0:
		return fmt.Errorf("partner-timeout %v: want ≥ 0", s.PartnerTimeout)
	}
	return nil
}

// TopologyOf returns the kind of graph strategy name ("dmsgd" or
// "swarm") runs over.
func (s *Settings) TopologyOf(name string) string {
	switch {
	case s.Topology != "":
		return s.Topology
	case name == "swarm":
		return "full"
	}
	return "exp"
}

func (s *Settings) topology(name string, n int, seed uint64) (Topology, error) {
	return New(Spec{Kind: s.TopologyOf(name), N: n, Seed: seed})
}
