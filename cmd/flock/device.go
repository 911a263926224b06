package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/flockml/flock/job"
	"github.com/flockml/flock/tensor"
)

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
func gpuWorkers(dc job.Device, workers int, workersGiven, launched bool) (int, error) {
	if !dc.GPU || launched {
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
	dc, err := job.ParseDevice(device)
	if err != nil {
		return nil, usageError(stderr, "%v", err)
	}
	n, err := gpuWorkers(dc, *workers, workersGiven, launched)
	if err != nil {
		return nil, usageError(stderr, "%v", err)
	}
	*workers = n
	dev, err := dc.Open(localRank)
	if err != nil {
		// "device cuda: …", named as the flag.
		fmt.Fprintf(stderr, "flock train: --%v\n", err)
		return nil, exitUsage
	}
	if dev != nil {
		tensor.SetDefaultDevice(dev)
	}
	return dev, -1
}
