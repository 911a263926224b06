package train_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/gossip"
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// slowMean delays the one-element all-reduces (the end of a run's
// consensus mean) and notes whether each had a deadline.
type slowMean struct {
	dist.Comm
	delay       time.Duration
	mu          sync.Mutex
	noDeadlines int
	means       int
}

func (c *slowMean) AllReduce(ctx context.Context, t *tensor.Tensor, op dist.ReduceOp) error {
	if t.NumElements() == 1 {
		c.mu.Lock()
		c.means++
		if _, ok := ctx.Deadline(); !ok {
			c.noDeadlines++
		}
		c.mu.Unlock()
		time.Sleep(c.delay)
	}
	return c.Comm.AllReduce(ctx, t, op)
}

// TestFinalConsensusCollective checks that the strategies that average the
// last synchronization's consensus distance on its own, at the end of the
// run, bound that collective by the default timeout and count its wait as
// blocked time, alike.
func TestFinalConsensusCollective(t *testing.T) {
	const delay = 200 * time.Millisecond
	for _, tt := range []struct {
		name string
		make func(c dist.Comm) (train.Strategy, error)
	}{
		{"local", func(c dist.Comm) (train.Strategy, error) {
			return localopt.NewLocal(c, localopt.Options{Schedule: localopt.Constant{H: 2}})
		}},
		{"dmsgd", func(c dist.Comm) (train.Strategy, error) {
			top, err := gossip.New(gossip.Spec{Kind: "ring", N: c.Size()})
			if err != nil {
				return nil, err
			}
			return gossip.NewDmSGD(c, gossip.DmSGDOptions{Topology: top})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.Epochs = 1
			local := dist.NewLocal(2)
			comms := []*slowMean{{Comm: local[0], delay: delay}, {Comm: local[1], delay: delay}}
			stats := make([]train.CommStats, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := range comms {
				wg.Go(func() {
					s, err := tt.make(comms[r])
					if err != nil {
						errs[r] = err
						return
					}
					tr, err := train.New(cfg, synthetic(96, 3, 1), nil, train.Options{Strategy: s, Rank: r, World: 2})
					if err != nil {
						errs[r] = err
						return
					}
					defer tr.Close()
					if _, errs[r] = tr.Run(context.Background()); errs[r] != nil {
						comms[r].Close()
						return
					}
					stats[r] = s.(train.CommReporter).CommStats()
				})
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			for r, c := range comms {
				if c.means == 0 {
					t.Fatalf("rank %d: no one-element all-reduce at the end of the run", r)
				}
				if c.noDeadlines > 0 {
					t.Errorf("rank %d: %d of %d consensus means ran without a deadline", r, c.noDeadlines, c.means)
				}
				if got := time.Duration(stats[r].Blocked * float64(time.Second)); got < delay {
					t.Errorf("rank %d: blocked %v, less than the final consensus mean's %v", r, got, delay)
				}
			}
		})
	}
}
