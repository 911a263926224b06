package optim

import (
	"fmt"
	"math"
	"sort"
)

// Decay names the shape of a schedule after its warm-up.
type Decay int

// Decays.
const (
	Constant Decay = iota
	Cosine
	Step
	Linear
)

// ParseDecay maps "constant", "cosine", "step" and "linear" to a Decay.
func ParseDecay(s string) (Decay, error) {
	switch s {
	case "constant":
		return Constant, nil
	case "cosine":
		return Cosine, nil
	case "step":
		return Step, nil
	case "linear":
		return Linear, nil
	}
	return 0, fmt.Errorf("optim: unknown schedule %q (want constant, cosine, step or linear)", s)
}

func (d Decay) String() string {
	if d < Constant || d > Linear {
		return fmt.Sprintf("Decay(%d)", int(d))
	}
	return [...]string{"constant", "cosine", "step", "linear"}[d]
}

// Schedule is a learning-rate schedule: a linear warm-up followed by a
// decay. LR is a pure function of the step, so anything — the QSR sync
// rule reads the rate of the next step — may ask for any step at any time.
//
// With base rate η, warm-up length W, start factor s (WarmupStart, as a
// fraction of η), total steps T and final rate η_min (Final):
//
//	warm-up, t < W:  η_t = η·(s + (1−s)·t/W)
//	after it, with u = t − W and U = T − W:
//	  Constant:  η_t = η
//	  Cosine:    η_t = η_min + (η − η_min)·(1 + cos(π·min(u, U)/U))/2
//	  Linear:    η_t = η + (η_min − η)·min(u, U)/U
//	  Step:      η_t = η·γ^k, k = the number of Milestones ≤ t
//
// Steps count from 0; Milestones are absolute step numbers, as in
// torch.optim.lr_scheduler.MultiStepLR (a milestone listed twice counts
// twice). Final applies to Cosine and Linear; Milestones and Gamma to Step.
type Schedule struct {
	Base        float64
	Decay       Decay
	WarmupSteps int
	WarmupStart float64
	TotalSteps  int
	Final       float64
	Milestones  []int
	Gamma       float64
}

// Validate reports settings that are out of range or contradict each other.
func (s Schedule) Validate() error {
	switch {
	case s.Decay < Constant || s.Decay > Linear:
		return fmt.Errorf("optim: schedule: unknown decay %v", s.Decay)
	case s.Base < 0 || math.IsNaN(s.Base):
		return fmt.Errorf("optim: schedule: base rate %v", s.Base)
	case s.WarmupSteps < 0:
		return fmt.Errorf("optim: schedule: %d warm-up steps", s.WarmupSteps)
	case s.WarmupSteps > 0 && !(s.WarmupStart >= 0):
		return fmt.Errorf("optim: schedule: warm-up start factor %v", s.WarmupStart)
	case (s.Decay == Cosine || s.Decay == Linear) && s.TotalSteps <= s.WarmupSteps:
		return fmt.Errorf("optim: schedule: %v decay needs more total steps (%d) than warm-up steps (%d)", s.Decay, s.TotalSteps, s.WarmupSteps)
	case (s.Decay == Cosine || s.Decay == Linear) && !(s.Final >= 0):
		return fmt.Errorf("optim: schedule: final rate %v", s.Final)
	case s.Decay == Step && (!(s.Gamma > 0) || !sort.IntsAreSorted(s.Milestones)):
		return fmt.Errorf("optim: schedule: step decay needs gamma > 0 (got %v) and non-decreasing milestones (got %v)", s.Gamma, s.Milestones)
	}
	return nil
}

// LR returns the learning rate of step t (t ≥ 0).
func (s Schedule) LR(t int) float64 {
	if t < s.WarmupSteps {
		f := float64(t) / float64(s.WarmupSteps)
		return s.Base * (s.WarmupStart + (1-s.WarmupStart)*f)
	}
	u := float64(t - s.WarmupSteps)
	span := float64(s.TotalSteps - s.WarmupSteps)
	switch s.Decay {
	case Cosine:
		u = math.Min(u, span)
		return s.Final + (s.Base-s.Final)*(1+math.Cos(math.Pi*u/span))/2
	case Linear:
		u = math.Min(u, span)
		return s.Base + (s.Final-s.Base)*u/span
	case Step:
		k := sort.SearchInts(s.Milestones, t+1)
		return s.Base * math.Pow(s.Gamma, float64(k))
	}
	return s.Base
}
