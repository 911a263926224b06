package localopt

import (
	"fmt"
	"math"
	"strings"

	"github.com/flockml/flock/optim"
)

// RoundStart is what a SyncSchedule sees when it chooses the length of the
// round that starts at Step.
type RoundStart struct {
	// Step is the round's first step (0-based over the whole run).
	Step int
	// LR is the learning rate of that step.
	LR float64
	// Warmup reports whether Step is inside the learning rate's warm-up.
	Warmup bool
}

// SyncSchedule chooses the synchronization period H of each round: the
// number of local steps the workers take from the common parameters before
// they average them again. H is chosen once per round, from the learning
// rate of the round's first step, and never changes mid-round. Callers cap
// H at the steps remaining in the run (Plan and the strategies do).
type SyncSchedule interface {
	// Period returns H ≥ 1 for the round starting at r.
	Period(r RoundStart) int
	// String names the schedule and its settings, as flock prints them.
	String() string
}

// Constant synchronizes every H steps.
type Constant struct{ H int }

// Period implements SyncSchedule.
func (c Constant) Period(RoundStart) int { return c.H }

func (c Constant) String() string { return fmt.Sprintf("constant H = %d", c.H) }

// PostLocal is post-local SGD (Lin et al., 2020): H = 1 — plain data
// parallelism in effect — before SwitchStep, then H. It does not look at
// the warm-up: the switch step says when local steps begin.
type PostLocal struct {
	SwitchStep int
	H          int
}

// Period implements SyncSchedule.
func (p PostLocal) Period(r RoundStart) int {
	if r.Step < p.SwitchStep {
		return 1
	}
	return p.H
}

func (p PostLocal) String() string {
	return fmt.Sprintf("post-local H = %d from step %d", p.H, p.SwitchStep)
}

// Power is the power-law synchronization rule of Gu et al. (2023),
// "Why (and when) does local SGD generalize better than SGD?":
//
//	H = max(Hbase, ⌊(α/η)^γ⌋)
//
// with η the learning rate of the round's first step. During the
// learning rate's warm-up, and when α = 0, H = Hbase. A learning rate of
// zero gives an unbounded period (capped by the steps remaining). γ = 2 is
// the Quadratic Synchronization Rule (QSR); γ = 1 and γ = 3 are the paper's
// comparison rules.
type Power struct {
	Alpha, Gamma float64
	Base         int
}

// QSR returns the Quadratic Synchronization Rule H = max(Hbase, ⌊(α/η)²⌋).
func QSR(alpha float64, hBase int) Power { return Power{Alpha: alpha, Gamma: 2, Base: hBase} }

// maxPeriod bounds H so that the float-to-int conversion never overflows.
const maxPeriod = 1 << 30

// Period implements SyncSchedule.
func (p Power) Period(r RoundStart) int {
	if r.Warmup || p.Alpha == 0 {
		return p.Base
	}
	if !(r.LR > 0) {
		return maxPeriod
	}
	h := math.Floor(math.Pow(p.Alpha/r.LR, p.Gamma))
	if !(h < maxPeriod) {
		return maxPeriod
	}
	return max(p.Base, int(h))
}

func (p Power) String() string {
	if p.Gamma == 2 {
		return fmt.Sprintf("QSR α = %g, Hbase = %d", p.Alpha, p.Base)
	}
	return fmt.Sprintf("power rule α = %g, γ = %g, Hbase = %d", p.Alpha, p.Gamma, p.Base)
}

// Validate reports settings a SyncSchedule cannot run with.
func Validate(s SyncSchedule) error {
	switch s := s.(type) {
	case nil:
		return fmt.Errorf("localopt: no sync schedule")
	case Constant:
		if s.H < 1 {
			return fmt.Errorf("localopt: constant H = %d: want ≥ 1", s.H)
		}
	case PostLocal:
		if s.H < 1 || s.SwitchStep < 0 {
			return fmt.Errorf("localopt: post-local H = %d from step %d: want H ≥ 1 and a step ≥ 0", s.H, s.SwitchStep)
		}
	case Power:
		if s.Base < 1 {
			return fmt.Errorf("localopt: Hbase = %d: want ≥ 1", s.Base)
		}
		if !(s.Alpha >= 0) || math.IsInf(s.Alpha, 0) {
			return fmt.Errorf("localopt: α = %v: want a finite value ≥ 0", s.Alpha)
		}
		if !(s.Gamma > 0) || math.IsInf(s.Gamma, 0) {
			return fmt.Errorf("localopt: γ = %v: want a finite value > 0", s.Gamma)
		}
	}
	return nil
}

// Round is one round of a plan: H local steps from step Start.
type Round struct{ Start, H int }

func (r Round) String() string { return fmt.Sprintf("%d:%d", r.Start, r.H) }

// Next returns the period of the round that starts at step of a run of
// total steps under the learning-rate schedule lr: s's choice from the
// rate of that step, capped by the steps remaining.
func Next(s SyncSchedule, lr optim.Schedule, step, total int) int {
	h := s.Period(RoundStart{Step: step, LR: lr.LR(step), Warmup: step < lr.WarmupSteps})
	return max(1, min(h, total-step))
}

// Plan returns the rounds of a run of total steps, from its first step.
func Plan(s SyncSchedule, lr optim.Schedule, total int) []Round {
	var rounds []Round
	for t := 0; t < total; {
		h := Next(s, lr, t, total)
		rounds = append(rounds, Round{t, h})
		t += h
	}
	return rounds
}

// FormatRounds writes rounds as space-separated start:H pairs.
func FormatRounds(rounds []Round) string {
	parts := make([]string, len(rounds))
	for i, r := range rounds {
		parts[i] = r.String()
	}
	return strings.Join(parts, " ")
}
