package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/train"
)

// A strategy defined outside train and cmd/flock: the workers average
// their parameters every --mean-every steps. It is registered here as a
// package of its own would register it, with its settings and flag.
func init() {
	train.RegisterStrategy(train.StrategyKind{
		Name:     "test-mean",
		Summary:  "parameters averaged every --mean-every steps (a test's)",
		Settings: func() train.StrategySettings { return &meanSettings{Every: 2} },
		New: func(c dist.Comm, s train.StrategySettings, run train.StrategyRun) (train.Strategy, error) {
			return &meanStrategy{CommAccount: train.NewCommAccount(c, run.Context, "test-mean"), every: s.(*meanSettings).Every}, nil
		},
	})
}

type meanSettings struct {
	Every int `json:"mean_every"`
}

func (m *meanSettings) Flags(fs *flag.FlagSet) {
	fs.IntVar(&m.Every, "mean-every", m.Every, "test-mean: average every `N` steps")
}

func (m *meanSettings) Validate(string) error {
	if m.Every < 1 {
		return fmt.Errorf("mean-every %d: want ≥ 1", m.Every)
	}
	return nil
}

type meanStrategy struct {
	*train.CommAccount
	every int
	fp    *train.FlatParams
	bytes int64
}

func (m *meanStrategy) Setup(s *train.StepContext) error {
	params, bytes, err := train.Trainable(s.Params)
	if err != nil {
		return err
	}
	m.bytes = bytes
	if err := m.StartModel(s, true); err != nil {
		return err
	}
	m.fp, err = train.NewFlatParams(m.Comm(), params, nil, 0)
	return err
}

func (m *meanStrategy) AfterBackward(*train.StepContext) error { return nil }

func (m *meanStrategy) AfterStep(s *train.StepContext) error {
	m.Stepped(m.bytes)
	if (s.Step+1)%m.every != 0 {
		return nil
	}
	defer m.Block(time.Now())
	m.fp.Gather()
	if err := m.Collective("all-reduce", func(ctx context.Context) error {
		return m.Meter.AllReduce(ctx, m.fp.Flat, dist.Avg)
	}); err != nil {
		return err
	}
	m.fp.Scatter()
	m.Synced()
	return nil
}

func (m *meanStrategy) Close() {
	if m.fp != nil {
		m.fp.Release()
		m.fp = nil
	}
}

// TestRegisteredStrategy checks that a strategy registered outside train
// and cmd/flock trains under flock train with its own flag, that its
// settings are in the run record, and that its accounting reaches the
// summary.
func TestRegisteredStrategy(t *testing.T) {
	needData(t)
	var help bytes.Buffer
	trainHelp(&help)
	if !strings.Contains(help.String(), "test-mean (parameters averaged") || !strings.Contains(help.String(), "--mean-every N") {
		t.Errorf("flock train --help lists neither the strategy nor its flag:\n%s", help.String())
	}
	var stdout, stderr bytes.Buffer
	args := []string{"train", "--strategy", "test-mean", "--mean-every", "5", "--workers", "2", "--model", "mlp",
		"--train-images", "2000", "--epochs", "1", "--batch-size", "100", "--json"}
	if code := run(args, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var first struct {
		Config struct {
			Strategy map[string]any `json:"strategy"`
		} `json:"config"`
	}
	var sum struct {
		Steps int
		Comm  train.CommStats
	}
	if err := errors.Join(json.Unmarshal([]byte(lines[0]), &first), json.Unmarshal([]byte(lines[len(lines)-1]), &sum)); err != nil {
		t.Fatal(err)
	}
	if st := first.Config.Strategy; st["name"] != "test-mean" || st["mean_every"] != 5.0 {
		t.Errorf("run record's strategy %v", st)
	}
	if sum.Steps != 10 || sum.Comm.Syncs != 2 || sum.Comm.Sent == 0 || sum.Comm.Sent*5 != sum.Comm.DataParallelBytes {
		t.Errorf("summary %s: want 10 steps, 2 synchronizations sending a fifth of data parallel's bytes", lines[len(lines)-1])
	}
	if code := run(append(args, "--mean-every", "0"), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "mean-every 0") {
		t.Errorf("--mean-every 0: exit %d, stderr %q", code, stderr.String())
	}
}
