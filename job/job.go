package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/train"
)

// Spec describes a job.
type Spec struct {
	// Config is the run; its Strategy is built for each worker
	// (train.NewStrategy) when Comms is not nil.
	Config train.Config
	// Comms holds a Comm per worker of this process (dist.NewLocal's, or
	// the one of a launched rank); nil trains one worker alone, without a
	// strategy. Run closes them.
	Comms []dist.Comm
	// Build makes the Trainer of the worker of rank rank with opts, which
	// Run fills (the strategy, the rank and world, checkpoints, the
	// callbacks); withTest says whether it evaluates. close releases its
	// data after the run.
	Build func(cfg train.Config, withTest bool, opts train.Options) (t *train.Trainer, close func(), err error)
	// StepsPerEpoch is what each worker's data gives, for the strategies'
	// schedules.
	StepsPerEpoch int
	// LocalSize is the launcher's number of ranks per node
	// (train.StrategyRun.LocalSize; 0 for in-process workers).
	LocalSize int
	// Test says whether there is a test set: rank 0 evaluates on it and
	// the other ranks take part in the strategy's preparation of each
	// evaluation.
	Test bool
	// Checkpoint, when set, is written at the end of every epoch, every
	// CheckpointEvery steps, and at a stop (its directory made when
	// missing); Resume restores a run from the
	// checkpoint at that path before training.
	Checkpoint      string
	CheckpointEvery int
	Resume          string
	// StopAfter stops the run after that many steps (0: at its end),
	// writing Checkpoint to continue from.
	StopAfter int
	// MaxNonFiniteSteps is train.Options.MaxNonFiniteSteps.
	MaxNonFiniteSteps int
	// OnRecord and OnProgress receive rank 0's records and progress.
	OnRecord   func(train.Record)
	OnProgress func(train.Progress)
	// OnStart is called once every worker is built (and resumed), before
	// training, with rank 0's Trainer and strategy (nil alone).
	OnStart func(t *train.Trainer, s train.Strategy)
	// OnFinish is called after training with each worker's rank and
	// Trainer, in rank order, before Run releases them: the place to keep
	// what the models learned.
	OnFinish func(rank int, t *train.Trainer)
}

// recoverOOM, deferred, turns the tensor layer's panic on running out of
// device memory (an error wrapping backend.ErrOutOfMemory, naming the
// operation and the allocation) into *err; any other panic goes on.
func recoverOOM(err *error) {
	if r := recover(); r != nil {
		e, ok := r.(error)
		if !ok || !errors.Is(e, backend.ErrOutOfMemory) {
			panic(r)
		}
		*err = e
	}
}

// runUntil is t.RunUntil, running out of device memory an error.
func runUntil(t *train.Trainer, ctx context.Context, stop int) (sum train.Summary, err error) {
	defer recoverOOM(&err)
	return t.RunUntil(ctx, stop)
}

// build is spec.Build and the resume from spec.Resume, running out of
// device memory an error.
func build(spec Spec, test bool, opts train.Options) (t *train.Trainer, closeData func(), err error) {
	defer recoverOOM(&err)
	if t, closeData, err = spec.Build(spec.Config, test, opts); err != nil || spec.Resume == "" {
		return t, closeData, err
	}
	return t, closeData, t.LoadCheckpoint(spec.Resume)
}

// Result is what a job did: rank 0's view.
type Result struct {
	// Rank0 reports whether this process held rank 0, whose summary
	// Summary is (its ImagesPerSec over all the workers).
	Rank0   bool
	Summary train.Summary
	// World is the number of workers.
	World int
	// Step and TotalSteps locate the end of the run.
	Step, TotalSteps int
	// Interrupted reports that ctx ended the run (here or, under a
	// coordinated stop, on another worker); Checkpointed that a
	// checkpoint to continue from was then written.
	Interrupted, Checkpointed bool
}

// WorkerError is the first failure of a job's workers.
type WorkerError struct {
	Rank, World int
	Err         error
}

func (e *WorkerError) Error() string {
	if e.World > 1 {
		return fmt.Sprintf("rank %d of %d: %v", e.Rank, e.World, e.Err)
	}
	return e.Err.Error()
}

func (e *WorkerError) Unwrap() error { return e.Err }

// worker is one rank held by this process.
type worker struct {
	rank      int
	comm      dist.Comm
	strat     train.Strategy
	t         *train.Trainer
	closeData func()
	sum       train.Summary
	err       error
}

func (w *worker) closeStrategy() {
	if w.strat != nil {
		w.strat.Close()
	}
}

// release frees what the worker holds.
func (w *worker) release() {
	w.closeStrategy()
	if w.comm != nil {
		w.comm.Close()
	}
	if w.t != nil {
		w.t.Close()
	}
	if w.closeData != nil {
		w.closeData()
	}
}

// interruption reports whether err ends a run that was interrupted, here
// or, for strategies that stop their workers together, on another worker.
func interruption(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, train.ErrPeerInterrupted)
}

