package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flockml/flock/dataset"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/internal/term"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/train"
)

// defaultWorkers is the number of in-process workers of flock train.
const defaultWorkers = 4

// trainOptions are the flags of flock train that are not part of the run's
// train.Config.
type trainOptions struct {
	json       bool
	checkpoint string
	resume     string
	data       string
	testData   string
	download   bool
	threads    int
	stopAfter  int
	workers    int
	// divergedSteps is Options.MaxNonFiniteSteps, 0 to keep going.
	divergedSteps int
	// localSize is the launcher's ranks per node (0: in-process workers).
	localSize       int
	checkpointEvery int
	// stream shapes the streaming of .beton data.
	stream streamOptions
	// device is --device: cpu, cuda or cuda:N.
	device  string
	timeout time.Duration
	// tensorboard is --tensorboard: the directory of rank 0's event file.
	tensorboard string
	// families are the settings of every registered strategy family,
	// bound to their flags; strategySettings gives the chosen strategy its
	// own.
	families []train.StrategySettings
}

// defaultTrainOptions returns flock train's options before its flags.
func defaultTrainOptions() trainOptions {
	return trainOptions{workers: defaultWorkers, download: true, divergedSteps: train.DefaultMaxNonFiniteSteps, stream: defaultStreamOptions(), device: "cpu"}
}

