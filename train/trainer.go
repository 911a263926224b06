package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/tensor"
)

// Options are the parts of a run that do not change its numbers.
type Options struct {
	// Strategy is called after backward and after each optimizer step
	// (SingleWorker when nil).
	Strategy Strategy
	// OnRecord receives every training and evaluation record.
	OnRecord func(Record)
	// OnProgress is called after every step.
	OnProgress func(Progress)
	// CheckpointPath, when set, receives a checkpoint at the end of every
	// epoch and when Run is interrupted. New checks that its directory
	// exists and is writable.
	CheckpointPath string
	// CheckpointEvery, when > 0, also checkpoints to CheckpointPath after
	// every CheckpointEvery-th step of the run.
	CheckpointEvery int
	// Rank and World shard the training set over the workers of a
	// data-parallel run (World 0 means 1); see dataset.Loader.
	Rank, World int
	// PeerEvaluates marks a worker without a test set whose peer (rank 0)
	// evaluates: it still takes part in the strategy's preparation of each
	// evaluation (EvalPreparer), whose collectives need every rank.
	PeerEvaluates bool
	// CheckpointComm, when set, makes checkpoints sets: every rank writes a
	// file of its own (its parameters and optimizer state differ from the
	// others' under local-update strategies) and rank 0 a manifest naming
	// them, at CheckpointPath; see SaveCheckpoint. Every rank then needs
	// CheckpointPath.
	CheckpointComm dist.Comm
	// MaxNonFiniteSteps stops a diverged run: once the training loss has
	// been NaN or infinite for this many consecutive steps, the run fails
	// with an error wrapping ErrDiverged. 0 means DefaultMaxNonFiniteSteps;
	// a negative value lets the run go on whatever its loss.
	MaxNonFiniteSteps int
}

// DefaultMaxNonFiniteSteps is Options.MaxNonFiniteSteps when it is 0.
const DefaultMaxNonFiniteSteps = 10

// ErrDiverged is the cause of a run stopped because its training loss was
// no longer finite; see Options.MaxNonFiniteSteps.
var ErrDiverged = errors.New("the training loss diverged")

// ErrPeerInterrupted is the cause of a run that a StopCoordinator stopped
// because another worker was interrupted.
var ErrPeerInterrupted = errors.New("another worker was interrupted")

// Trainer trains one model on one data set.
//
// A Trainer is not safe for concurrent use.
type Trainer struct {
	cfg    Config
	opts   Options
	model  nn.Layer
	params []nn.NamedParameter
	opt    optim.Optimizer
	sched  optim.Schedule
	task   Task
	// hasAcc reports whether the task measures an accuracy.
	hasAcc   bool
	gen      *tensor.Generator
	data     Batches
	test     Batches
	strategy Strategy
	sc       StepContext
	setUp    bool

	step int
	// interval covers the steps since the last training record, epoch the
	// current epoch, prevEpoch the last whole epoch and total the run.
	interval, epoch, prevEpoch, total meter
	evaluated                         bool
	testLoss, testAcc                 float64
	// elapsed is the wall time of the run before the current call to Run.
	elapsed  time.Duration
	runStart time.Time
	// setFile is this rank's file of the last checkpoint set written or
	// loaded, removed when the next set is in place.
	setFile string
	// nonFinite counts the consecutive steps, up to the last, whose
	// training loss was NaN or infinite.
	nonFinite int
}

