package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/flockml/flock/bench"
	"github.com/flockml/flock/internal/term"
)

type loaderOptions struct {
	file, workers, peer, decoder, python, script, out string
	synthetic, syntheticRes, size, batchSize          int
	batches, warmup, pairs                            int
	seed                                              uint64
	single, json                                      bool
	timeout                                           time.Duration
}

func loaderFlags(o *loaderOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock bench loader", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.file, "file", "", "the .beton `FILE` to read (fields image and label)")
	fs.IntVar(&o.synthetic, "synthetic", 0, "without --file: write `N` synthetic photo-like images (JPEG q90, --synthetic-res px) to a temporary file and read it")
	fs.IntVar(&o.syntheticRes, "synthetic-res", 256, "side in `PIXELS` of the synthetic images")
	fs.StringVar(&o.workers, "workers", "1,2", "comma-separated worker `COUNTS` (goroutines for flock, DataLoader processes for torch)")
	fs.StringVar(&o.peer, "peer", "", "also measure `PEER`, alternating with flock: torch (DataLoader + torchvision + PIL) or ffcv (FFCV's Loader)")
	fs.StringVar(&o.decoder, "decoder", bench.DecoderRRC, "pipeline: rrc (random-resized-crop + flip + normalize), center (centre crop + normalize) or raw (stored pixels + flip + normalize)")
	fs.IntVar(&o.size, "size", 224, "output side of the rrc and center pipelines, in `PIXELS`")
	fs.IntVar(&o.batchSize, "batch-size", 64, "images per batch")
	fs.IntVar(&o.batches, "batches", 50, "measured batches per run")
	fs.IntVar(&o.warmup, "warmup", 5, "batches read before the measured ones in each run")
	fs.IntVar(&o.pairs, "pairs", 3, "measured rounds, after one warm-up round; each round runs every implementation once per worker count, one process each")
	fs.Uint64Var(&o.seed, "seed", 0, "seed of the order and augmentations")
	fs.BoolVar(&o.json, "json", false, "write JSON Lines records to stdout instead of the table")
	fs.StringVar(&o.out, "out", "", "also write loader_<date>.jsonl and loader_<date>.md into `DIR` (e.g. bench/results)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit of each run")
	fs.StringVar(&o.python, "python", bench.DefaultPython, "Python interpreter with PyTorch, for --peer torch (ffcv uses bench/peers/setup.sh's environment)")
	fs.StringVar(&o.script, "peer-script", "", "the peer's script (default bench/peers/torch_loader.py or bench/peers/ffcv_loader.py)")
	fs.BoolVar(&o.single, "single", false, "measure flock once in this process with the one --workers count and print its JSON record (what each flock run of the comparison does)")
	return fs
}