// trainFlags returns the flag set of flock train, bound to cfg and o. Flag
// values start as cfg's and o's current values.
func trainFlags(cfg *train.Config, o *trainOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock train", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Model, "model", cfg.Model, "network, one of the models listed below")
	fs.StringVar(&cfg.Stem, "stem", cfg.Stem, "stem of the ImageNet ResNets: imagenet (7×7 stride 2, max-pool), cifar (3×3 stride 1) or auto (cifar for images of side ≤ 64)")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "passes over the training set")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "images per optimizer step")
	fs.Float64Var(&cfg.LR, "lr", cfg.LR, "peak learning rate (> 0), reached after the warm-up")
	fs.StringVar(&cfg.Optimizer, "optimizer", cfg.Optimizer, "optimizer: "+strings.Join(train.Optimizers, ", "))
	fs.Float64Var(&cfg.Momentum, "momentum", cfg.Momentum, "momentum of sgd and lars, in [0, 1)")
	fs.BoolVar(&cfg.Nesterov, "nesterov", cfg.Nesterov, "Nesterov momentum for sgd and lars (--nesterov=false to turn off)")
	fs.BoolVar(&cfg.LARSAdaptAll, "lars-adapt-all", cfg.LARSAdaptAll, "lars: scale the biases' and normalisation parameters' updates by their own trust ratios too, without weight decay (by default they take the plain gradient at the same rate); JointSpar-LARS then rescales every drawn parameter's update")
	fs.Float64Var(&cfg.WeightDecay, "weight-decay", cfg.WeightDecay, "weight decay (decoupled for adamw)")
	fs.StringVar(&cfg.Schedule, "schedule", cfg.Schedule, "learning-rate decay after the warm-up: cosine (to 0), step (×0.1 at 50% and 75%), linear (to 0), constant")
	fs.Float64Var(&cfg.WarmupEpochs, "warmup", cfg.WarmupEpochs, "linear warm-up from 0.1·lr to lr, in `EPOCHS` (fractions allowed, rounded to whole steps)")
	fs.Float64Var(&cfg.LabelSmoothing, "label-smoothing", cfg.LabelSmoothing, "label smoothing ε of the training loss, in [0, 1)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the initial weights and of the data order")
	fs.IntVar(&cfg.EvalEvery, "eval-every", cfg.EvalEvery, "evaluate on the test set every `N` epochs (the last epoch always; 0: only the last)")
	fs.IntVar(&cfg.LogEvery, "log-every", cfg.LogEvery, "log the training loss every `N` steps (0: once per epoch)")
	fs.BoolVar(&o.json, "json", o.json, "write JSON Lines records to stdout instead of the human output")
	fs.StringVar(&o.tensorboard, "tensorboard", o.tensorboard, "also write the records as TensorBoard scalars (loss, accuracy, lr, H, bytes sent, consensus distance, …) to an event file in `DIR`, by rank 0")
	fs.StringVar(&o.checkpoint, "checkpoint", o.checkpoint, "write a checkpoint to `PATH` at the end of each epoch and on interrupt (Ctrl-C, SIGTERM)")
	fs.IntVar(&o.checkpointEvery, "checkpoint-every", o.checkpointEvery, "also write the checkpoint every `STEPS` steps (0: only at epoch ends)")
	fs.StringVar(&o.resume, "resume", o.resume, "resume the run saved in the checkpoint at `PATH`; its settings apply unless given as flags")
	fs.StringVar(&o.data, "data", o.data, "`DIR` holding the Fashion-MNIST files (default: $FLOCK_DATA/fashion-mnist, the user cache, "+dataset.DebianFashionMNISTDir+"), or a .beton file of training images (fields image and label; see flock convert)")
	fs.StringVar(&o.testData, "test-data", o.testData, "`PATH` of a .beton file of test images, with --data TRAIN.beton (default: no test set)")
	fs.BoolVar(&o.download, "download", o.download, "download Fashion-MNIST when it is not found (otherwise, or when the download fails, train on the subset embedded in flock)")
	fs.BoolFunc("no-download", "never download Fashion-MNIST (--download=false)", func(s string) error {
		no, err := strconv.ParseBool(s)
		o.download = !no
		return err
	})
	fs.IntVar(&o.threads, "threads", o.threads, fmt.Sprintf("worker threads, GOMAXPROCS (0: all %d cores)", runtime.NumCPU()))
	fs.IntVar(&cfg.TrainImages, "train-images", cfg.TrainImages, "train on the first `N` training images only (0: all)")
	fs.IntVar(&cfg.ValImages, "val-images", cfg.ValImages, "hold out the last `N` training images as a validation set, evaluated instead of the test set (for choosing hyperparameters; 0: none)")
	fs.IntVar(&o.stopAfter, "stop-after", o.stopAfter, "stop after `STEP` steps of the run (the schedule still spans --epochs), writing the checkpoint to continue from with --resume (0: run to the end)")
	fs.IntVar(&o.divergedSteps, "diverged-steps", o.divergedSteps, "stop with an error once the training loss has been NaN or infinite for `N` steps in a row (0: keep going)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "in a job of several processes (flock run, torchrun, SLURM): how long rank 0 waits for the others to join and a silent peer may take before the run fails, a `DURATION` such as 90s or 10m (default: $"+dist.TimeoutEnv+", else "+strings.TrimSuffix(dist.DefaultTimeout.String(), "0s")+")")
	fs.IntVar(&o.workers, "workers", o.workers, "workers in this process, `K` goroutines each taking --batch-size images per step and cooperating by --strategy")
	streamFlags(fs, &o.stream)
	deviceFlag(fs, &o.device)
	var kinds []string
	for _, k := range train.StrategyKinds() {
		kinds = append(kinds, k.Name+" ("+k.Summary+")")
	}
	fs.StringVar(&cfg.Strategy.Name, "strategy", cfg.Strategy.Name, "how the workers cooperate: "+strings.Join(kinds, ", "))
	o.families = nil
	cur := cfg.Strategy.Clone().Settings
	for _, set := range train.SettingsFamilies() {
		if cur != nil && train.SameFamily(cur, set) {
			set = cur
		}
		set.Flags(fs)
		o.families = append(o.families, set)
	}
	return fs
}

// strategySettings gives cfg's strategy the settings of its family that
// trainFlags bound to the flags.
func (o *trainOptions) strategySettings(cfg *train.Config) {
	k, ok := train.LookupStrategy(cfg.Strategy.Name)
	if !ok {
		return // Validate names the unknown strategy
	}
	def := k.Settings()
	for _, set := range o.families {
		if train.SameFamily(set, def) {
			cfg.Strategy.Settings = set
		}
	}
}

