package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// TestParseDevice checks the values --device accepts.
func TestParseDevice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want deviceChoice
		ok   bool
	}{
		{"cpu", deviceChoice{}, true},
		{"cuda", deviceChoice{gpu: true, index: -1}, true},
		{"cuda:0", deviceChoice{gpu: true}, true},
		{"cuda:3", deviceChoice{gpu: true, index: 3}, true},
		{"cuda:", deviceChoice{}, false},
		{"cuda:-1", deviceChoice{}, false},
		{"cuda:+1", deviceChoice{}, false},
		{"cuda:01", deviceChoice{}, false},
		{"gpu", deviceChoice{}, false},
		{"CPU", deviceChoice{}, false},
		{"", deviceChoice{}, false},
	} {
		got, err := parseDevice(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseDevice(%q) = %+v, %v: want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("parseDevice(%q).String() = %q", c.in, got.String())
		}
	}
}

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
	gpu := deviceChoice{gpu: true, index: -1}
	for _, c := range []struct {
		name           string
		dc             deviceChoice
		workers        int
		given, launchd bool
		want           int
		err            string
	}{
		{"cpu keeps the default", deviceChoice{}, 4, false, false, 4, ""},
		{"cpu keeps the choice", deviceChoice{}, 8, true, false, 8, ""},
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

// TestNCCLWorld checks which world a launched process joins: NCCL on a GPU
// except for Swarm, TCP on the CPU.
func TestNCCLWorld(t *testing.T) {
	t.Parallel()
	gpu := tensor.Device((*cuda.Backend)(nil))
	for _, c := range []struct {
		dev      tensor.Device
		strategy string
		want     bool
	}{
		{gpu, "dp", true},
		{gpu, "local", true},
		{gpu, "dmsgd", true},
		{gpu, "jointspar", true},
		{gpu, "swarm", false},
		{cpu.Default(), "dp", false},
		{nil, "dp", false},
	} {
		k, ok := train.LookupStrategy(c.strategy)
		if !ok {
			t.Fatalf("strategy %s is not registered", c.strategy)
		}
		if got := ncclWorld(c.dev, k.Transport); got != c.want {
			t.Errorf("ncclWorld(%T, %s) = %v, want %v", c.dev, c.strategy, got, c.want)
		}
	}
}

// TestJoinWorldGoesToNCCL checks that a launched process on a GPU joins
// its world through NCCL, not TCP: with a GPU backend that is no real one
// the rendezvous succeeds and NCCL's communicator refuses it.
func TestJoinWorldGoesToNCCL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env := dist.Env{Rank: 0, Size: 2, LocalSize: 2, MasterAddr: "127.0.0.1", MasterPort: port, Token: []byte("join-world-test-token")}
	c, err := joinWorld(context.Background(), env, (*cuda.Backend)(nil), train.Collectives, dist.InitOptions{Timeout: 5 * time.Second})
	if c != nil || err == nil || !strings.HasPrefix(err.Error(), "nccl: ") {
		t.Fatalf("joinWorld on a GPU = %v, %v; want NCCL's error", c, err)
	}
}
