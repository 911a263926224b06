package main

import (
	"testing"

	"github.com/flockml/flock/backend/cuda"
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
