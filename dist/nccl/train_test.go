package nccl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/dist/launch"
	"github.com/flockml/flock/dist/nccl"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// randomImages returns n 8×8 grey images of random pixels in 4 random
// classes: the losses of GPU and CPU are compared, not what is learnt.
func randomImages(n int) *dataset.Images {
	r := rand.New(rand.NewPCG(5, 0))
	m := &dataset.Images{N: n, H: 8, W: 8, C: 1, Pixels: make([]uint8, n*64), Labels: make([]int32, n), Classes: []string{"a", "b", "c", "d"}}
	for i := range m.Pixels {
		m.Pixels[i] = uint8(r.UintN(256))
	}
	for i := range m.Labels {
		m.Labels[i] = int32(r.IntN(4))
	}
	return m
}

// dpConfig is a short data-parallel run of the CNN: one epoch of dpImages
// images, 8 per rank and step.
func dpConfig() train.Config {
	cfg := train.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.LR, cfg.WarmupEpochs, cfg.LogEvery = "cnn", 1, 8, 0.05, 0, 1
	return cfg
}

const dpImages = 128

// dpLosses trains dpConfig data-parallel over c as rank c.Rank() of
// c.Size(), on the default device, and returns the training loss of every
// step.
func dpLosses(c dist.Comm) ([]float64, error) {
	dp := train.NewDataParallel(c, train.DataParallelOptions{BucketBytes: 16 << 10})
	defer dp.Close()
	var losses []float64
	tr, err := train.New(dpConfig(), randomImages(dpImages), nil, train.Options{
		Strategy: dp, Rank: c.Rank(), World: c.Size(),
		OnRecord: func(r train.Record) {
			if r.Kind == "train" {
				losses = append(losses, r.Loss)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	if _, err := tr.Run(context.Background()); err != nil {
		return nil, fmt.Errorf("rank %d: %w", c.Rank(), err)
	}
	return losses, nil
}

// cpuLosses returns rank 0's losses of dpConfig over k in-process ranks on
// the CPU.
func cpuLosses(t *testing.T, k int) []float64 {
	t.Helper()
	prev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(cpu.Default())
	defer tensor.SetDefaultDevice(prev)
	comms := dist.NewLocal(k)
	out := make([][]float64, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			if out[r], errs[r] = dpLosses(c); errs[r] != nil {
				c.Close()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("on the CPU: %v", err)
	}
	return out[0]
}

// closeLosses compares the GPU's losses with the CPU's: the first differs
// by the order of float32 sums only, the updates let the difference grow.
func closeLosses(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%s: %d losses, the CPU run %d", what, len(got), len(want))
	}
	for i := range want {
		tol := 1e-3
		if i > 0 {
			tol = 1e-2
		}
		if math.IsNaN(got[i]) || math.Abs(got[i]-want[i]) > tol*math.Abs(want[i]) {
			t.Errorf("%s: step %d: loss %v, on the CPU %v", what, i+1, got[i], want[i])
		}
	}
	t.Logf("%s: losses %v, on the CPU %v", what, got, want)
}

// TestDataParallelMatchesCPU trains the CNN data-parallel with the model on
// the GPU, over a world of one NCCL rank (the buckets on the GPU: NCCL
// panics on any other operand) and over an in-process Comm (the buckets in
// host memory, the gradients copied across), and compares the losses with
// the CPU's. Two ranks of one NCCL communicator cannot share a GPU, so
// with one GPU this is the whole NCCL training path but the wire;
// TestDataParallelTwoGPUs adds the wire where there are two.
func TestDataParallelMatchesCPU(t *testing.T) {
	g := setup(t)
	want := cpuLosses(t, 1)
	prev := tensor.DefaultDevice()
	tensor.SetDefaultDevice(g)
	defer tensor.SetDefaultDevice(prev)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := nccl.Init(ctx, dist.Env{Size: 1, LocalSize: 1}, g, dist.InitOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if dist.DeviceOf(c) != tensor.Device(g) {
		t.Fatalf("the NCCL Comm's operands live on %s, not on its GPU", dist.DeviceOf(c).Name())
	}
	got, err := dpLosses(c)
	if err != nil {
		t.Fatal(err)
	}
	closeLosses(t, "NCCL, buckets on the GPU", got, want)

	host := dist.NewLocal(1)[0]
	defer host.Close()
	if got, err = dpLosses(host); err != nil {
		t.Fatal(err)
	}
	closeLosses(t, "in-process Comm, buckets on the host", got, want)
}

// rankOutEnv names the directory to which a rank of
// TestDataParallelTwoGPUs, started by the test itself, writes its losses.
const rankOutEnv = "FLOCK_NCCL_TEST_OUT"

// TestDataParallelTwoGPUs starts two processes of this test binary with
// torchrun's variables (dist/launch, as flock run does), each training
// data-parallel on the GPU of its LOCAL_RANK over NCCL, and compares rank
// 0's losses with those of two in-process ranks on the CPU.
func TestDataParallelTwoGPUs(t *testing.T) {
	if dir := os.Getenv(rankOutEnv); dir != "" {
		runRank(t, dir)
		return
	}
	setup(t)
	if n := cuda.DeviceCount(); n < 2 {
		t.Skipf("needs two GPUs, %d found", n)
	}
	dir := t.TempDir()
	var log bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code, err := launch.Run(ctx, launch.Config{
		NProc:   2,
		Program: os.Args[0],
		Args:    []string{"-test.run", "^TestDataParallelTwoGPUs$", "-test.v"},
		Env:     append(os.Environ(), rankOutEnv+"="+dir),
		Stdout:  &log,
		Stderr:  &log,
	})
	if err != nil || code != 0 {
		t.Fatalf("ranks: status %d, %v\n%s", code, err, log.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, "rank0.json"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var got []float64
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	closeLosses(t, "two GPUs over NCCL", got, cpuLosses(t, 2))
}

// runRank is one rank of TestDataParallelTwoGPUs.
func runRank(t *testing.T, dir string) {
	env, err := dist.EnvFromOS()
	if err != nil {
		t.Fatal(err)
	}
	g, err := cuda.New(env.LocalRank, cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tensor.SetDefaultDevice(g)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := nccl.Init(ctx, env, g, dist.InitOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	losses, err := dpLosses(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(losses)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rank"+strconv.Itoa(env.Rank)+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