// foreignSettings reports a flag given on fs that only strategies other
// than name read (--sync-bits with --strategy dp), which would do nothing.
func foreignSettings(fs *flag.FlagSet, name string) error {
	k, ok := train.LookupStrategy(name)
	if !ok {
		return nil // Validate names the unknown strategy
	}
	flagsOf := func(set train.StrategySettings) map[string]bool {
		own := flag.NewFlagSet("", flag.ContinueOnError)
		set.Flags(own)
		names := map[string]bool{}
		own.VisitAll(func(f *flag.Flag) { names[f.Name] = true })
		return names
	}
	mine := flagsOf(k.Settings())
	users := map[string][]string{} // flag → the strategies that read it
	for _, other := range train.StrategyKinds() {
		for name := range flagsOf(other.Settings()) {
			users[name] = append(users[name], other.Name)
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if u := users[f.Name]; err == nil && !mine[f.Name] && len(u) > 0 {
			err = fmt.Errorf("--%s is a setting of %s, not of --strategy %s", f.Name, strings.Join(u, ", "), name)
		}
	})
	return err
}

// writeModels lists the registered networks with their descriptions.
func writeModels(w io.Writer) {
	fmt.Fprint(w, "\nModels (--model):\n")
	for _, n := range models.Names() {
		fmt.Fprintf(w, "  %-22s %s\n", n, models.Describe(n))
	}
}

