package train_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/localopt"
	_ "github.com/flockml/flock/sparse"
	"github.com/flockml/flock/train"
)

// TestStrategyConfigJSON checks that a strategy's settings travel in a
// Config's JSON as its family's fields beside "name", that a Config of
// before the registry (every strategy's fields in one object) decodes into
// the named strategy's settings, and that a strategy this program has not
// registered passes through unchanged.
func TestStrategyConfigJSON(t *testing.T) {
	cfg := train.DefaultConfig()
	set := localopt.DefaultSettings()
	set.Sync, set.H = "constant", 6
	cfg.Strategy = train.StrategyConfig{Name: "diloco", Settings: set}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back train.Config
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, ok := back.Strategy.Settings.(*localopt.Settings)
	if !ok || back.Strategy.Name != "diloco" || *got != *set {
		t.Errorf("%s decoded to %s %+v", b, back.Strategy.Name, back.Strategy.Settings)
	}

	legacy := `{"name":"dmsgd","sync":"qsr","h":8,"h_base":4,"alpha":0.2,"gamma":2,"bn_batches":16,"outer_lr":0.7,"budget":0.5,"topology":"one-peer-exp","local_steps":2}`
	var sc train.StrategyConfig
	if err := json.Unmarshal([]byte(legacy), &sc); err != nil {
		t.Fatal(err)
	}
	if g, ok := sc.Settings.(*gossip.Settings); !ok || g.Topology != "one-peer-exp" || g.LocalSteps != 2 {
		t.Errorf("legacy %s decoded to %+v", legacy, sc.Settings)
	}

	const foreign = `{"knob":3,"name":"elsewhere"}`
	if err := json.Unmarshal([]byte(foreign), &sc); err != nil {
		t.Fatal(err)
	}
	if err := sc.Validate(); err != nil {
		t.Errorf("an unregistered strategy without settings: %v", err)
	}
	if out, err := json.Marshal(sc); err != nil || string(out) != foreign {
		t.Errorf("unregistered strategy re-encoded as %s (%v), want %s", out, err, foreign)
	}
	if _, err := train.NewStrategy(nil, train.Config{Strategy: sc}, train.StrategyRun{}); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("building an unregistered strategy: %v", err)
	}
}

// TestStrategyValidate checks that each family's settings are validated
// for the strategy named, in the words of their flags.
func TestStrategyValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  train.StrategyConfig
		want string
	}{
		{train.StrategyConfig{Name: "local", Settings: &localopt.Settings{Sync: "sometimes"}}, `unknown sync rule "sometimes"`},
		{train.StrategyConfig{Name: "diloco", Settings: &localopt.Settings{Sync: "constant", H: 4}}, "outer-lr 0"},
		{train.StrategyConfig{Name: "swarm", Settings: &gossip.Settings{QuantBits: 17}}, "quant-bits 17"},
		{train.StrategyConfig{Name: "dmsgd", Settings: &gossip.Settings{Topology: "star"}}, `unknown topology "star"`},
		{train.StrategyConfig{Name: "local", Settings: &gossip.Settings{}}, "settings *gossip.Settings"},
	} {
		err := tt.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %+v: %v, want an error with %q", tt.cfg.Name, tt.cfg.Settings, err, tt.want)
		}
	}
	for _, name := range []string{"dp", "local", "diloco", "dmsgd", "swarm", "jointspar"} {
		if err := (train.StrategyConfig{Name: name}).Validate(); err != nil {
			t.Errorf("%s at its defaults: %v", name, err)
		}
	}
}

// TestStrategyNamesBeforeSetup checks that a strategy built from a Config
// names its optimizer before Setup, as flock train prints it in its header.
func TestStrategyNamesBeforeSetup(t *testing.T) {
	c := dist.NewLocal(1)[0]
	defer c.Close()
	for _, tt := range []struct{ strategy, want string }{
		{"local", "Local AdamW (QSR"},
		{"dmsgd", "decentralized AdamW over"},
	} {
		cfg := train.DefaultConfig()
		cfg.Optimizer = "adamw"
		cfg.Strategy = train.StrategyConfig{Name: tt.strategy}
		s, err := train.NewStrategy(c, cfg, train.StrategyRun{StepsPerEpoch: 10})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s with adamw: %q, want it to start %q", tt.strategy, got, tt.want)
		}
		s.Close()
	}
}
