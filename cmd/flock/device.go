package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/nccl"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// deviceChoice is a parsed --device: the CPU, or a GPU (index −1: the
// launcher's LOCAL_RANK, 0 for a process alone).
type deviceChoice struct {
	gpu   bool
	index int
}

// parseDevice reads --device: cpu, cuda or cuda:N.
func parseDevice(s string) (deviceChoice, error) {
	switch {
	case s == "cpu":
		return deviceChoice{}, nil
	case s == "cuda":
		return deviceChoice{gpu: true, index: -1}, nil
	}
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		i, err := strconv.Atoi(rest)
		if err == nil && i >= 0 && rest == strconv.Itoa(i) {
			return deviceChoice{gpu: true, index: i}, nil
		}
	}
	return deviceChoice{}, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
}

// String names the choice as --device does.
func (d deviceChoice) String() string {
	switch {
	case !d.gpu:
		return "cpu"
	case d.index < 0:
		return "cuda"
	}
	return "cuda:" + strconv.Itoa(d.index)
}

// open returns the backend of d for a process whose launcher gave it
// localRank (0 without a launcher): nil for the CPU, whose backend is the
// default. A GPU needs the CUDA driver (libcuda.so.1) and the GPU itself;
// the error says which was missing and what was looked for.
func (d deviceChoice) open(localRank int) (tensor.Device, error) {
	if !d.gpu {
		return nil, nil
	}
	if ok, err := cuda.Available(); !ok {
		return nil, fmt.Errorf("--device %s: %v", d, err)
	}
	i := d.index
	if i < 0 {
		i = localRank
	}
	if n := cuda.DeviceCount(); i >= n {
		return nil, fmt.Errorf("--device %s: GPU %d wanted, %d found (cuda:0 to cuda:%d)", d, i, n, n-1)
	}
	dev, err := backend.Get(cuda.Name + ":" + strconv.Itoa(i))
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", d, err)
	}
	return dev, nil
}

// deviceFlag adds --device to fs.
func deviceFlag(fs *flag.FlagSet, device *string) {
	fs.StringVar(device, "device", *device, "where the model, its optimizer state and the batches live: cpu, cuda (the GPU of the launcher's LOCAL_RANK, GPU 0 alone) or cuda:N; on a GPU --workers defaults to 1, and several workers are one process per GPU (flock run --nproc gpu)")
}

// gpuWorkers checks the in-process workers of a run on a GPU: one, which
// is also the default there (workersGiven false), or a launcher's rank.
// Several in-process workers on one GPU are refused: they would queue
// their kernels on the one compute stream of the GPU, one after another,
// for the speed of one worker with their batches together, and flock run
// gives one process per GPU instead, joined by NCCL.
func gpuWorkers(dc deviceChoice, workers int, workersGiven, launched bool) (int, error) {
	if !dc.gpu || launched {
		return workers, nil
	}
	if !workersGiven {
		return 1, nil
	}
	if workers > 1 {
		return 0, fmt.Errorf("--device %s trains one worker per process (--workers 1): for %d workers start one process per GPU, flock run --nproc %d -- flock train --device cuda (or --nproc gpu for every GPU of the node)", dc, workers, workers)
	}
	return workers, nil
}

// placeOnDevice opens the --device of a process with the given local rank
// and makes it the default of new tensors, so that what ops allocate on
// their own is made there too (the run places its model, the optimizer's
// state and the batches by train.Config.Device); it sets *workers as
// gpuWorkers says. It returns the device (nil for the CPU) and the exit
// status of a failure, having reported it in one line, or −1.
func placeOnDevice(device string, localRank int, workers *int, workersGiven, launched bool, stderr io.Writer) (tensor.Device, int) {
	dc, err := parseDevice(device)
	if err != nil {
		return nil, usageError(stderr, "%v", err)
	}
	n, err := gpuWorkers(dc, *workers, workersGiven, launched)
	if err != nil {
		return nil, usageError(stderr, "%v", err)
	}
	*workers = n
	dev, err := dc.open(localRank)
	if err != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		return nil, exitUsage
	}
	if dev != nil {
		tensor.SetDefaultDevice(dev)
	}
	return dev, -1
}

// ncclWorld reports whether a launched process training on dev with a
// strategy that needs transport joins its world through NCCL: on a GPU,
// for every strategy but those whose partners talk over TCP connections
// of their own (train.PairsOverTCP: Swarm's, made through a TCP world,
// whose arithmetic works on a host copy of the model). Elsewhere the world
// is TCP (shared memory on one host), and the strategies stage a GPU
// model's values through host buffers.
func ncclWorld(dev tensor.Device, transport train.Transport) bool {
	_, gpu := dev.(*cuda.Backend)
	return gpu && transport != train.PairsOverTCP
}

// joinWorld returns the world communicator of a launched process: NCCL on
// its GPU where ncclWorld says so (the unique id made by rank 0 and handed
// out through the job's rendezvous store), dist.Init's otherwise.
func joinWorld(ctx context.Context, env dist.Env, dev tensor.Device, transport train.Transport, opts dist.InitOptions) (dist.Comm, error) {
	if !ncclWorld(dev, transport) {
		return dist.Init(ctx, env, opts)
	}
	c, err := nccl.Init(ctx, env, dev.(*cuda.Backend), opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}