func trainHelp(w io.Writer) {
	cfg, o := train.DefaultConfig(), defaultTrainOptions()
	fs := trainFlags(&cfg, &o)
	fmt.Fprint(w, `Usage: flock train [flags]

Train a model on Fashion-MNIST (60000 training, 10000 test images) and
report the test loss and accuracy. The defaults train the small CNN on 4
workers with Local SGD (Nesterov momentum, a cosine schedule) whose
synchronizations follow the Quadratic Synchronization Rule.

With --data TRAIN.beton (see flock convert) the images stream from the file
through FFCV's loader instead: --decode-workers goroutines per worker
decode and augment the batches ahead of the step (random-resized crops with
--image-size, --flip, normalisation by --mean and --std), each worker
reading its shard, and memory stays bounded by --data-cache-mib whatever
the file's size. --test-data VAL.beton is evaluated on centre crops. Each
record's data_wait_s says how long a step waited for its batch. --device
cuda trains one worker on a GPU (flock doctor says what it finds); several
workers on GPUs are one process per GPU, started by a launcher (below).

Output: a progress bar when stdout is a terminal, periodic lines otherwise,
then a summary table; with --json, one JSON object per line instead: first
{"kind":"run"} (flock's version and commit, the whole configuration, the
world, device and seed), then
{"kind":"train"|"eval","step","epoch","lr","loss","acc","img_per_s","elapsed_s"}
and a final {"kind":"summary", ...}; a number that is NaN or infinite (the
loss of a diverged run) is written as null. A run whose training loss stays
NaN or infinite for --diverged-steps steps stops with an error.

A checkpoint holds the model, the optimizer, the schedule's step, the random
generator, the data position and the settings in one safetensors file; a
run resumed from it continues exactly as if it had not stopped. It is
written at the end of each epoch (and every --checkpoint-every steps), with
a checksum of its tensors: a damaged or edited checkpoint is refused.

Workers: --workers K (default 4; with --device cuda 1, the only choice)
trains K workers in this process, each on its own shard of the data with
--batch-size images per step, cooperating by --strategy:
  local   Local SGD (Local AdamW, Local LARS with --optimizer): each worker
          steps alone for H steps, then the parameters are averaged in one
          all-reduce; H comes from --sync (default qsr: the Quadratic
          Synchronization Rule, H = max(Hbase, floor((α/η)²)), so rounds
          lengthen as the learning rate decays). Optimizer state stays per
          worker unless --average-state names it. Before each evaluation
          the workers' average is evaluated, with batch-norm statistics
          re-estimated on --bn-batches training batches and averaged.
  diloco  like local, but an outer SGD (--outer-lr, --outer-momentum,
          --outer-nesterov) steps the global parameters with the workers'
          averaged change at the end of each round.
  dp      data parallel: gradients averaged every step, so the run follows
          one worker with batch K × batch-size.
  dmsgd   decentralized momentum SGD: after each step (every --local-steps)
          a worker averages its parameters with its neighbours' in
          --topology (exp: the static exponential graph; one-peer-exp: one
          neighbour a step, exact averaging every log2 K steps); nobody
          waits for everyone; evaluations see the workers' average.
  jointspar
          data parallel over a sample of the layers: each step draws about
          --budget of them (more often those with larger gradients), skips
          the others' gradient work, averages the drawn layers' gradients
          scaled by 1/p and leaves the others unchanged; with
          --optimizer lars, JointSpar-LARS (add --lars-adapt-all so that
          the biases' updates are scaled too).
The summary reports the bytes each worker sent and how many times less that
is than data parallel would have sent; --json adds a "sync" record at every
synchronization. 'flock sync-plan' prints the rounds a rule gives without
training. With --workers 1 one worker trains alone.

Started by a launcher — 'flock run --nproc K -- flock train', torchrun, srun
or mpirun (RANK and WORLD_SIZE, SLURM_PROCID and SLURM_NTASKS, or
OMPI_COMM_WORLD_RANK and _SIZE set) — each process is one worker and the
workers meet at MASTER_ADDR:MASTER_PORT, authenticated by FLOCK_JOB_TOKEN.
Worker 0 alone evaluates and reports; its training loss and accuracy are
those of its shard, and images/s counts every worker. Under local and
diloco every worker writes its own checkpoint file (their models differ
mid-round) and --checkpoint PATH names the set's manifest; these sets are
written at the end of each epoch, at --stop-after, and on Ctrl-C or SIGTERM,
which stop every worker at the next synchronization. With --device cuda each
process trains on the GPU of its LOCAL_RANK and the workers communicate
through NCCL, the strategies' buffers on the GPU ('flock run --nproc gpu'
starts one process per GPU of the node); Swarm's workers talk over TCP,
their models copied to host memory for each exchange.

Flags:
`)
	fs.VisitAll(func(f *flag.Flag) {
		name, use := flag.UnquoteUsage(f)
		switch name {
		case "value":
			name = ""
		case "float", "int", "uint", "string":
			name = map[string]string{"float": "X", "int": "N", "uint": "N", "string": "NAME"}[name]
		}
		head := "--" + f.Name
		if name != "" {
			head += " " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %-22s %s%s\n", head, use, def)
	})
	writeModels(w)
	fmt.Fprint(w, `
Examples:
  flock train
  flock train --model mlp --epochs 10 --optimizer adamw --lr 1e-3 --weight-decay 0.05
  flock train --checkpoint run.safetensors      # Ctrl-C, then:
  flock train --resume run.safetensors --checkpoint run.safetensors
  flock train --workers 1                       # one worker alone
  flock train --strategy dp                     # data parallel, 4 × 128 images per step
  flock train --sync constant --h 8             # Local SGD, averaging every 8 steps
  flock train --strategy diloco --optimizer adamw --lr 1e-3
  flock run --nproc 4 -- flock train            # the default run over 4 processes
  flock run --nproc gpu -- flock train --device cuda --strategy dp  # one process per GPU, NCCL
  flock train --workers 1 --data train.beton --test-data val.beton --model resnet50 --image-size 160 --flip
`)
}

// usageError reports a bad command line in one line and returns exitUsage.
func usageError(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "flock train: "+format+"; run 'flock train --help' for usage\n", a...)
	return exitUsage
}