// New builds the model, optimizer, schedule and data loaders that cfg
// describes, for the images of trainSet; testSet (which may be nil) is used
// for evaluation. With Config.ValImages the evaluation is on the images
// held out of trainSet instead, and testSet only says whether to evaluate.
// The model's input and number of classes come from the data.
func New(cfg Config, trainSet, testSet *dataset.Images, opts Options) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if trainSet == nil {
		return nil, errors.New("train: no training set")
	}
	if testSet != nil && (testSet.C != trainSet.C || testSet.H != trainSet.H || testSet.W != trainSet.W || len(testSet.Classes) != len(trainSet.Classes)) {
		return nil, fmt.Errorf("train: test images %d×%d×%d in %d classes differ from training images %d×%d×%d in %d classes",
			testSet.C, testSet.H, testSet.W, len(testSet.Classes), trainSet.C, trainSet.H, trainSet.W, len(trainSet.Classes))
	}
	if cfg.ValImages > 0 {
		if cfg.ValImages >= trainSet.N {
			return nil, fmt.Errorf("train: %d validation images held out of %d training images leave none to train on", cfg.ValImages, trainSet.N)
		}
		val := trainSet.Tail(cfg.ValImages)
		trainSet = trainSet.Head(trainSet.N - cfg.ValImages)
		if testSet != nil {
			testSet = val
		}
	}
	if cfg.TrainImages > 0 && cfg.TrainImages < trainSet.N {
		trainSet = trainSet.Head(cfg.TrainImages)
	}
	dev, err := cfg.device()
	if err != nil {
		return nil, err
	}
	data, err := NewImagesData(trainSet, dataset.LoaderOptions{
		BatchSize: cfg.BatchSize, Shuffle: true, Seed: cfg.Seed, Rank: opts.Rank, World: opts.World, Device: dev,
	})
	if err != nil {
		return nil, err
	}
	if data.BatchesPerEpoch() == 0 {
		if opts.World > 1 {
			return nil, fmt.Errorf("train: %d training images shared by %d workers leave none to worker %d", trainSet.N, opts.World, opts.Rank)
		}
		return nil, fmt.Errorf("train: the training set gives no batch (%d images)", trainSet.N)
	}
	var test Data
	if testSet != nil {
		bs := cfg.EvalBatchSize
		if bs == 0 {
			bs = 1000
		}
		tl, err := dataset.NewLoader(testSet, dataset.LoaderOptions{BatchSize: bs, Device: dev})
		if err != nil {
			return nil, fmt.Errorf("train: test set: %w", err)
		}
		test = ImagesData{Loader: tl, Images: testSet}
	}
	return NewWithData(cfg, data, test, opts)
}

// newTrainer builds the model of cfg for the images of data and the
// Trainer that classifies them.
func newTrainer(cfg Config, data, test Data, sched optim.Schedule, opts Options) (*Trainer, error) {
	gen := tensor.NewGenerator(cfg.Seed)
	c, h, w, k := data.Shape()
	mc, err := cfg.modelConfig(c, h, w, k)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	model, err := models.Build(cfg.Model, mc, gen)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return newTrainerOf(cfg, model, Classification{LabelSmoothing: cfg.LabelSmoothing}, gen, batches(data), batches(test), sched, opts)
}

// batches returns d as Batches, nil for a nil d.
func batches(d Data) Batches {
	if d == nil {
		return nil
	}
	return d
}

// newTrainerOf builds the Trainer of model on task, the model moved to
// cfg's device, its optimizer built there.
func newTrainerOf(cfg Config, model nn.Layer, task Task, gen *tensor.Generator, data, test Batches, sched optim.Schedule, opts Options) (*Trainer, error) {
	dev, err := cfg.device()
	if err != nil {
		return nil, err
	}
	if dev != nil {
		model.To(dev)
	}
	params := model.NamedParameters()
	t := &Trainer{
		cfg:      cfg,
		opts:     opts,
		model:    model,
		params:   params,
		opt:      cfg.optimizer(params),
		sched:    sched,
		task:     task,
		hasAcc:   true,
		gen:      gen,
		data:     data,
		test:     test,
		strategy: opts.Strategy,
	}
	if t.strategy == nil {
		t.strategy = SingleWorker{}
	}
	t.sc = StepContext{
		Params:        params,
		Model:         model,
		Optimizer:     t.opt,
		Schedule:      sched,
		Generator:     gen,
		StepsPerEpoch: data.BatchesPerEpoch(),
		TotalSteps:    t.TotalSteps(),
		emit:          t.emit,
		replay:        t.replay,
	}
	return t, nil
}

