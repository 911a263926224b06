package localopt

import (
	"context"
	"fmt"
	"math"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/train"
)

// ScheduleOf returns the SyncSchedule that sc names, for a run of
// stepsPerEpoch steps per epoch (post-local SGD's switch is in epochs).
func ScheduleOf(sc train.StrategyConfig, stepsPerEpoch int) (SyncSchedule, error) {
	var s SyncSchedule
	switch sc.Sync {
	case "constant":
		s = Constant{H: sc.H}
	case "post-local":
		s = PostLocal{SwitchStep: int(math.Round(sc.PostLocalSwitch * float64(stepsPerEpoch))), H: sc.H}
	case "power":
		s = Power{Alpha: sc.Alpha, Gamma: sc.Gamma, Base: sc.HBase}
	case "qsr":
		s = QSR(sc.Alpha, sc.HBase)
	default:
		return nil, fmt.Errorf("localopt: unknown sync rule %q (want constant, post-local, power or qsr)", sc.Sync)
	}
	return s, Validate(s)
}

// NewStrategy returns the strategy that sc names over c: data parallel
// (train.DataParallel), Local or DiLoCo. Collectives are bounded by ctx
// (nil: each by dist.DefaultTimeout). The caller closes it when it has a
// Close method.
func NewStrategy(c dist.Comm, sc train.StrategyConfig, stepsPerEpoch int, ctx context.Context) (train.Strategy, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	if sc.Name == "" || sc.Name == "dp" {
		return train.NewDataParallel(c, train.DataParallelOptions{Context: ctx}), nil
	}
	sched, err := ScheduleOf(sc, stepsPerEpoch)
	if err != nil {
		return nil, err
	}
	opt := Options{Schedule: sched, AverageState: sc.StateFields(), BNBatches: sc.BNBatches, Context: ctx}
	if sc.Name == "diloco" {
		return NewDiLoCo(c, opt, OuterOptions{LR: sc.OuterLR, Momentum: sc.OuterMomentum, Nesterov: sc.OuterNesterov})
	}
	return NewLocal(c, opt)
}