func runTrain(args []string, stdout, stderr io.Writer) int {
	cfg, o := train.DefaultConfig(), defaultTrainOptions()
	fs := trainFlags(&cfg, &o)
	if helpAsked(args) {
		trainHelp(stdout)
		return exitOK
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			trainHelp(stdout)
			return exitOK
		}
		return usageError(stderr, "%v", err)
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "unexpected argument %q", fs.Arg(0))
	}
	o.strategySettings(&cfg)
	if o.resume != "" {
		saved, err := train.ReadCheckpointConfig(o.resume)
		if err != nil {
			fmt.Fprintf(stderr, "flock train: %v\n", err)
			return exitFailure
		}
		// The checkpoint's settings, overridden by the flags given.
		cfg = saved
		if err := trainFlags(&cfg, &o).Parse(args); err != nil {
			return usageError(stderr, "%v", err)
		}
		o.strategySettings(&cfg)
	}
	if err := foreignSettings(fs, cfg.Strategy.Name); err != nil {
		return usageError(stderr, "%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return usageError(stderr, "%s", strings.TrimPrefix(err.Error(), "train: config: "))
	}
	if o.threads < 0 {
		return usageError(stderr, "threads %d: want ≥ 0", o.threads)
	}
	if o.stopAfter < 0 {
		return usageError(stderr, "stop-after %d: want ≥ 0", o.stopAfter)
	}
	if o.workers < 1 {
		return usageError(stderr, "workers %d: want ≥ 1", o.workers)
	}
	if o.checkpointEvery < 0 {
		return usageError(stderr, "checkpoint-every %d: want ≥ 0", o.checkpointEvery)
	}
	if o.checkpointEvery > 0 && o.checkpoint == "" {
		return usageError(stderr, "--checkpoint-every needs --checkpoint PATH")
	}
	if o.divergedSteps < 0 {
		return usageError(stderr, "diverged-steps %d: want ≥ 0", o.divergedSteps)
	}
	if err := o.stream.validate(); err != nil {
		return usageError(stderr, "%v", err)
	}
	if _, err := job.ParseDevice(o.device); err != nil {
		return usageError(stderr, "%v", err)
	}
	if o.timeout < 0 {
		return usageError(stderr, "timeout %v: want > 0", o.timeout)
	}
	if o.testData != "" && !strings.HasSuffix(o.data, ".beton") {
		return usageError(stderr, "--test-data %s needs --data TRAIN.beton", o.testData)
	}
	kind, _ := train.LookupStrategy(cfg.Strategy.Name) // Validate checked the name
	if why := kind.NoCheckpoints; why != "" && (o.checkpoint != "" || o.resume != "" || o.stopAfter > 0) {
		return usageError(stderr, "%s runs have no checkpoints (--checkpoint, --resume, --stop-after): %s", kind.Name, why)
	}
	env, launched, err := launcherEnv()
	if err != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		return exitFailure
	}
	if launched {
		if flagGiven(fs, "workers") && o.workers > 1 {
			return usageError(stderr, "--workers %d in a process started by a launcher (rank %d of %d): use one or the other", o.workers, env.Rank, env.Size)
		}
		o.workers, o.localSize = 1, env.LocalSize
	}
	dev, code := placeOnDevice(o.device, env.LocalRank, &o.workers, flagGiven(fs, "workers"), launched, stderr)
	if code >= 0 {
		return code
	}
	// The device is the run's (Config.Device: the model, its optimizer
	// state and the batches); placeOnDevice also made it the default for
	// what the ops allocate on their own.
	cfg.Device = ""
	if dev != nil {
		cfg.Device = dev.Name()
	}
	if o.threads > 0 {
		runtime.GOMAXPROCS(o.threads)
	}

	// SIGTERM, which flock run forwards and batch schedulers send before
	// killing, stops the run as Ctrl-C does: with a checkpoint.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func(signalled context.Context) {
		// A second signal kills the process at once.
		<-signalled.Done()
		stop()
	}(ctx)
	if launched {
		var cancel context.CancelFunc
		ctx, cancel = stopWithParent(ctx, commandLogger(stderr, "flock train"))
		defer cancel()
	}

	var progress io.Writer
	if !o.json && (!launched || env.Rank == 0) {
		progress = stderr
	}
	var sets job.Data
	if strings.HasSuffix(o.data, ".beton") {
		sets, err = job.OpenBeton(o.data, o.testData, o.stream.betonOptions())
	} else {
		var trainSet, testSet *dataset.Images
		var subset bool
		trainSet, testSet, subset, err = fashionMNIST(ctx, "flock train", o.data, o.download, progress, stderr)
		sets = fashionData(trainSet, testSet, subset)
	}
	if err != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return exitInterrupted
		}
		return exitFailure
	}
	defer sets.Close()
	if streamed(sets) && cfg.ValImages > 0 {
		return usageError(stderr, "--val-images holds out images of Fashion-MNIST, not of a .beton file (give a validation file as --test-data)")
	}

	var comms []dist.Comm
	switch {
	case o.workers > 1 || kind.Alone && !launched:
		comms = dist.NewLocal(o.workers)
	case launched:
		c, err := job.JoinWorld(ctx, env, dev, kind.Transport, dist.InitOptions{Timeout: o.timeout, Logger: commandLogger(stderr, "flock train")})
		if err != nil {
			fmt.Fprintf(stderr, "flock train: rank %d of %d: %v\n", env.Rank, env.Size, err)
			if ctx.Err() != nil {
				return exitInterrupted
			}
			return exitFailure
		}
		comms = []dist.Comm{c}
	}
	return trainWorkers(ctx, cfg, o, sets, comms, stdout, stderr)
}