// Close releases the model and the optimizer's buffers. The Trainer must not be used afterwards.
func (t *Trainer) Close() {
	t.opt.ZeroGrad()
	t.opt.Release()
	t.model.Release()
}

// Config returns the run's configuration.
func (t *Trainer) Config() Config { return t.cfg }

// Model returns the network being trained.
func (t *Trainer) Model() nn.Layer { return t.model }

// Optimizer returns the optimizer.
func (t *Trainer) Optimizer() optim.Optimizer { return t.opt }

// Schedule returns the learning-rate schedule.
func (t *Trainer) Schedule() optim.Schedule { return t.sched }

// Step returns the number of optimizer steps taken.
func (t *Trainer) Step() int { return t.step }

// StepsPerEpoch returns the number of steps (batches) in an epoch.
func (t *Trainer) StepsPerEpoch() int { return t.data.BatchesPerEpoch() }

// TotalSteps returns the number of steps of the whole run.
func (t *Trainer) TotalSteps() int { return t.cfg.Epochs * t.data.BatchesPerEpoch() }

// Position returns the data position of the next step.
func (t *Trainer) Position() dataset.Position {
	spe := t.StepsPerEpoch()
	return dataset.Position{Epoch: t.step / spe, Batch: t.step % spe}
}

// Run trains until the end of the last epoch; see RunUntil.
func (t *Trainer) Run(ctx context.Context) (Summary, error) {
	return t.RunUntil(ctx, t.TotalSteps())
}

// RunUntil trains until stop steps of the run have been taken (or the run
// ends), evaluating, logging and checkpointing at epoch ends as configured.
// It can be called again to continue. When ctx is cancelled it stops
// between two steps, writes a checkpoint if Options.CheckpointPath is set,
// and returns an error wrapping ctx's cause.
func (t *Trainer) RunUntil(ctx context.Context, stop int) (Summary, error) {
	t.runStart = time.Now()
	defer func() {
		t.elapsed += time.Since(t.runStart)
		t.runStart = time.Time{}
	}()
	if !t.setUp {
		t.setContext()
		if err := t.strategy.Setup(&t.sc); err != nil {
			return t.Summary(), fmt.Errorf("train: strategy setup: %w", err)
		}
		t.setUp = true
	}
	stop = min(stop, t.TotalSteps())
	spe := t.StepsPerEpoch()
	_, coordinated := t.strategy.(StopCoordinator)
	interrupted := func() error {
		cause := context.Cause(ctx)
		if cause == nil {
			cause = ErrPeerInterrupted
		}
		err := fmt.Errorf("train: interrupted at step %d of %d: %w", t.step, t.TotalSteps(), cause)
		// A checkpoint set needs every rank, which only a coordinated stop
		// brings together.
		if p := t.opts.CheckpointPath; p != "" && (t.opts.CheckpointComm == nil || coordinated) {
			if cerr := t.SaveCheckpoint(p); cerr != nil {
				return errors.Join(err, cerr)
			}
		}
		return err
	}
	t.sc.interrupted, t.sc.stop = false, false
	for t.step < stop {
		if ctx.Err() != nil {
			if !coordinated {
				return t.Summary(), interrupted()
			}
			t.sc.interrupted = true
		}
		if err := t.trainStep(); err != nil {
			return t.Summary(), err
		}
		if t.step%spe == 0 {
			if err := t.endEpoch(t.step / spe); err != nil {
				return t.Summary(), err
			}
		} else if p, n := t.opts.CheckpointPath, t.opts.CheckpointEvery; p != "" && n > 0 && t.step%n == 0 {
			if err := t.SaveCheckpoint(p); err != nil {
				return t.Summary(), err
			}
		}
		if t.sc.stop && t.step < t.TotalSteps() {
			return t.Summary(), interrupted()
		}
	}
	return t.Summary(), nil
}

