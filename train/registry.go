package train

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flockml/flock/dist"
)

// StrategySettings are the settings of a family of strategies — one
// package's (localopt's Local SGD and DiLoCo share theirs) — as a command
// line's flags and as the JSON of a Config. A settings value is a pointer
// to a struct whose JSON field names are its keys in a checkpoint.
type StrategySettings interface {
	// Flags defines the settings' flags on fs, bound to the fields and
	// with their current values as defaults.
	Flags(fs *flag.FlagSet)
	// Validate reports the first setting out of range for strategy name,
	// naming it as its flag does.
	Validate(name string) error
}

// Transport is what a strategy needs of the world's communicator.
type Transport int

const (
	// Collectives: any Comm (NCCL on GPUs, TCP or shared memory
	// otherwise).
	Collectives Transport = iota
	// PairsOverTCP: connections of its own between pairs of workers,
	// made through a TCP world (dist.Pairs), on a host copy of the model.
	PairsOverTCP
)

// StrategyKind is a strategy as a package registers it
// (RegisterStrategy): how to build it and what a launcher must know of it
// before it exists. What a run must know of a built strategy it asks of the
// strategy itself (Stateful, StopCoordinator, WorkerCheckpoints,
// IndependentWorkers, …).
type StrategyKind struct {
	// Name is the value of StrategyConfig.Name (flock train --strategy).
	Name string
	// Summary says in a line what the workers do.
	Summary string
	// Settings returns the family's settings at their defaults; the kinds
	// of one family return values of one type.
	Settings func() StrategySettings
	// New builds the strategy of one worker over c; settings are of
	// Settings' type.
	New func(c dist.Comm, settings StrategySettings, run StrategyRun) (Strategy, error)
	// Alone says that one worker alone gains from the strategy (JointSpar
	// saves gradient work on one worker too).
	Alone bool
	// Transport is what the strategy needs of the world.
	Transport Transport
	// NoCheckpoints, when set, says why runs of the strategy cannot be
	// checkpointed or resumed.
	NoCheckpoints string
	// Pattern says how the synchronizations of the strategy with these
	// settings travel (nil: an all-reduce).
	Pattern func(StrategySettings) CommPattern
}

// CommPattern says how a strategy's synchronizations travel, so that a
// run's communication can be projected onto other networks (package
// netmodel's patterns).
type CommPattern struct {
	// Kind is "allreduce" (a ring all-reduce of each synchronization's
	// payload), "neighbors" (each worker sends its model to its
	// out-neighbours in Graph) or "pairwise" (two workers swap models).
	Kind string `json:"pattern"`
	// Graph is the gossip topology (a kind of package gossip) of
	// "neighbors" and "pairwise".
	Graph string `json:"graph,omitempty"`
	// NodeSize is, for a two-level run, the workers of a node, whose
	// inner level all-reduces among them (0: one level, or the launcher's
	// node size, unknown here).
	NodeSize int `json:"node_size,omitempty"`
}

// PatternOf returns the CommPattern of the strategy s names.
func PatternOf(s StrategyConfig) CommPattern {
	k, ok := LookupStrategy(s.Name)
	if !ok || k.Pattern == nil {
		return CommPattern{Kind: "allreduce"}
	}
	return k.Pattern(s.SettingsOrDefault())
}

// StrategyRun is what a strategy's constructor knows of the run.
type StrategyRun struct {
	// Config is the run's configuration (its seed, its epochs).
	Config Config
	// StepsPerEpoch sizes the run.
	StepsPerEpoch int
	// Context bounds the strategy's collectives; it ends when another
	// worker fails (nil: context.Background).
	Context context.Context
	// LocalSize is the number of workers per node of a world started by a
	// launcher (its LOCAL_WORLD_SIZE), for strategies with a node level;
	// 0 when unknown, as for in-process workers.
	LocalSize int
}

var registry = struct {
	sync.Mutex
	kinds map[string]StrategyKind
}{kinds: map[string]StrategyKind{}}