// Run trains the job's workers until the end of the run, a stop (ctx
// ended: Result.Interrupted) or a failure (a *WorkerError). An error in
// building the workers is returned as it is.
func Run(ctx context.Context, spec Spec) (Result, error) {
	world := 1
	if spec.Comms != nil {
		world = spec.Comms[0].Size()
	}
	res := Result{World: world}
	// Collectives and the other ranks stop early only when a worker fails.
	commCtx, fail := context.WithCancel(context.Background())
	defer fail()

	ws := make([]*worker, max(len(spec.Comms), 1))
	for i := range spec.Comms {
		ws[i] = &worker{comm: spec.Comms[i], rank: spec.Comms[i].Rank()}
	}
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.release()
			}
		}
	}()
	if spec.Checkpoint != "" {
		// As Lightning does, the checkpoint's directory is made when
		// missing, before any training that a failing write would lose.
		if err := os.MkdirAll(filepath.Dir(spec.Checkpoint), 0o755); err != nil {
			return res, fmt.Errorf("checkpoint %s: %w", spec.Checkpoint, err)
		}
	}
	var rank0 *worker
	for i := range ws {
		if ws[i] == nil {
			ws[i] = &worker{}
		}
		w := ws[i]
		opts := train.Options{MaxNonFiniteSteps: spec.MaxNonFiniteSteps, CheckpointEvery: spec.CheckpointEvery}
		test := spec.Test
		if w.comm != nil {
			s, err := train.NewStrategy(w.comm, spec.Config, train.StrategyRun{StepsPerEpoch: spec.StepsPerEpoch, Context: commCtx, LocalSize: spec.LocalSize})
			if err != nil {
				return res, err
			}
			w.strat = s
			opts.Strategy, opts.Rank, opts.World = s, w.rank, world
			if checkpointSets(s) {
				opts.CheckpointComm, opts.CheckpointPath = w.comm, spec.Checkpoint
			}
		}
		if w.rank == 0 {
			rank0 = w
			opts.OnRecord, opts.OnProgress, opts.CheckpointPath = spec.OnRecord, spec.OnProgress, spec.Checkpoint
		} else {
			opts.PeerEvaluates = test
			test = false
		}
		t, closeData, err := build(spec, test, opts)
		w.closeData, w.t = closeData, t
		if err != nil {
			return res, err
		}
	}
	if rank0 != nil && spec.OnStart != nil {
		spec.OnStart(rank0.t, rank0.strat)
	}

	var (
		mu    sync.Mutex
		first *worker
		wg    sync.WaitGroup
	)
	coordinated := spec.Comms != nil && checkpointSets(ws[0].strat)
	_, apart := ws[0].strat.(train.IndependentWorkers)
	for _, w := range ws {
		wg.Go(func() {
			// Workers whose strategy coordinates stopping, or whose
			// workers run apart, all watch ctx.
			runCtx := commCtx
			if w.rank == 0 || coordinated || apart {
				runCtx = ctx
			}
			stop := w.t.TotalSteps()
			if spec.StopAfter > 0 {
				stop = min(stop, spec.StopAfter)
			}
			w.sum, w.err = runUntil(w.t, runCtx, stop)
			if apart {
				// Goodbyes to the partners before the Comm closes, so
				// that a worker stopped early is not taken for lost.
				w.closeStrategy()
			}
			if w.err == nil && stop < w.t.TotalSteps() && spec.Checkpoint != "" && (w.rank == 0 || coordinated) {
				w.err = w.t.SaveCheckpoint(spec.Checkpoint)
			}
			stopped := coordinated && interruption(w.err)
			// The last all-reduce may still need this rank's peers. (The
			// workers of a strategy that runs them apart part with
			// goodbyes instead, and must not wait for one that died.)
			if (w.err == nil || stopped) && len(ws) == 1 && w.comm != nil && !apart {
				w.closeStrategy()
				bctx, cancel := dist.WithDefaultTimeout(commCtx, dist.DefaultTimeout)
				if err := w.comm.Barrier(bctx); err != nil && w.err == nil {
					w.err = err
				}
				cancel()
			}
			if w.err == nil || stopped {
				return
			}
			mu.Lock()
			if first == nil {
				first = w
			}
			mu.Unlock()
			if w.comm != nil {
				w.comm.Close()
			}
			if ctx.Err() == nil {
				fail()
			}
		})
	}
	wg.Wait()
	if spec.OnFinish != nil {
		for _, w := range ws {
			spec.OnFinish(w.rank, w.t)
		}
	}

	t := ws[0].t
	res.Step, res.TotalSteps = t.Step(), t.TotalSteps()
	// A collective cancelled because a worker failed is that failure's
	// consequence, not an interruption.
	res.Interrupted = ctx.Err() != nil || errors.Is(ws[0].err, train.ErrPeerInterrupted)
	if rank0 != nil {
		res.Rank0, res.Summary = true, rank0.sum
		res.Summary.ImagesPerSec *= float64(world)
		res.Checkpointed = res.Interrupted && spec.Checkpoint != "" && interruption(rank0.err)
	}
	if res.Interrupted {
		return res, nil
	}
	if first != nil {
		return res, &WorkerError{Rank: first.rank, World: world, Err: first.err}
	}
	return res, nil
}

// checkpointSets reports whether s lets the workers' models differ, so
// that a checkpoint is a set of one file per worker.
func checkpointSets(s train.Strategy) bool {
	_, ok := s.(train.WorkerCheckpoints)
	return ok
}