// setContext points the strategy's view at the next step.
func (t *Trainer) setContext() {
	pos := t.Position()
	t.sc.Step, t.sc.Epoch, t.sc.Batch = t.step, pos.Epoch, pos.Batch
	t.sc.LR = t.sched.LR(t.step)
}

// trainStep takes one optimizer step on the batch at Position().
func (t *Trainer) trainStep() error {
	start := time.Now()
	b, err := t.batchAt(t.Position())
	if err != nil {
		return err
	}
	wait := time.Since(start)
	t.setContext()
	t.opt.SetLR(t.sc.LR)
	if p, ok := t.strategy.(StepPreparer); ok {
		if err := p.BeforeStep(&t.sc); err != nil {
			b.X.Release()
			b.Y.Release()
			return fmt.Errorf("train: step %d: before step: %w", t.step, err)
		}
	}

	n := b.Y.Size(0)
	x := autograd.Const(b.X)
	logits := t.model.Forward(x)
	x.Release()
	loss := t.task.Loss(logits, b.Y)
	if loss.RequiresGrad() {
		// A strategy may have switched every gradient off for this step.
		loss.Backward()
	}
	lossVal := loss.Value.Item()
	correct := t.correct(logits.Value, b.Y)
	loss.Release()
	logits.Release()
	b.Y.Release()

	if err := t.strategy.AfterBackward(&t.sc); err != nil {
		t.opt.ZeroGrad()
		return fmt.Errorf("train: step %d: after backward: %w", t.step, err)
	}
	t.opt.Step()
	if err := t.strategy.AfterStep(&t.sc); err != nil {
		t.opt.ZeroGrad()
		return fmt.Errorf("train: step %d: after step: %w", t.step, err)
	}
	t.opt.ZeroGrad()

	d := time.Since(start)
	for _, m := range []*meter{&t.interval, &t.epoch, &t.total} {
		m.add(lossVal*float64(n), correct, int64(n), d)
		m.addWait(wait)
	}
	t.step++
	if t.cfg.LogEvery > 0 && t.step%t.cfg.LogEvery == 0 {
		t.logTrain()
	}
	if err := t.checkFinite(lossVal); err != nil {
		return err
	}
	if f := t.opts.OnProgress; f != nil {
		loss, _ := t.interval.mean()
		spe := t.StepsPerEpoch()
		f(Progress{
			Step: t.step, TotalSteps: t.TotalSteps(),
			Epoch: (t.step-1)/spe + 1, Epochs: t.cfg.Epochs,
			Batch: (t.step-1)%spe + 1, StepsPerEpoch: spe,
			Loss: loss, ImagesPerSec: t.interval.rate(), LR: t.sc.LR,
			Elapsed: t.Elapsed(),
		})
	}
	return nil
}

// checkFinite counts the steps in a row whose training loss was not
// finite and fails the run when they reach Options.MaxNonFiniteSteps.
func (t *Trainer) checkFinite(loss float64) error {
	if !math.IsNaN(loss) && !math.IsInf(loss, 0) {
		t.nonFinite = 0
		return nil
	}
	t.nonFinite++
	limit := t.opts.MaxNonFiniteSteps
	if limit == 0 {
		limit = DefaultMaxNonFiniteSteps
	}
	if limit < 0 || t.nonFinite < limit {
		return nil
	}
	return fmt.Errorf("train: step %d: %w: the training loss has been %v for %d steps in a row (a smaller learning rate?)", t.step, ErrDiverged, loss, t.nonFinite)
}