// helpAsked reports whether args ask for help with a bare -h: the flag
// --h (a synchronization period) takes a number, so "-h" followed by one
// sets it, and "-h" alone or before another flag asks for help.
func helpAsked(args []string) bool {
	for i, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "--h" {
			if i+1 == len(args) || strings.HasPrefix(args[i+1], "-") {
				return true
			}
			if _, err := strconv.Atoi(args[i+1]); err != nil {
				return true
			}
		}
	}
	return false
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// launcherEnv returns the rank and world of a process started by a
// launcher (flock run, torchrun, srun, mpirun), and whether there is one
// with more than one rank.
func launcherEnv() (dist.Env, bool, error) {
	env, err := dist.EnvFromOS()
	if err != nil {
		return dist.Env{}, false, err
	}
	return env, env.Size > 1, nil
}

// trainWorkers trains with the workers this process holds (job.Run: one
// alone when comms is nil, otherwise one per Comm) and reports for people
// or as JSON Lines.
func trainWorkers(ctx context.Context, cfg train.Config, o trainOptions, sets job.Data, comms []dist.Comm, stdout, stderr io.Writer) int {
	world := 1
	if comms != nil {
		world = comms[0].Size()
	}
	if sets.StepsPerEpoch(cfg, world) == 0 {
		who := fmt.Sprintf("--workers %d", world)
		if len(comms) == 1 {
			who = fmt.Sprintf("the launcher's %d ranks", world)
		}
		trainN, _ := sets.Counts()
		return usageError(stderr, "%s share %d training images: each worker needs at least one (fewer workers or more --train-images)", who, cfg.TrainImagesOf(trainN))
	}

	// Output that cannot be written stops the run as an interruption
	// would, with a checkpoint, and fails the command.
	ctx, outputFailed := context.WithCancel(ctx)
	defer outputFailed()
	output := &outputWriter{w: stdout, failed: outputFailed}
	out := newReporter(output, o.json, term.IsTerminal(stdout))
	out.workers = world
	tb, err := job.OpenTensorBoard(o.tensorboard, comms, outputFailed)
	if err != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		return exitFailure
	}
	defer tb.Close()
	spec := job.Spec{
		Config: cfg, Comms: comms, Build: sets.Build, StepsPerEpoch: sets.StepsPerEpoch(cfg, world), Test: hasTest(sets), LocalSize: o.localSize,
		Checkpoint: o.checkpoint, CheckpointEvery: o.checkpointEvery, Resume: o.resume, StopAfter: o.stopAfter,
		MaxNonFiniteSteps: o.divergedSteps, OnRecord: func(r train.Record) { out.record(r); tb.Record(r) }, OnProgress: out.progress,
		OnStart: func(t *train.Trainer, s train.Strategy) {
			out.strategy = strategyName(s)
			out.start(t, sets, o)
		},
	}
	if o.divergedSteps == 0 {
		spec.MaxNonFiniteSteps = -1
	}
	res, err := job.Run(ctx, spec)
	var failed *job.WorkerError
	if err != nil && !errors.As(err, &failed) {
		fmt.Fprintf(stderr, "flock train: %v\n", err)
		return exitFailure
	}
	if res.Rank0 {
		out.finish(res.Summary)
	}
	if err := output.Err(); err != nil {
		msg := fmt.Sprintf("flock train: write output: %v; stopped after step %d of %d", err, res.Step, res.TotalSteps)
		if res.Checkpointed {
			msg += fmt.Sprintf("; checkpoint written to %s", o.checkpoint)
		}
		fmt.Fprintln(stderr, msg)
		return exitFailure
	}
	if err := tb.Close(); err != nil {
		fmt.Fprintf(stderr, "flock train: %v (at step %d of %d)\n", err, res.Step, res.TotalSteps)
		return exitFailure
	}
	if res.Interrupted {
		msg := fmt.Sprintf("flock train: interrupted after step %d of %d", res.Step, res.TotalSteps)
		if res.Checkpointed {
			msg += fmt.Sprintf("; checkpoint written to %s (continue with --resume %[1]s)", o.checkpoint)
		}
		fmt.Fprintln(stderr, msg)
		return exitInterrupted
	}
	if failed != nil {
		fmt.Fprintf(stderr, "flock train: %v\n", failed)
		return exitFailure
	}
	return exitOK
}

