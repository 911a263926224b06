package commtest

import (
	"context"
	"fmt"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
)

// OnDevice wraps host communicators so that they claim dev as their
// operands' device (dist.Placed), as NCCL's claim their GPU, and panic, as
// NCCL's do, when an operand lies elsewhere. With dev a second CPU backend
// (cpu.New()) it lets a test on the CPU check that a strategy allocates its
// communication buffers where the Comm wants them and copies between them
// and parameters on another device.
func OnDevice(cs []dist.Comm, dev tensor.Device) []dist.Comm {
	out := make([]dist.Comm, len(cs))
	for i, c := range cs {
		out[i] = &placed{Comm: c, dev: dev}
	}
	return out
}

type placed struct {
	dist.Comm
	dev tensor.Device
}

var _ dist.Placed = (*placed)(nil)

func (p *placed) Device() tensor.Device { return p.dev }

// check panics unless every operand of op lies on p's device.
func (p *placed) check(op string, ts ...*tensor.Tensor) {
	for _, t := range ts {
		if t.Device() != p.dev {
			panic(fmt.Sprintf("commtest: %s: operand on %s (%p), not on the Comm's device %s (%p)", op, t.Device().Name(), t.Device(), p.dev.Name(), p.dev))
		}
	}
}

func (p *placed) AllReduce(ctx context.Context, t *tensor.Tensor, op dist.ReduceOp) error {
	p.check("all-reduce", t)
	return p.Comm.AllReduce(ctx, t, op)
}

func (p *placed) ReduceScatter(ctx context.Context, dst, src *tensor.Tensor, op dist.ReduceOp) error {
	p.check("reduce-scatter", dst, src)
	return p.Comm.ReduceScatter(ctx, dst, src, op)
}

func (p *placed) AllGather(ctx context.Context, dst, src *tensor.Tensor) error {
	p.check("all-gather", dst, src)
	return p.Comm.AllGather(ctx, dst, src)
}

func (p *placed) Broadcast(ctx context.Context, t *tensor.Tensor, root int) error {
	p.check("broadcast", t)
	return p.Comm.Broadcast(ctx, t, root)
}

func (p *placed) Send(ctx context.Context, t *tensor.Tensor, to, tag int) error {
	p.check("send", t)
	return p.Comm.Send(ctx, t, to, tag)
}

func (p *placed) Recv(ctx context.Context, t *tensor.Tensor, from, tag int) error {
	p.check("recv", t)
	return p.Comm.Recv(ctx, t, from, tag)
}

func (p *placed) NewGroup(ctx context.Context, ranks []int) (dist.Comm, error) {
	g, err := p.Comm.NewGroup(ctx, ranks)
	if err != nil || g == nil {
		return g, err
	}
	return &placed{Comm: g, dev: p.dev}, nil
}
