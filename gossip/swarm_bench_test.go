package gossip_test

import (
	"context"
	"sync"
	"testing"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/train"
)

// BenchmarkSwarmCommPerStep trains the CNN with Swarm SGD on K = 8
// in-process workers (batch 64 each, 28×28 images, 32 steps) and reports
// a worker's time in interactions per local step — waiting, encoding,
// decoding, averaging — against the time of its steps' computation, the
// quantity the Swarm paper puts under 10%. Each iteration is one run;
// the metrics are over all workers of the last run.
//
//	go test ./gossip -run XXX -bench SwarmCommPerStep -benchtime 3x
func BenchmarkSwarmCommPerStep(b *testing.B) {
	const k, batch, steps = 8, 64, 32
	data := bands(k*batch*steps, 28, 28, 3)
	for _, tt := range []struct {
		name string
		opt  gossip.SwarmOptions
	}{
		{"H=1/blocking", gossip.SwarmOptions{LocalSteps: 1}},
		{"H=1/non-blocking", gossip.SwarmOptions{LocalSteps: 1, NonBlocking: true}},
		{"H=1/non-blocking/8-bit", gossip.SwarmOptions{LocalSteps: 1, NonBlocking: true, QuantBits: 8}},
		{"H=2/blocking", gossip.SwarmOptions{LocalSteps: 2}},
		{"H=2/non-blocking", gossip.SwarmOptions{LocalSteps: 2, NonBlocking: true}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			cfg := train.DefaultConfig()
			cfg.Model, cfg.Epochs, cfg.BatchSize, cfg.EvalEvery, cfg.LogEvery = "cnn", 1, batch, 0, 0
			var comm, compute float64
			for b.Loop() {
				comm, compute = 0, 0
				comms := dist.NewLocal(k)
				stats := make([]train.CommStats, k)
				errs := make([]error, k)
				var wg sync.WaitGroup
				for r, c := range comms {
					wg.Go(func() {
						opt := tt.opt
						opt.Topology = gossip.Full(k)
						w, err := gossip.NewSwarm(c, opt)
						if err != nil {
							errs[r] = err
							return
						}
						defer w.Close()
						tr, err := train.New(cfg, data, nil, train.Options{Strategy: w, Rank: r, World: k})
						if err != nil {
							errs[r] = err
							return
						}
						defer tr.Close()
						_, errs[r] = tr.Run(context.Background())
						stats[r] = w.CommStats()
					})
				}
				wg.Wait()
				for _, c := range comms {
					c.Close()
				}
				for r, err := range errs {
					if err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
					comm += stats[r].Blocked
					compute += stats[r].Compute
				}
			}
			n := float64(k * steps)
			b.ReportMetric(1000*comm/n, "comm-ms/step")
			b.ReportMetric(1000*compute/n, "compute-ms/step")
			b.ReportMetric(100*comm/compute, "comm-%-of-compute")
		})
	}
}
