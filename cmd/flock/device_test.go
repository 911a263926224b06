package main

import (
	"strings"
	"testing"

	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/job"
)

// TestTrainDeviceWithoutGPU checks that flock train --device cuda on a
// machine without a GPU fails at once, in one line naming the CUDA driver
// it looked for, with exit status 2.
func TestTrainDeviceWithoutGPU(t *testing.T) {
	if ok, _ := cuda.Available(); ok {
		t.Skip("a GPU is present")
	}
	runCLICases(t, []cliCase{
		{"cuda", []string{"train", "--device", "cuda"}, exitUsage, nil, []string{"flock train: --device cuda: no CUDA driver found (tried ", "libcuda.so.1"}, false},
		{"cuda:1", []string{"train", "--device", "cuda:1", "--workers", "1"}, exitUsage, nil, []string{"--device cuda:1: no CUDA driver found"}, false},
		{"bad name", []string{"train", "--device", "tpu"}, exitUsage, nil, []string{`device "tpu": want cpu, cuda or cuda:N`}, false},
	})
}

// TestGPUWorkers checks the in-process workers of a run on a GPU: one by
// default, one when asked, a launcher's rank whatever --workers says
// (train refuses that combination earlier), and several refused with the
// way to get them.
func TestGPUWorkers(t *testing.T) {
	t.Parallel()
	gpu := job.Device{GPU: true, Index: -1}
	for _, c := range []struct {
		name           string
		dc             job.Device
		workers        int
		given, launchd bool
		want           int
		err            string
	}{
		{"cpu keeps the default", job.Device{}, 4, false, false, 4, ""},
		{"cpu keeps the choice", job.Device{}, 8, true, false, 8, ""},
		{"gpu default", gpu, 4, false, false, 1, ""},
		{"gpu one", gpu, 1, true, false, 1, ""},
		{"gpu launched", gpu, 1, false, true, 1, ""},
		{"gpu several", gpu, 4, true, false, 0, "--device cuda trains one worker per process (--workers 1): for 4 workers start one process per GPU, flock run --nproc 4"},
	} {
		got, err := gpuWorkers(c.dc, c.workers, c.given, c.launchd)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d workers, %v; want %d", c.name, got, err, c.want)
		}
	}
}

// TestTrainGPUWorkersRefused checks that flock train refuses several
// in-process workers on a GPU before it looks for one, in one line, with
// exit status 2.
func TestTrainGPUWorkersRefused(t *testing.T) {
	runCLICases(t, []cliCase{
		{"workers 4", []string{"train", "--device", "cuda", "--workers", "4"}, exitUsage, nil, []string{"flock train: --device cuda trains one worker per process (--workers 1): for 4 workers start one process per GPU"}, false},
	})
}
