package job

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/nccl"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Device is where a process trains, named as cpu, cuda or cuda:N: the CPU,
// or a GPU whose Index −1 stands for the launcher's LOCAL_RANK (0 for a
// process alone).
type Device struct {
	GPU   bool
	Index int
}

// ParseDevice reads a device's name: cpu, cuda or cuda:N.
func ParseDevice(s string) (Device, error) {
	switch {
	case s == "cpu":
		return Device{}, nil
	case s == "cuda":
		return Device{GPU: true, Index: -1}, nil
	}
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		i, err := strconv.Atoi(rest)
		if err == nil && i >= 0 && rest == strconv.Itoa(i) {
			return Device{GPU: true, Index: i}, nil
		}
	}
	return Device{}, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
}

// String names d as ParseDevice reads it.
func (d Device) String() string {
	switch {
	case !d.GPU:
		return "cpu"
	case d.Index < 0:
		return "cuda"
	}
	return "cuda:" + strconv.Itoa(d.Index)
}

// Open returns the backend of d for a process whose launcher gave it
// localRank (0 without a launcher): nil for the CPU, whose backend is the
// default. A GPU needs the CUDA driver (libcuda.so.1) and the GPU itself;
// the error, "device cuda: …", says which was missing and what was looked
// for.
func (d Device) Open(localRank int) (tensor.Device, error) {
	if !d.GPU {
		return nil, nil
	}
	if ok, err := cuda.Available(); !ok {
		return nil, fmt.Errorf("device %s: %v", d, err)
	}
	i := d.Index
	if i < 0 {
		i = localRank
	}
	if n := cuda.DeviceCount(); i >= n {
		return nil, fmt.Errorf("device %s: GPU %d wanted, %d found (cuda:0 to cuda:%d)", d, i, n, n-1)
	}
	dev, err := backend.Get(cuda.Name + ":" + strconv.Itoa(i))
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", d, err)
	}
	return dev, nil
}

// NCCLWorld reports whether a launched process training on dev with a
// strategy of the given transport joins its world through NCCL: on a GPU,
// for every strategy but those whose partners talk over TCP connections
// of their own (train.PairsOverTCP: Swarm's, made through a TCP world,
// whose arithmetic works on a host copy of the model). Elsewhere the world
// is TCP (shared memory on one host), and the strategies stage a GPU
// model's values through host buffers.
func NCCLWorld(dev tensor.Device, transport train.Transport) bool {
	_, gpu := dev.(*cuda.Backend)
	return gpu && transport != train.PairsOverTCP
}

// JoinWorld returns the world communicator of a launched process: NCCL on
// its GPU where NCCLWorld says so (the unique id made by rank 0 and handed
// out through the job's rendezvous store), dist.Init's otherwise.
func JoinWorld(ctx context.Context, env dist.Env, dev tensor.Device, transport train.Transport, opts dist.InitOptions) (dist.Comm, error) {
	if !NCCLWorld(dev, transport) {
		return dist.Init(ctx, env, opts)
	}
	c, err := nccl.Init(ctx, env, dev.(*cuda.Backend), opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}
