package dist_test

import (
	"context"
	"testing"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/commtest"
	"github.com/flockml/flock/tensor"
)

// TestDeviceOf checks where a Comm's operands live: the host for the
// transports that are not Placed, whatever host device a tensor is on;
// the Comm's own device for a Placed one, and only that device; a Meter
// answers as the Comm it wraps.
func TestDeviceOf(t *testing.T) {
	t.Parallel()
	other := cpu.New()
	onDefault := tensor.Zeros(tensor.Shape{3})
	defer onDefault.Release()
	onOther := tensor.Zeros(tensor.Shape{3}, tensor.On(other))
	defer onOther.Release()
	host := dist.NewLocal(1)[0]
	defer host.Close()
	placed := commtest.OnDevice(dist.NewLocal(1), other)[0]
	defer placed.Close()
	for _, c := range []struct {
		name                string
		c                   dist.Comm
		dev                 tensor.Device
		holdsDef, holdsOthr bool
	}{
		{"nil", nil, cpu.Default(), true, true},
		{"host", host, cpu.Default(), true, true},
		{"host meter", dist.NewMeter(host), cpu.Default(), true, true},
		{"placed", placed, other, false, true},
		{"placed meter", dist.NewMeter(placed), other, false, true},
	} {
		if got := dist.DeviceOf(c.c); got != c.dev {
			t.Errorf("%s: DeviceOf = %s, want %s", c.name, got.Name(), c.dev.Name())
		}
		if got := dist.Holds(c.c, onDefault); got != c.holdsDef {
			t.Errorf("%s: Holds(tensor on the default CPU) = %v, want %v", c.name, got, c.holdsDef)
		}
		if got := dist.Holds(c.c, onOther); got != c.holdsOthr {
			t.Errorf("%s: Holds(tensor on a second CPU) = %v, want %v", c.name, got, c.holdsOthr)
		}
	}
}

// TestMeanOnDevice checks that Mean hands a Placed Comm its operand on the
// Comm's device (the wrapper panics otherwise).
func TestMeanOnDevice(t *testing.T) {
	t.Parallel()
	cs := commtest.OnDevice(dist.NewLocal(2), cpu.New())
	defer closeAll(cs)
	got := make([]float64, 2)
	errs := ranks(cs, func(r int, c dist.Comm) (err error) {
		got[r], err = dist.Mean(context.Background(), dist.NewMeter(c), float64(r+1))
		return err
	})
	for r, err := range errs {
		if err != nil || got[r] != 1.5 {
			t.Errorf("rank %d: Mean = %v, %v; want 1.5", r, got[r], err)
		}
	}
}
