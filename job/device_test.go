package job_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/backend/cuda"
	"github.com/flockml/flock/dist"
	_ "github.com/flockml/flock/gossip" // swarm
	"github.com/flockml/flock/job"
	_ "github.com/flockml/flock/localopt" // local
	_ "github.com/flockml/flock/sparse"   // jointspar
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// TestParseDevice checks the devices ParseDevice reads.
func TestParseDevice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want job.Device
		ok   bool
	}{
		{"cpu", job.Device{}, true},
		{"cuda", job.Device{GPU: true, Index: -1}, true},
		{"cuda:0", job.Device{GPU: true}, true},
		{"cuda:3", job.Device{GPU: true, Index: 3}, true},
		{"cuda:", job.Device{}, false},
		{"cuda:-1", job.Device{}, false},
		{"cuda:+1", job.Device{}, false},
		{"cuda:01", job.Device{}, false},
		{"gpu", job.Device{}, false},
		{"CPU", job.Device{}, false},
		{"", job.Device{}, false},
	} {
		got, err := job.ParseDevice(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDevice(%q) = %+v, %v: want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("ParseDevice(%q).String() = %q", c.in, got.String())
		}
	}
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
		if got := job.NCCLWorld(c.dev, k.Transport); got != c.want {
			t.Errorf("NCCLWorld(%T, %s) = %v, want %v", c.dev, c.strategy, got, c.want)
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
	c, err := job.JoinWorld(context.Background(), env, (*cuda.Backend)(nil), train.Collectives, dist.InitOptions{Timeout: 5 * time.Second})
	if c != nil || err == nil || !strings.HasPrefix(err.Error(), "nccl: ") {
		t.Fatalf("JoinWorld on a GPU = %v, %v; want NCCL's error", c, err)
	}
}
