package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/tensor"
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
	fs.StringVar(device, "device", *device, "where the model, its optimizer state and the batches live: cpu, cuda (the GPU of the launcher's LOCAL_RANK, GPU 0 alone) or cuda:N")
}

// placeOnDevice opens the --device of a process with the given local rank
// and makes it the default of new tensors, so that the model, the optimizer's
// state and the batches are made there. It returns the exit status of a
// failure, having reported it in one line, or −1.
func placeOnDevice(device string, localRank, workers int, launched bool, stderr io.Writer) int {
	dc, err := parseDevice(device)
	if err != nil {
		return usageError(stderr, "%v", err)
	}
	dev, err := dc.open(localRank)
	if err != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		return exitUsage
	}
	if dev == nil {
		return -1
	}
	if workers > 1 || launched {
		// The strategies' buffers and the in-process and TCP communicators
		// work on host memory.
		return usageError(stderr, "--device %s trains one worker alone (--workers 1, no launcher): the strategies run on the CPU", dc)
	}
	tensor.SetDefaultDevice(dev)
	return -1
}
