package job_test

import (
	"context"
	"fmt"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/train"
)

// Four in-process workers train an MLP with Local SGD, averaging every 2
// steps, as flock train --workers 4 --sync constant --h 2 would.
func Example() {
	cfg := train.DefaultConfig()
	cfg.Model, cfg.Epochs, cfg.BatchSize = "mlp", 2, 12
	sync := localopt.DefaultSettings()
	sync.Sync, sync.H = "constant", 2
	cfg.Strategy = train.StrategyConfig{Name: "local", Settings: sync}

	// Images in memory; job.OpenBeton streams .beton files instead.
	data := job.Images{Train: bands(192, 1), Test: bands(60, 2)}
	res, err := job.Run(context.Background(), job.Spec{
		Config:        cfg,
		Comms:         dist.NewLocal(4),
		StepsPerEpoch: data.StepsPerEpoch(cfg, 4),
		Test:          true,
		Build:         data.Build, // only rank 0 is asked for a test set
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d workers, %d steps, %d synchronizations, evaluated: %v\n",
		res.World, res.Summary.Steps, res.Summary.Comm.Syncs, res.Summary.Evaluated)
	// Output:
	// 4 workers, 8 steps, 4 synchronizations, evaluated: true
}
