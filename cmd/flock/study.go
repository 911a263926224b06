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
	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/netmodel"
)

// The QSR study's rule: Hbase and α/η at the peak rate as flock train's
// defaults (4 and 0.2/0.15), α scaled with each arm's rate so that every
// rate gives the same rounds.
const (
	qsrHBase      = 4
	qsrAlphaRatio = 4.0 / 3
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
	fs.StringVar(&o.rates, "rates", "", "comma-separated peak learning `RATES` each arm is tuned over (default: "+studies[name].rates+")")
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

// namedStudy is a study of flock experiment: its title, its default
// learning rates, and its arms.
type namedStudy struct {
	title, rates string
	make         func(o studyOptions, base experiment.Study) ([]experiment.Study, error)
}

// studies are the named studies of flock experiment.
var studies = map[string]namedStudy{
	"qsr":           {"QSR at a long horizon: every arm at its own best learning rate", "0.05,0.1,0.2", qsrStudy},
	"decentralized": {"Decentralized SGD at a long horizon: exponential graphs and Swarm SGD against data parallel", "0.05,0.1,0.2", decentralizedStudy},
	"jointspar":     {"JointSpar-LARS at a long horizon: sampled layers against dense LARS", "16,32,64", jointsparStudy},
}

// studyBase checks o and returns what every study's runs share: the
// rates, the seeds, the held-out images and the flags common to every run
// (the CNN, K workers, a one-epoch warm-up — a tenth of the run under ten
// epochs —, an evaluation every 3 epochs).
func studyBase(o studyOptions, defaultRates string) (experiment.Study, error) {
	if o.rates == "" {
		o.rates = defaultRates
	}
	rates, err := parseList(o.rates, "rates", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	if err != nil {
		return experiment.Study{}, err
	}
	seeds, err := parseList(o.seeds, "seeds", func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
	if err != nil {
		return experiment.Study{}, err
	}
	if o.workers < 2 || o.epochs < 1 || o.batch < 1 || o.trainImages < 0 || o.valImages < 1 {
		return experiment.Study{}, fmt.Errorf("workers %d, epochs %d, batch-size %d, train-images %d, val-images %d: want workers ≥ 2, epochs, batch-size, val-images ≥ 1, train-images ≥ 0",
			o.workers, o.epochs, o.batch, o.trainImages, o.valImages)
	}
	warmup := "1"
	if o.epochs < 10 {
		warmup = formatFloat(float64(o.epochs) / 10)
	}
	common := []string{"--model", "cnn", "--workers", strconv.Itoa(o.workers), "--epochs", strconv.Itoa(o.epochs),
		"--batch-size", strconv.Itoa(o.batch), "--warmup", warmup, "--eval-every", "3", "--log-every", "0"}
	if o.trainImages > 0 {
		common = append(common, "--train-images", strconv.Itoa(o.trainImages))
	}
	return experiment.Study{Rates: rates, TuneSeed: 1, Seeds: seeds, ValImages: o.valImages, Common: common}, nil
}

// lrArm is an arm of flock train flags args at the tuned rate.
func lrArm(name, label string, args ...string) experiment.Arm {
	return experiment.Arm{Name: name, Label: label, Args: func(lr float64) []string {
		return append([]string{"--lr", formatFloat(lr)}, args...)
	}}
}

// decentralizedStudy tests the exponential graphs' and Swarm SGD's
// claims: DmSGD on the static and the one-peer exponential graph, and
// Swarm SGD with 2 local steps, against data parallel.
func decentralizedStudy(o studyOptions, s experiment.Study) ([]experiment.Study, error) {
	s.Name = "Decentralized SGD against data parallel, cosine decay"
	s.Arms = []experiment.Arm{
		lrArm("dp", "Data parallel", "--strategy", "dp"),
		lrArm("dmsgd-exp", "DmSGD, static exponential graph", "--strategy", "dmsgd", "--topology", "exp"),
		lrArm("dmsgd-one-peer", "DmSGD, one-peer exponential graph", "--strategy", "dmsgd", "--topology", "one-peer-exp"),
		lrArm("swarm", "Swarm SGD, H = 2", "--strategy", "swarm", "--topology", "full", "--local-steps", "2"),
	}
	s.Compare = [][2]string{{"dmsgd-one-peer", "dmsgd-exp"}, {"dmsgd-one-peer", "dp"}, {"dmsgd-exp", "dp"}, {"swarm", "dp"}}
	return []experiment.Study{s}, nil
}

// jointsparStudy tests JointSpar's claim: JointSpar-LARS at budget 0.5,
// with draws shared by the workers and with balanced draws, against
// data-parallel LARS, every parameter with its own trust ratio.
func jointsparStudy(o studyOptions, s experiment.Study) ([]experiment.Study, error) {
	s.Name = "JointSpar-LARS against LARS, cosine decay"
	s.Arms = []experiment.Arm{
		lrArm("lars", "Data parallel, LARS", "--strategy", "dp", "--optimizer", "lars", "--lars-adapt-all"),
		lrArm("jointspar-balanced", "JointSpar-LARS, budget 0.5, balanced draws", "--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--optimizer", "lars", "--lars-adapt-all"),
		lrArm("jointspar-shared", "JointSpar-LARS, budget 0.5, shared draws", "--strategy", "jointspar", "--budget", "0.5", "--optimizer", "lars", "--lars-adapt-all"),
	}
	s.Compare = [][2]string{{"jointspar-balanced", "lars"}, {"jointspar-shared", "lars"}}
	return []experiment.Study{s}, nil
}

// qsrStudy is the QSR study: under cosine, linear and step decay, Local
// SGD with QSR against data parallel and constant H at Hbase and at the H
// that makes as many synchronizations as QSR; under cosine decay also
// against H ∝ η⁻¹ at the α that makes as many synchronizations as QSR,
// and post-local SGD.
func qsrStudy(o studyOptions, base experiment.Study) ([]experiment.Study, error) {
	common := base.Common
	trainN := 60000
	if o.trainImages > 0 {
		trainN = min(trainN, o.trainImages)
	}
	// syncs counts the synchronizations of the local run with flags args
	// on the final runs' data (at any rate: α scales with it) and its
	// steps.
	syncs := func(args ...string) (n, total int, err error) {
		set, err := gridSetup(experiment.Run{Args: append(append(slices.Clone(common), "--lr", "0.05"), args...)})
		if err != nil {
			return 0, 0, err
		}
		cfg := set.Config
		steps := cfg.StepsPerEpoch(trainN, set.Workers)
		lrs, err := cfg.LRSchedule(steps)
		if err != nil {
			return 0, 0, err
		}
		ss, err := cfg.Strategy.SettingsOrDefault().(*localopt.Settings).Schedule(steps)
		if err != nil {
			return 0, 0, err
		}
		return len(localopt.Plan(ss, lrs, steps*cfg.Epochs)), steps * cfg.Epochs, nil
	}
	alpha := func(ratio, lr float64) string { return strconv.FormatFloat(ratio*lr, 'g', 6, 64) }
	local := func(args ...string) func(float64) []string {
		return func(lr float64) []string {
			return append([]string{"--lr", formatFloat(lr), "--strategy", "local"}, args...)
		}
	}
	power := func(gamma, ratio float64) func(float64) []string {
		return func(lr float64) []string {
			return local("--sync", "power", "--power-gamma", formatFloat(gamma), "--h-base", strconv.Itoa(qsrHBase), "--qsr-alpha", alpha(ratio, lr))(lr)
		}
	}
	var out []experiment.Study
	for _, decay := range []string{"cosine", "linear", "step"} {
		sched := []string{"--schedule", decay}
		n, steps, err := syncs(append(sched, "--strategy", "local", "--sync", "qsr", "--h-base", strconv.Itoa(qsrHBase), "--qsr-alpha", alpha(qsrAlphaRatio, 0.05))...)
		if err != nil {
			return nil, err
		}
		hMatch := max(1, (steps+n/2)/n)
		arm := func(name, label string, args func(float64) []string) experiment.Arm {
			return experiment.Arm{Name: name + "-" + decay, Label: label + ", " + decay, Args: func(lr float64) []string { return append(slices.Clone(sched), args(lr)...) }}
		}
		arms := []experiment.Arm{
			arm("dp", "Data parallel", func(lr float64) []string { return []string{"--lr", formatFloat(lr), "--strategy", "dp"} }),
			arm("qsr", "Local SGD, QSR", power(2, qsrAlphaRatio)),
			arm("h-base", fmt.Sprintf("Local SGD, H = %d", qsrHBase), local("--sync", "constant", "--h", strconv.Itoa(qsrHBase))),
			arm("h-match", fmt.Sprintf("Local SGD, H = %d (QSR's syncs)", hMatch), local("--sync", "constant", "--h", strconv.Itoa(hMatch))),
		}
		compare := [][2]string{{"qsr", "dp"}, {"qsr", "h-base"}, {"qsr", "h-match"}}
		if decay == "cosine" {
			// α of H ∝ η⁻¹ for QSR's number of synchronizations: the
			// count falls as α grows, so bisect on α/η.
			lo, hi := 0.0, 64.0
			for range 40 {
				mid := (lo + hi) / 2
				m, _, err := syncs(append(sched, "--strategy", "local", "--sync", "power", "--power-gamma", "1", "--h-base", strconv.Itoa(qsrHBase), "--qsr-alpha", alpha(mid, 0.05))...)
				if err != nil {
					return nil, err
				}
				if m > n {
					lo = mid
				} else {
					hi = mid
				}
			}
			arms = append(arms,
				arm("power1", "Local SGD, H ∝ η⁻¹ (QSR's syncs)", power(1, hi)),
				arm("post-local", "Post-local SGD, H = 8 after ¼", local("--sync", "post-local", "--h", "8", "--post-local-switch", formatFloat(float64(o.epochs)/4))))
			compare = append(compare, [2]string{"qsr", "power1"}, [2]string{"qsr", "post-local"})
		}
		s := base
		s.Name, s.Arms, s.Compare = "QSR against its baselines, "+decay+" decay", arms, nil
		for _, c := range compare {
			s.Compare = append(s.Compare, [2]string{c[0] + "-" + decay, c[1] + "-" + decay})
		}
		out = append(out, s)
	}
	return out, nil
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// studyAbout says what each study tests.
var studyAbout = map[string]string{
	"qsr": `Test the Quadratic Synchronization Rule's claim at a long horizon: Local
SGD with H = max(Hbase, ⌊(α/η)²⌋) against data parallel, constant H at
Hbase and at the H that synchronizes as often as QSR, H ∝ η⁻¹ at the α that
synchronizes as often as QSR, and post-local SGD, under cosine, linear and
step decay (×0.1 at 50% and 75%). QSR's Hbase is 4 and α = (4/3)·η,
flock train's defaults.`,
	"decentralized": `Test the exponential graphs' and Swarm SGD's claims at a long horizon:
DmSGD on the static and on the one-peer exponential graph, and Swarm SGD
with 2 local steps on the full graph, against data parallel.`,
	"jointspar": `Test JointSpar's claim at a long horizon: JointSpar-LARS at budget 0.5,
with draws shared by the workers and with balanced draws, against
data-parallel LARS, every parameter with its own trust ratio.`,
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
`, name, studyAbout[name])
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
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
		for flagName, v := range map[string]string{"workers": "2", "epochs": "1", "train-images": "2048", "val-images": "512", "rates": strings.Join(strings.Split(studies[name].rates, ",")[:2], ","), "seeds": "1,2"} {
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
	base, err := studyBase(o, studies[name].rates)
	if err != nil {
		return usage("%v", err)
	}
	set, err := studies[name].make(o, base)
	if err != nil {
		return usage("%v", err)
	}
	path := filepath.Join(o.out, "runs.jsonl")
	done, err := experiment.ReadRecords(path, flagsPattern)
	if err != nil {
		fmt.Fprintf(stderr, "flock experiment: %v\n", err)
		return exitFailure
	}
	// plan lists the runs whose flags are known: every tuning run, and the
	// final runs of the arms whose tuning is done.
	plan := func() (runs []experiment.Run, tuning []string) {
		for _, s := range set {
			f, t := s.Final(done)
			runs = append(append(runs, s.Tuning()...), f...)
			tuning = append(tuning, t...)
		}
		return runs, tuning
	}
	runs, tuning := plan()
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
				f, _ := s.Final(done)
				runs := append(s.Tuning(), f...)
				if experiment.CountDone(runs, done) == len(runs) && len(f) == len(s.Arms)*len(s.Seeds) {
					break
				}
				g := &experiment.Grid{Runs: runs, Done: done, Path: path, Jobs: o.jobs, Setup: gridSetup,
					Build: sets.Build, StepsPerEpoch: sets.StepsPerEpoch, TestImages: testSet.N, Progress: progress, KeepDiverged: true}
				if err := g.Run(ctx); err != nil {
					return gridFailed(ctx, err, path, stderr)
				}
			}
		}
		runs, _ = plan()
	}
	var recs []experiment.Record
	for _, r := range runs {
		if d, ok := done[r.ID]; ok && !strings.HasPrefix(r.ID, "tune/") {
			recs = append(recs, d)
		}
	}
	command := strings.Join(append([]string{"flock", "experiment", name}, args...), " ")
	if err := experiment.WriteStudy(o.out, studies[name].title, command, set, done); err != nil {
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