// batchAt returns the training batch at pos, seeking only when the data
// stands elsewhere (at the start, after a resume, after a replay).
func (t *Trainer) batchAt(pos dataset.Position) (dataset.Batch, error) {
	if t.data.Position() != pos {
		if err := t.data.Seek(pos); err != nil {
			return dataset.Batch{}, fmt.Errorf("train: %w", err)
		}
	}
	// The run's context is checked between steps; a batch being prepared
	// is waited for.
	b, err := t.data.Next(context.Background())
	if errors.Is(err, io.EOF) {
		return b, fmt.Errorf("train: no batch at epoch %d batch %d", pos.Epoch, pos.Batch)
	}
	if err != nil {
		return b, fmt.Errorf("train: epoch %d batch %d: %w", pos.Epoch, pos.Batch, err)
	}
	return b, nil
}

// countCorrect returns the number of rows of logits [N, C] whose largest
// entry is at the label's index.
func countCorrect(logits, labels *tensor.Tensor) int64 {
	am := logits.ArgMax(1)
	defer am.Release()
	pred := am.Int64s()
	var want []int64
	if labels.DType() == tensor.Int64 {
		want = labels.Int64s()
	} else {
		l := labels.Cast(tensor.Int64)
		want = l.Int64s()
		l.Release()
	}
	var c int64
	for i, p := range pred {
		if p == want[i] {
			c++
		}
	}
	return c
}

// logTrain emits a training record for the steps since the last one.
func (t *Trainer) logTrain() {
	if t.interval.images == 0 {
		return
	}
	loss, acc := t.interval.mean()
	if !t.hasAcc {
		acc = math.NaN()
	}
	t.emit(Record{
		Kind: KindTrain, Step: t.step, Epoch: (t.step-1)/t.StepsPerEpoch() + 1,
		LR: t.sched.LR(t.step - 1), Loss: loss, Acc: acc, ImagesPerSec: t.interval.rate(),
		Elapsed: t.Elapsed().Seconds(), Comm: t.commStats(), DataWait: t.interval.waitPerStep().Seconds(),
	})
	t.interval = meter{}
}

func (t *Trainer) emit(r Record) {
	if f := t.opts.OnRecord; f != nil {
		f(r)
	}
}

// endEpoch closes epoch e (1-based): a training record, an evaluation when
// due, a checkpoint when configured.
func (t *Trainer) endEpoch(e int) error {
	t.logTrain()
	t.prevEpoch, t.epoch = t.epoch, meter{}
	due := e == t.cfg.Epochs || t.cfg.EvalEvery > 0 && e%t.cfg.EvalEvery == 0
	if due && (t.test != nil || t.opts.PeerEvaluates) {
		if err := t.evaluateEpoch(e); err != nil {
			return err
		}
	}
	if p := t.opts.CheckpointPath; p != "" {
		if err := t.SaveCheckpoint(p); err != nil {
			return err
		}
	}
	return nil
}

// evaluateEpoch evaluates at the end of epoch e, letting the strategy
// prepare the model first.
func (t *Trainer) evaluateEpoch(e int) error {
	start := time.Now()
	var restore func() error
	if p, ok := t.strategy.(EvalPreparer); ok {
		var err error
		if restore, err = p.BeforeEval(&t.sc); err != nil {
			return fmt.Errorf("train: epoch %d: prepare evaluation: %w", e, err)
		}
	}
	if t.test != nil {
		loss, acc, err := t.EvaluateData()
		if err != nil {
			return err
		}
		t.evaluated, t.testLoss, t.testAcc = true, loss, acc
		t.emit(Record{
			Kind: KindEval, Step: t.step, Epoch: e, LR: t.sched.LR(t.step - 1),
			Loss: loss, Acc: acc, ImagesPerSec: float64(t.test.Len()) / time.Since(start).Seconds(),
			Elapsed: t.Elapsed().Seconds(), Comm: t.commStats(),
		})
	}
	if restore != nil {
		if err := restore(); err != nil {
			return fmt.Errorf("train: epoch %d: after evaluation: %w", e, err)
		}
	}
	return nil
}

// commStats returns the strategy's communication counts, or nil when it
// reports none.
func (t *Trainer) commStats() *CommStats {
	if r, ok := t.strategy.(CommReporter); ok {
		c := r.CommStats()
		return &c
	}
	return nil
}