func benchLoaderHelp(w io.Writer) {
	var o loaderOptions
	fs := loaderFlags(&o)
	fmt.Fprint(w, `Usage: flock bench loader (--file X.beton | --synthetic N) [flags]

Measure flock's data loader (package ffcv): batches of --batch-size images
read from a .beton file in random order, decoded and augmented by the
--decoder pipeline into float32 NCHW batches, with 1, 2, … worker
goroutines. Each run is one process: it opens the file, reads --warmup
batches, then times --batches batches and reports

  images/s per worker   images/s divided by the workers (per core when
                        each worker has one)
  images per CPU-second images over the processor time used
  time to first batch, p50/p99 batch latency, peak RSS (VmHWM), Go heap,
  allocations per batch.

With --peer torch every round also runs bench/peers/torch_loader.py right
after flock: a PyTorch DataLoader with the same number of worker processes
(shuffle, drop_last) over a Dataset that reads the same .beton file with
numpy and decodes with PIL (libjpeg-turbo) and torchvision (rrc:
RandomResizedCrop + RandomHorizontalFlip + ToTensor + Normalize). The table
gives the median and range over the rounds, and the round-by-round ratios
flock/torch; the first round is a warm-up and is left out.

With --peer ffcv every round runs bench/peers/ffcv_loader.py instead: FFCV's
own Loader on the same file, random order, drop_last, the same batch size,
image size and number of workers (FFCV's are threads), with the pipeline of
FFCV's ImageNet example on the CPU (rrc: RandomResizedCropRGBImageDecoder,
RandomHorizontalFlip, NormalizeImage to float32, ToTensor, ToTorchImage;
center: CenterCropRGBImageDecoder; raw: SimpleRGBImageDecoder). It runs in
the environment that bench/peers/setup.sh installs (.cache/peers/venv in the
repository root, or $FLOCK_PEERS_VENV).

To make a JPEG test file: flock convert synthetic X.beton --n 2000 --size
256x256 (q90), flock convert imagefolder DIR X.beton --max-res 256, or
--synthetic N here. FLOCK_JPEG=go measures the pure-Go JPEG decoder.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runBenchLoader(args []string, stdout, stderr io.Writer) int {
	var o loaderOptions
	fs := loaderFlags(&o)
	if code, done := parseBenchFlags("loader", fs, args, benchLoaderHelp, stdout, stderr); done {
		return code
	}
	workers, err := positiveInts(o.workers, "workers")
	if err != nil {
		return benchUsage(stderr, "loader", "%v", err)
	}
	switch o.decoder {
	case bench.DecoderRRC, bench.DecoderCenter, bench.DecoderRaw:
	default:
		return benchUsage(stderr, "loader", "unknown decoder %q (want rrc, center or raw)", o.decoder)
	}
	switch o.peer {
	case "", bench.ImplTorch, bench.ImplFFCV:
	default:
		return benchUsage(stderr, "loader", "unknown peer %q (peers: torch, ffcv)", o.peer)
	}
	if o.size < 1 || o.batchSize < 1 || o.batches < 1 || o.warmup < 0 || o.pairs < 0 || o.synthetic < 0 || o.syntheticRes < 8 {
		return benchUsage(stderr, "loader", "size %d, batch size %d, batches %d, warm-up %d, pairs %d, synthetic %d at %d px: want positive sizes and counts (warm-up, pairs, synthetic ≥ 0, synthetic-res ≥ 8)",
			o.size, o.batchSize, o.batches, o.warmup, o.pairs, o.synthetic, o.syntheticRes)
	}
	if (o.file == "") == (o.synthetic == 0) {
		return benchUsage(stderr, "loader", "give one of --file X.beton and --synthetic N")
	}
	if o.single && len(workers) != 1 {
		return benchUsage(stderr, "loader", "--single measures one worker count, not %s", o.workers)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep := newBenchReport("loader", o.json, stdout, stderr)
	fail := func(err error) int { return rep.failRun(ctx, err) }
	if o.synthetic > 0 {
		dir, err := os.MkdirTemp("", "flock-bench-loader-")
		if err != nil {
			return fail(err)
		}
		defer os.RemoveAll(dir)
		o.file = filepath.Join(dir, "synthetic.beton")
		var progress io.Writer
		if term.IsTerminal(stderr) && !o.single {
			progress = stderr
		}
		if err := bench.WriteSyntheticBeton(ctx, o.file, o.synthetic, o.syntheticRes, o.seed, progress); err != nil {
			return fail(err)
		}
	}
	if _, err := os.Stat(o.file); err != nil {
		return fail(err)
	}
	cfg := bench.LoaderConfig{File: o.file, Decoder: o.decoder, Size: o.size, BatchSize: o.batchSize, Warmup: o.warmup, Batches: o.batches, Seed: o.seed}
	if o.single {
		cfg.Workers = workers[0]
		res, err := bench.MeasureLoader(ctx, cfg)
		if err != nil {
			return fail(err)
		}
		_ = json.NewEncoder(stdout).Encode(res)
		return exitOK
	}

	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cmp := bench.LoaderComparison{
		Workers: workers, Pairs: o.pairs, Peer: o.peer, Timeout: o.timeout, Stderr: stderr,
		Flock: append([]string{exe, "bench", "loader", "--single"}, cfg.Flags()...),
	}
	if o.peer != "" {
		script := o.script
		if script == "" {
			script = filepath.Join("bench", "peers", o.peer+"_loader.py")
		}
		if !peerScript("loader", script, stderr) {
			return exitFailure
		}
		python, err := bench.PeerPython(o.peer, o.python)
		if err != nil {
			return fail(err)
		}
		cmp.PeerCommand = append([]string{python, script}, cfg.Flags()...)
		cmp.PeerEnv = []string{"OMP_NUM_THREADS=1"}
	}
	machine, start := rep.begin(args, cmp.MachineSettings(cfg))
	emit := func(r bench.LoaderResult) {
		rep.measurement(r, r.Pair, r.WarmupPair, "%-5s %d workers  %7.0f img/s per worker  %7.0f img/CPU-s  first batch %6.1f ms  p50 %6.1f ms  p99 %6.1f ms",
			r.Impl, r.Workers, r.PerWorker, r.PerCPUSecond, 1e3*r.FirstBatchS, 1e3*r.P50S, 1e3*r.P99S)
	}
	results, err := bench.RunLoaderComparison(ctx, cmp, emit)
	if err != nil {
		return fail(err)
	}
	return rep.finish(bench.LoaderResults{Machine: machine, Start: start, Config: cmp, Measurements: results,
		Summaries: bench.SummarizeLoader(results, o.peer)}, o.out)
}