// RegisterStrategy makes k a value of StrategyConfig.Name. Packages call it
// from an init function; it panics on a duplicate name or a kind without
// Settings or New.
func RegisterStrategy(k StrategyKind) {
	if k.Name == "" || k.Settings == nil || k.New == nil {
		panic("train: RegisterStrategy needs a name, Settings and New")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.kinds[k.Name]; dup {
		panic("train: strategy " + k.Name + " registered twice")
	}
	registry.kinds[k.Name] = k
}

// LookupStrategy returns the registered strategy name ("" is "dp").
func LookupStrategy(name string) (StrategyKind, bool) {
	if name == "" {
		name = "dp"
	}
	registry.Lock()
	defer registry.Unlock()
	k, ok := registry.kinds[name]
	return k, ok
}

// StrategyKinds returns the registered strategies, data parallel first,
// then by name.
func StrategyKinds() []StrategyKind {
	registry.Lock()
	defer registry.Unlock()
	out := make([]StrategyKind, 0, len(registry.kinds))
	for _, k := range registry.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b StrategyKind) int {
		if (a.Name == "dp") != (b.Name == "dp") {
			if a.Name == "dp" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// StrategyNames returns the names of StrategyKinds.
func StrategyNames() []string {
	var out []string
	for _, k := range StrategyKinds() {
		out = append(out, k.Name)
	}
	return out
}

// SettingsFamilies returns one settings value, at its defaults, of each
// family of the registered strategies (distinct types), in the order of
// StrategyKinds: a command defines the flags of all of them and gives each
// strategy its family's.
func SettingsFamilies() []StrategySettings {
	var out []StrategySettings
	seen := map[string]bool{}
	for _, k := range StrategyKinds() {
		s := k.Settings()
		if t := fmt.Sprintf("%T", s); !seen[t] {
			seen[t] = true
			out = append(out, s)
		}
	}
	return out
}

// SameFamily reports whether a and b are settings of one family.
func SameFamily(a, b StrategySettings) bool { return fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b) }

// NewStrategy builds the strategy that cfg names for the worker of c.
func NewStrategy(c dist.Comm, cfg Config, run StrategyRun) (Strategy, error) {
	k, ok := LookupStrategy(cfg.Strategy.Name)
	if !ok {
		return nil, fmt.Errorf("train: unknown strategy %q (want %s)", cfg.Strategy.Name, strings.Join(StrategyNames(), ", "))
	}
	if err := cfg.Strategy.Validate(); err != nil {
		return nil, err
	}
	run.Config = cfg
	return k.New(c, cfg.Strategy.SettingsOrDefault(), run)
}

// StrategyConfig names a multi-worker strategy and holds its family's
// settings. As JSON it is one object: "name" and the settings' fields.
type StrategyConfig struct {
	// Name is a registered strategy (StrategyNames); empty means "dp".
	Name string
	// Settings are the strategy family's (nil: its defaults).
	Settings StrategySettings
	// raw keeps the JSON of a strategy that is not registered in this
	// program, so that a checkpoint's Config passes through unchanged.
	raw string
}

// SettingsOrDefault returns Settings, or the registered defaults when it
// is nil (nil for an unregistered strategy).
func (s StrategyConfig) SettingsOrDefault() StrategySettings {
	if s.Settings != nil {
		return s.Settings
	}
	if k, ok := LookupStrategy(s.Name); ok {
		return k.Settings()
	}
	return nil
}

// Validate reports the first setting that is out of range, naming it as
// the command line does. A strategy that this program has not registered
// is valid only without settings (a name the Trainer carries, never
// builds).
func (s StrategyConfig) Validate() error {
	k, ok := LookupStrategy(s.Name)
	if !ok {
		if s.Settings == nil {
			return nil
		}
		return fmt.Errorf("train: config: unknown strategy %q (want %s)", s.Name, strings.Join(StrategyNames(), ", "))
	}
	set := s.SettingsOrDefault()
	if !SameFamily(set, k.Settings()) {
		return fmt.Errorf("train: config: strategy %s with settings %T, want %T", k.Name, set, k.Settings())
	}
	if err := set.Validate(k.Name); err != nil {
		return fmt.Errorf("train: config: %w", err)
	}
	return nil
}

// Clone returns a copy of s whose settings are its own.
func (s StrategyConfig) Clone() StrategyConfig {
	if s.Settings == nil {
		return s
	}
	k, ok := LookupStrategy(s.Name)
	if !ok || !SameFamily(k.Settings(), s.Settings) {
		return s
	}
	b, err := json.Marshal(s.Settings)
	if err != nil {
		panic(fmt.Sprintf("train: strategy settings %T: %v", s.Settings, err))
	}
	set := k.Settings()
	if err := json.Unmarshal(b, set); err != nil {
		panic(fmt.Sprintf("train: strategy settings %T: %v", s.Settings, err))
	}
	s.Settings = set
	return s
}

// MarshalJSON writes {"name": …, the settings' fields…}.
func (s StrategyConfig) MarshalJSON() ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if s.Settings == nil && s.raw != "" {
		if err := json.Unmarshal([]byte(s.raw), &fields); err != nil {
			return nil, err
		}
	} else if set := s.SettingsOrDefault(); set != nil {
		b, err := json.Marshal(set)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &fields); err != nil {
			return nil, fmt.Errorf("train: strategy settings %T are not a JSON object: %w", set, err)
		}
	}
	if s.Name != "" {
		name, _ := json.Marshal(s.Name)
		fields["name"] = name
	} else {
		delete(fields, "name")
	}
	return json.Marshal(fields)
}

// UnmarshalJSON reads what MarshalJSON wrote, into the registered
// family's settings; fields of other families (older checkpoints held
// every strategy's) are ignored.
func (s *StrategyConfig) UnmarshalJSON(b []byte) error {
	var head struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	*s = StrategyConfig{Name: head.Name}
	k, ok := LookupStrategy(head.Name)
	if !ok {
		s.raw = string(b)
		return nil
	}
	set := k.Settings()
	if err := json.Unmarshal(b, set); err != nil {
		return fmt.Errorf("strategy %s: %w", k.Name, err)
	}
	s.Settings = set
	return nil
}