// strategyName says what s does, for people.
func strategyName(s train.Strategy) string {
	switch s := s.(type) {
	case nil:
		return ""
	case fmt.Stringer:
		return s.String()
	}
	return fmt.Sprintf("%T", s)
}

// reporter writes a run's records for people (a progress bar on a
// terminal, plain lines otherwise) or as JSON Lines.
type reporter struct {
	w        io.Writer
	json     bool
	terminal bool
	lastDraw time.Time
	drawn    bool
	// workers scales rank 0's training throughput to the whole run's.
	workers int
	// strategy names how the workers cooperate.
	strategy string
	// evalSet names what evaluations measure: "test", or "validation".
	evalSet string
}

func newReporter(w io.Writer, jsonOut, terminal bool) *reporter {
	return &reporter{w: w, json: jsonOut, terminal: terminal && !jsonOut, workers: 1, evalSet: "test"}
}

func (r *reporter) start(t *train.Trainer, sets job.Data, o trainOptions) {
	cfg := t.Config()
	if cfg.ValImages > 0 {
		r.evalSet = "validation"
	}
	if r.json {
		job.WriteJSONLine(r.w, job.NewRunRecord(cfg, r.workers, o.device, r.strategy, sets))
		return
	}
	data := sets.Name()
	trainN, testN := sets.Counts()
	if cfg.ValImages > 0 {
		testN = cfg.ValImages
	}
	fmt.Fprintf(r.w, "flock train: %s (%d parameters) on %s, %d training / %d %s images\n",
		cfg.Model, nn.NumParameters(t.Model()), data, cfg.TrainImagesOf(trainN), testN, r.evalSet)
	opt := cfg.Optimizer
	if cfg.Optimizer != "adamw" {
		opt += fmt.Sprintf(" momentum %g", cfg.Momentum)
		if cfg.Nesterov {
			opt += " nesterov"
		}
	}
	batch := fmt.Sprint(cfg.BatchSize)
	if r.workers > 1 {
		batch = fmt.Sprintf("%d workers × %d", r.workers, cfg.BatchSize)
	}
	fmt.Fprintf(r.w, "  %d epochs × %d steps of %s, %s, lr %g %s (warm-up %g epochs), weight decay %g, %d threads\n",
		cfg.Epochs, t.StepsPerEpoch(), batch, opt, cfg.LR, cfg.Schedule, cfg.WarmupEpochs, cfg.WeightDecay, runtime.GOMAXPROCS(0))
	if r.strategy != "" {
		fmt.Fprintf(r.w, "  %d workers: %s\n", r.workers, r.strategy)
	}
	if o.resume != "" {
		fmt.Fprintf(r.w, "  resumed from %s at step %d (epoch %d, batch %d)\n", o.resume, t.Step(), t.Position().Epoch+1, t.Position().Batch)
	}
}

// clear erases the progress bar so that a line can be printed.
func (r *reporter) clear() {
	if r.drawn {
		fmt.Fprint(r.w, "\r\033[K")
		r.drawn = false
	}
}