// replay serves StepContext.TrainBatches.
func (t *Trainer) replay(n int, fn func(x *tensor.Tensor)) error {
	spe := t.StepsPerEpoch()
	epoch := max(t.step-1, 0) / spe
	var err error
	autograd.NoGrad(func() {
		for i := range min(n, spe) {
			var b dataset.Batch
			if b, err = t.batchAt(dataset.Position{Epoch: epoch, Batch: i}); err != nil {
				return
			}
			fn(b.X)
			b.X.Release()
			b.Y.Release()
		}
	})
	return err
}

// Evaluate returns the task's evaluation loss per sample (for
// Classification the cross-entropy without label smoothing) and the
// accuracy of the model on the test set (NaN for a task without one),
// computed in evaluation mode without recording gradients. Without a test
// set it returns NaNs; it panics when the test data fails (see
// EvaluateData).
func (t *Trainer) Evaluate() (loss, acc float64) {
	loss, acc, err := t.EvaluateData()
	if err != nil {
		panic(err)
	}
	return loss, acc
}

// EvaluateData is Evaluate, returning the error of test data that fails
// (a .beton file whose sample does not decode) instead of panicking.
func (t *Trainer) EvaluateData() (loss, acc float64, err error) {
	if t.test == nil {
		return math.NaN(), math.NaN(), nil
	}
	training := t.model.Training()
	nn.Eval(t.model)
	defer t.model.SetTraining(training)
	var sum float64
	var correct, n int64
	autograd.NoGrad(func() {
		if err = t.test.Seek(dataset.Position{}); err != nil {
			err = fmt.Errorf("train: test set: %w", err)
			return
		}
		for {
			var b dataset.Batch
			b, err = t.test.Next(context.Background())
			if errors.Is(err, io.EOF) {
				err = nil
				break
			}
			if err != nil {
				err = fmt.Errorf("train: test set: %w", err)
				return
			}
			x := autograd.Const(b.X)
			logits := t.model.Forward(x)
			x.Release()
			sum += t.task.EvalLoss(logits, b.Y)
			correct += t.correct(logits.Value, b.Y)
			n += int64(b.Y.Size(0))
			logits.Release()
			b.Y.Release()
		}
	})
	if err != nil {
		return math.NaN(), math.NaN(), err
	}
	if n == 0 {
		return math.NaN(), math.NaN(), nil
	}
	return sum / float64(n), accuracy(correct, n, t.hasAcc), nil
}

// correct counts the samples of a batch the task gets right (0 for a task
// without accuracy, which it then notes).
func (t *Trainer) correct(out, target *tensor.Tensor) int64 {
	c := t.task.Correct(out, target)
	if c < 0 {
		t.hasAcc = false
		return 0
	}
	return c
}

// Elapsed returns the run's wall time so far, across resumes.
func (t *Trainer) Elapsed() time.Duration {
	if t.runStart.IsZero() {
		return t.elapsed
	}
	return t.elapsed + time.Since(t.runStart)
}

// Summary describes the run so far.
func (t *Trainer) Summary() Summary {
	last := t.epoch
	if last.images == 0 {
		last = t.prevEpoch
	}
	loss, acc := last.mean()
	if !t.hasAcc {
		acc = math.NaN()
	}
	return Summary{
		Epochs:       t.step / t.StepsPerEpoch(),
		Steps:        t.step,
		Wall:         t.Elapsed(),
		TrainTime:    t.total.time,
		Images:       t.total.images,
		ImagesPerSec: t.total.rate(),
		TrainLoss:    loss,
		TrainAcc:     acc,
		Evaluated:    t.evaluated,
		TestLoss:     t.testLoss,
		TestAcc:      t.testAcc,
		Comm:         t.commStats(),
		DataWait:     t.total.waitPerStep(),
	}
}
