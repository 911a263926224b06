package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/flockml/flock/experiment"
	"github.com/flockml/flock/internal/term"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/netmodel"
)

// studyOptions are the flags of a named study.
type studyOptions struct {
	out, data, rates, seeds string
	workers, epochs, batch  int
	trainImages, valImages  int
	jobs, threads           int
	quick, dryRun, report   bool
}

func studyFlags(name string, o *studyOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock experiment "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.out, "out", "bench/results/"+name, "`DIR` of the runs (runs.jsonl, appended as runs finish and read back to resume) and of the report")
	fs.StringVar(&o.rates, "rates", "", "comma-separated peak learning `RATES` each arm is tuned over (default: "+studyRates(name)+")")
	fs.StringVar(&o.seeds, "seeds", "1,2,3", "comma-separated `SEEDS` of the runs at each arm's chosen rate")
	fs.IntVar(&o.workers, "workers", 8, "in-process workers of each run, `K`")
	fs.IntVar(&o.epochs, "epochs", 30, "epochs of each run")
	fs.IntVar(&o.batch, "batch-size", 128, "images per worker and step")
	fs.IntVar(&o.trainImages, "train-images", 0, "train on the first `N` training images (0: all 60000)")
	fs.IntVar(&o.valImages, "val-images", 5000, "training images held out as the validation set of the tuning runs, `N`")
	fs.IntVar(&o.jobs, "jobs", 1, "runs at once, each a set of K goroutines")
	fs.IntVar(&o.threads, "threads", 0, fmt.Sprintf("GOMAXPROCS (0: all %d cores)", runtime.NumCPU()))
	fs.StringVar(&o.data, "data", "", "`DIR` holding the Fashion-MNIST files (default: as flock train)")
	fs.BoolVar(&o.quick, "quick", false, "a study of seconds: 2 workers, 1 epoch on 2048 images, 512 held out, the first two rates, seeds 1 and 2 (other flags given still apply)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "list the runs, marking those already done, and exit")
	fs.BoolVar(&o.report, "report-only", false, "write the report from the runs already in runs.jsonl, training nothing")
	return fs
}

// studyHelp returns the help of study name.
func studyHelp(name string) func(w io.Writer) {
	return func(w io.Writer) {
		var o studyOptions
		fs := studyFlags(name, &o)
		fmt.Fprintf(w, `Usage: flock experiment %s [flags]

%s

Every arm runs at its own best learning rate. It trains once per rate of
--rates (seed 1) on the training set less its last --val-images images,
evaluated on those; the rate of the highest final validation accuracy is
the arm's (a tuning run whose loss diverges counts as such). It then trains
once per seed of --seeds at that rate on the whole training set, evaluated
on the test set. Every run: the CNN, --workers in-process workers, --epochs
epochs, --batch-size images per worker and step, cosine decay unless said
otherwise, a one-epoch warm-up (a tenth of the run under ten epochs).

Runs are appended to DIR/runs.jsonl as they finish (the same command
resumes); the report is DIR/study.md (tuning, test accuracy with 95%%
intervals, differences with Welch's intervals) with report.md and the
figures of flock experiment strategies.

Flags:
`, name, experiment.Studies[name].About)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// studyRates lists study name's default learning rates, comma-separated.
func studyRates(name string) string {
	var parts []string
	for _, r := range experiment.Studies[name].Rates {
		parts = append(parts, strconv.FormatFloat(r, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

// runStudy runs the study name with args.
func runStudy(name string, args []string, stdout, stderr io.Writer) int {
	var o studyOptions
	fs := studyFlags(name, &o)
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flock experiment: "+format+"; run 'flock experiment %s --help' for usage\n", append(a, name)...)
		return exitUsage
	}
	if code, done := parseFlags(fs, args, studyHelp(name), usage, stdout); done {
		return code
	}
	if o.quick {
		for flagName, v := range map[string]string{"workers": "2", "epochs": "1", "train-images": "2048", "val-images": "512", "rates": strings.Join(strings.Split(studyRates(name), ",")[:2], ","), "seeds": "1,2"} {
			if !flagGiven(fs, flagName) {
				if err := fs.Set(flagName, v); err != nil {
					return usage("%v", err)
				}
			}
		}
	}
	if o.jobs < 1 || o.threads < 0 {
		return usage("jobs %d, threads %d: want jobs ≥ 1, threads ≥ 0", o.jobs, o.threads)
	}
	so := experiment.StudyOptions{Workers: o.workers, Epochs: o.epochs, Batch: o.batch, TrainImages: o.trainImages, ValImages: o.valImages, Setup: gridSetup}
	var err error
	if o.rates != "" {
		if so.Rates, err = parseList(o.rates, "rates", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
			return usage("%v", err)
		}
	}
	if so.Seeds, err = parseList(o.seeds, "seeds", func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }); err != nil {
		return usage("%v", err)
	}
	set, err := experiment.Studies[name].Make(so)
	if err != nil {
		return usage("%v", err)
	}
	path := filepath.Join(o.out, "runs.jsonl")
	done, err := experiment.ReadRecords(path, flagsPattern)
	if err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	// The runs whose flags are known, and the arms still being tuned.
	var (
		runs   []experiment.Run
		tuning []string
	)
	for _, s := range set {
		r, _ := s.Runs(done)
		_, t := s.Final(done)
		runs, tuning = append(runs, r...), append(tuning, t...)
	}
	if !sameArgs(runs, done, path, stderr) {
		return exitFailure
	}
	if o.dryRun {
		listRuns(stdout, runs, done, 30)
		if len(tuning) > 0 {
			fmt.Fprintf(stdout, "  and %d runs at the rates that tuning chooses for %s\n", len(tuning)*len(set[0].Seeds), strings.Join(tuning, ", "))
		}
		fmt.Fprintf(stdout, "%d runs listed, %d done in %s\n", len(runs), experiment.CountDone(runs, done), path)
		return exitOK
	}
	if o.threads > 0 {
		runtime.GOMAXPROCS(o.threads)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if !o.report {
		trainSet, testSet, subset, err := fashionMNIST(ctx, "flock experiment", o.data, true, stderr, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "flock experiment: %v\n", err)
			return exitFailure
		}
		if subset && o.trainImages == 0 {
			fmt.Fprintf(stderr, "flock experiment: the study needs the full Fashion-MNIST (see flock train --help), not its embedded subset\n")
			return exitFailure
		}
		sets := job.Images{Train: trainSet, Test: testSet}
		progress := experiment.NewProgress(stdout, term.IsTerminal(stdout))
		// Each study in turn: its tuning, then its final runs; a plan
		// grows as tuning finishes, so run until it stops growing.
		for _, s := range set {
			for {
				runs, complete := s.Runs(done)
				if complete {
					break
				}
				g := &experiment.Grid{Runs: runs, Done: done, Path: path, Jobs: o.jobs, Setup: gridSetup,
					Build: sets.Build, StepsPerEpoch: sets.StepsPerEpoch, TestImages: testSet.N, Progress: progress, KeepDiverged: true}
				if err := g.Run(ctx); err != nil {
					return gridFailed(ctx, err, path, stderr)
				}
			}
		}
	}
	// The report's figures show the runs at the chosen rates.
	var recs []experiment.Record
	for _, s := range set {
		f, _ := s.Final(done)
		for _, r := range f {
			if d, ok := done[r.ID]; ok {
				recs = append(recs, d)
			}
		}
	}
	// The report names the command that makes the study, which
	// --report-only only rewrites.
	command := strings.Join(append([]string{"flock", "experiment", name}, slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--report-only" || a == "-report-only"
	})...), " ")
	if err := experiment.WriteStudy(o.out, experiment.Studies[name].Title, command, set, done); err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	if len(recs) > 0 {
		net, _ := netmodel.Preset("10gbe")
		node, _ := netmodel.Preset("nvlink")
		if err := experiment.WriteReport(o.out, command, net, 64, experiment.Project(recs, net, node, 64, 0)); err != nil {
			fmt.Fprintf(stderr, "flock experiment: %v\n", err)
			return exitFailure
		}
	}
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(o.out, "study.md"))
	return exitOK
}
