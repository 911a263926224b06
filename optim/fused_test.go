package optim_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// composedOnly is the CPU backend seen only through backend.Backend: it has
// no fused optimizer kernels, so the optimizers compose their updates.
type composedOnly struct{ backend.Backend }

// countingFused is the CPU backend counting its fused updates.
type countingFused struct {
	*cpu.Backend
	sgd, adamw atomic.Int64
}

func (c *countingFused) SGDStep(param, grad, buf backend.View, p backend.SGDParams) error {
	c.sgd.Add(1)
	return c.Backend.SGDStep(param, grad, buf, p)
}

func (c *countingFused) AdamWStep(param, grad, m, v backend.View, p backend.AdamWParams) error {
	c.adamw.Add(1)
	return c.Backend.AdamWStep(param, grad, m, v, p)
}

// runGoldenOn steps golden case name on dev and checks every step against
// torch.
func runGoldenOn(t *testing.T, g *goldenFile, name string, pr goldenPrecision, dev tensor.Device) {
	t.Helper()
	on := func(key string) *tensor.Tensor {
		x := g.get(t, key, pr.dt)
		defer x.Release()
		return x.To(dev)
	}
	r := &goldenRun{w: autograd.Param(on(name + ".w0")), b: autograd.Param(on(name + ".b0"))}
	t.Cleanup(func() { r.w.Release(); r.b.Release() })
	r.opt = buildOptimizer(t, g.cases[name], r.w, r.b)
	defer r.opt.Release()
	for k := range goldenSteps {
		r.w.SetGrad(on(fmt.Sprintf("%s.gw.%d", name, k)))
		r.b.SetGrad(on(fmt.Sprintf("%s.gb.%d", name, k)))
		r.opt.Step()
		r.check(t, g, name, k, pr.tol)
	}
}

// TestGoldenComposed runs the golden cases on a device without fused
// kernels, so that the composed updates stay checked against torch.
func TestGoldenComposed(t *testing.T) {
	g := openGoldenOptim(t)
	dev := composedOnly{cpu.New()}
	for _, name := range g.names() {
		for _, pr := range goldenPrecisions {
			t.Run(fmt.Sprintf("%s/%v", name, pr.dt), func(t *testing.T) {
				t.Parallel()
				runGoldenOn(t, g, name, pr, dev)
			})
		}
	}
}

// TestGoldenFusedTaken checks that SGD and AdamW (without AMSGrad) do use a
// device's fused kernels, and still match torch.
func TestGoldenFusedTaken(t *testing.T) {
	g := openGoldenOptim(t)
	for _, name := range g.names() {
		c := g.cases[name]
		for _, pr := range goldenPrecisions {
			t.Run(fmt.Sprintf("%s/%v", name, pr.dt), func(t *testing.T) {
				dev := &countingFused{Backend: cpu.New()}
				runGoldenOn(t, g, name, pr, dev)
				var want, got int64
				switch {
				case c.Kind == "sgd":
					want, got = 2*goldenSteps, dev.sgd.Load()
				case c.Kind == "adamw" && !c.AMSGrad:
					want, got = 2*goldenSteps, dev.adamw.Load()
				default:
					got = dev.sgd.Load() + dev.adamw.Load()
				}
				if got != want {
					t.Errorf("%d fused updates, want %d", got, want)
				}
			})
		}
	}
}

// BenchmarkSGDStep compares SGD with momentum on ResNet-18's 11.2M
// parameters (one tensor) with the fused kernel and composed.
func BenchmarkSGDStep(b *testing.B) {
	for _, c := range []struct {
		name string
		dev  tensor.Device
	}{{"fused", cpu.New()}, {"composed", composedOnly{cpu.New()}}} {
		b.Run(c.name, func(b *testing.B) {
			g := tensor.NewGenerator(1)
			w0 := g.Randn(tensor.Shape{11 << 20})
			defer w0.Release()
			p := autograd.Param(w0.To(c.dev))
			defer p.Release()
			opt := optim.NewSGD([]*optim.Group{optim.NewGroup([]*autograd.Var{p}, nil, 0.01, 5e-4)}, optim.SGDOptions{Momentum: 0.9})
			defer opt.Release()
			grad := g.Randn(tensor.Shape{11 << 20})
			p.SetGrad(grad.To(c.dev))
			grad.Release()
			for b.Loop() {
				opt.Step()
			}
		})
	}
}