func (r *reporter) record(rec train.Record) {
	if rec.Kind == train.KindTrain {
		rec.ImagesPerSec *= float64(r.workers)
	}
	if r.json {
		job.WriteJSONLine(r.w, rec)
		return
	}
	switch rec.Kind {
	case train.KindSync:
		return
	case train.KindTrain:
		if r.terminal {
			return
		}
		fmt.Fprintf(r.w, "epoch %d step %d  lr %.4g  loss %.4f  acc %5.2f%%  %.0f img/s  %s\n",
			rec.Epoch, rec.Step, rec.LR, rec.Loss, 100*rec.Acc, rec.ImagesPerSec, term.Seconds(rec.Elapsed))
	case train.KindEval:
		r.clear()
		fmt.Fprintf(r.w, "epoch %d test  loss %.4f  acc %5.2f%%  (%s)\n",
			rec.Epoch, rec.Loss, 100*rec.Acc, term.Seconds(rec.Elapsed))
	}
}

func (r *reporter) progress(p train.Progress) {
	if !r.terminal {
		return
	}
	if p.Step != p.TotalSteps && time.Since(r.lastDraw) < 100*time.Millisecond {
		return
	}
	r.lastDraw = time.Now()
	p.ImagesPerSec *= float64(r.workers)
	const width = 30
	done := width * p.Batch / p.StepsPerEpoch
	bar := strings.Repeat("=", done) + strings.Repeat(" ", width-done)
	if done < width {
		bar = bar[:done] + ">" + bar[done+1:]
	}
	fmt.Fprintf(r.w, "\r\033[Kepoch %d/%d [%s] %d/%d  loss %.4f  %.0f img/s  %s",
		p.Epoch, p.Epochs, bar, p.Batch, p.StepsPerEpoch, p.Loss, p.ImagesPerSec, p.Elapsed.Round(time.Second))
	r.drawn = true
}

func (r *reporter) finish(s train.Summary) {
	if r.json {
		job.WriteJSONLine(r.w, job.NewSummaryRecord(s))
		return
	}
	r.clear()
	fmt.Fprintln(r.w)
	tw := tabwriter.NewWriter(r.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "epochs\t%d\n", s.Epochs)
	fmt.Fprintf(tw, "steps\t%d\n", s.Steps)
	fmt.Fprintf(tw, "wall time\t%s\n", s.Wall.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "images/s\t%.0f\n", s.ImagesPerSec)
	fmt.Fprintf(tw, "waiting on data\t%s per step\n", s.DataWait.Round(10*time.Microsecond))
	fmt.Fprintf(tw, "final train loss\t%.4f\n", s.TrainLoss)
	if s.Evaluated {
		fmt.Fprintf(tw, "%s loss\t%.4f\n", r.evalSet, s.TestLoss)
		fmt.Fprintf(tw, "%s accuracy\t%.2f%%\n", r.evalSet, 100*s.TestAcc)
	} else {
		fmt.Fprintf(tw, "%s loss\t-\n", r.evalSet)
		fmt.Fprintf(tw, "%s accuracy\t-\n", r.evalSet)
	}
	if c := s.Comm; c != nil {
		fmt.Fprintf(tw, "synchronizations\t%d (%d collectives)\n", c.Syncs, c.Collectives)
		fmt.Fprintf(tw, "sent per worker\t%s (data parallel: %s)\n", term.Bytes(c.Sent), term.Bytes(c.DataParallelBytes))
		fmt.Fprintf(tw, "waiting on communication\t%s\n", (time.Duration(c.Blocked * float64(time.Second))).Round(10*time.Millisecond))
		if c.SyncSeconds > 0 {
			fmt.Fprintf(tw, "synchronization behind compute\t%.0f%% of %s in flight\n", 100*c.Hidden(), (time.Duration(c.SyncSeconds * float64(time.Second))).Round(10*time.Millisecond))
		}
		if c.LayersPerStep > 0 {
			fmt.Fprintf(tw, "layers computed per step\t%.1f\n", c.LayersPerStep)
		}
		switch sv := c.Saving(); {
		case c.Sent == 0:
		case sv >= 1:
			fmt.Fprintf(tw, "communication vs data parallel\t%.1f× less\n", sv)
		default:
			fmt.Fprintf(tw, "communication vs data parallel\t%.1f× more\n", 1/sv)
		}
	}
	tw.Flush()
}
