package localopt_test

import (
	"math"
	"testing"

	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/optim"
)

// specSchedule is the learning rate of the schedules' test vector (as
// flock sync-plan's help gives it): cosine from 0.1 to 0 over 110 steps
// after a linear warm-up from 0 of 10.
func specSchedule() optim.Schedule {
	return optim.Schedule{Base: 0.1, Decay: optim.Cosine, WarmupSteps: 10, WarmupStart: 0, TotalSteps: 110, Final: 0}
}

// TestQSRVector checks the rounds of QSR(α = 0.2, Hbase = 2) against the
// specification's vector.
func TestQSRVector(t *testing.T) {
	got := localopt.FormatRounds(localopt.Plan(localopt.QSR(0.2, 2), specSchedule(), 110))
	want := "0:2 2:2 4:2 6:2 8:2 10:4 14:4 18:4 22:4 26:4 30:4 34:5 39:6 45:7 52:10 62:18 80:30"
	if got != want {
		t.Errorf("rounds\n got %s\nwant %s", got, want)
	}
}

// TestPowerRule checks every round of the power rule against its formula,
// computed here from the schedule: H = Hbase in the warm-up or when α = 0,
// else max(Hbase, ⌊(α/η)^γ⌋), capped by the steps remaining.
func TestPowerRule(t *testing.T) {
	lr := specSchedule()
	for _, p := range []localopt.Power{
		{Alpha: 0.2, Gamma: 1, Base: 2},
		{Alpha: 0.2, Gamma: 3, Base: 2},
		{Alpha: 0.15, Gamma: 2, Base: 3},
		{Alpha: 0, Gamma: 2, Base: 3},
		{Alpha: 0, Gamma: 3, Base: 1},
	} {
		rounds := localopt.Plan(p, lr, 110)
		next := 0
		for _, r := range rounds {
			if r.Start != next {
				t.Fatalf("%v: round %v starts at %d, want %d", p, r, r.Start, next)
			}
			want := p.Base
			if r.Start >= lr.WarmupSteps && p.Alpha > 0 {
				want = max(p.Base, int(math.Floor(math.Pow(p.Alpha/lr.LR(r.Start), p.Gamma))))
			}
			want = min(want, 110-r.Start)
			if r.H != want {
				t.Errorf("%v: round at %d has H = %d, want %d", p, r.Start, r.H, want)
			}
			next += r.H
		}
		if next != 110 {
			t.Errorf("%v: rounds end at %d, want 110", p, next)
		}
		if p.Alpha == 0 {
			for _, r := range rounds[:len(rounds)-1] {
				if r.H != p.Base {
					t.Errorf("%v: α = 0 gives H = %d at %d, want Hbase", p, r.H, r.Start)
				}
			}
		}
	}
	// γ = 1 and 3 differ from QSR's vector, as the formula says they must.
	if a, b := localopt.FormatRounds(localopt.Plan(localopt.Power{Alpha: 0.2, Gamma: 1, Base: 2}, lr, 110)),
		localopt.FormatRounds(localopt.Plan(localopt.Power{Alpha: 0.2, Gamma: 3, Base: 2}, lr, 110)); a == b {
		t.Errorf("γ = 1 and γ = 3 give the same rounds %s", a)
	}
}

// TestZeroLR checks that a learning rate of zero (the last step of a
// cosine schedule to 0, or a constant 0) gives the steps remaining and no
// division by zero.
func TestZeroLR(t *testing.T) {
	zero := optim.Schedule{Base: 0, Decay: optim.Constant, TotalSteps: 50}
	if h := localopt.Next(localopt.QSR(0.1, 2), zero, 7, 50); h != 43 {
		t.Errorf("η = 0 from step 7 of 50: H = %d, want 43", h)
	}
	lr := specSchedule()
	if lr.LR(110) != 0 {
		t.Fatalf("the schedule's rate after the last step is %v, want 0", lr.LR(110))
	}
	if h := localopt.Next(localopt.Power{Alpha: 0.2, Gamma: 3, Base: 2}, lr, 109, 110); h != 1 {
		t.Errorf("last step: H = %d, want 1", h)
	}
}

func TestConstantAndPostLocal(t *testing.T) {
	lr := specSchedule()
	if got, want := localopt.FormatRounds(localopt.Plan(localopt.Constant{H: 4}, lr, 18)), "0:4 4:4 8:4 12:4 16:2"; got != want {
		t.Errorf("constant: %s, want %s", got, want)
	}
	if got, want := localopt.FormatRounds(localopt.Plan(localopt.PostLocal{SwitchStep: 3, H: 5}, lr, 14)), "0:1 1:1 2:1 3:5 8:5 13:1"; got != want {
		t.Errorf("post-local: %s, want %s", got, want)
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []localopt.SyncSchedule{
		nil, localopt.Constant{H: 0}, localopt.PostLocal{SwitchStep: -1, H: 2}, localopt.QSR(0.1, 0),
		localopt.QSR(-1, 2), localopt.QSR(math.Inf(1), 2), localopt.Power{Alpha: 0.1, Gamma: 0, Base: 1},
	} {
		if err := localopt.Validate(s); err == nil {
			t.Errorf("Validate(%v) accepted", s)
		}
	}
	if err := localopt.Validate(localopt.QSR(0.1, 2)); err != nil {
		t.Errorf("Validate(QSR): %v", err)
	}
}
