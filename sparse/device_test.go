package sparse_test

import (
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/nn/nntest"
	"github.com/flockml/flock/sparse"
	"github.com/flockml/flock/train"
)

// TestOnCommDevice checks that JointSpar hands a Comm that claims a device
// of its own (as NCCL's claim their GPU) its buffer on that device — the
// wrapper panics on any other operand — and that the copies between it
// and the parameters leave the run exactly as on a host Comm.
func TestOnCommDevice(t *testing.T) {
	t.Parallel()
	data := bands(64, 1, 5)
	cfg := smallConfig("sgd")
	for _, opt := range []sparse.Options{{Budget: 0.5, Seed: 3}, {Budget: 0.5, Seed: 3, PerWorker: true}, {Budget: 0.5, Seed: 3, Balanced: true}} {
		host, _ := trainK(t, cfg, data, 2, jointspar(opt), 0, "")
		dev := cpu.New()
		placed, _ := trainK(t, cfg, data, 2, func(c dist.Comm) train.Strategy {
			return jointspar(opt)(commtest.OnDevice([]dist.Comm{c}, dev)[0])
		}, 0, "")
		if d := nntest.MaxDiff(host, placed); d != 0 {
			t.Errorf("per worker %v, balanced %v: the run over a Comm on a second CPU differs from the host Comm's by %.3g", opt.PerWorker, opt.Balanced, d)
		}
	}
}
