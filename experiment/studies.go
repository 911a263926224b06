package experiment

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/flockml/flock/localopt"
)

// The QSR study's rule: Hbase and α/η at the peak rate as flock train's
// defaults (4 and 0.2/0.15), α scaled with each arm's rate so that every
// rate gives the same rounds.
const (
	qsrHBase      = 4
	qsrAlphaRatio = 4.0 / 3
)

// StudyOptions size the runs of a named study.
type StudyOptions struct {
	// Rates are the learning rates each arm is tuned over (nil: the
	// study's own), Seeds those of the runs at the chosen rate.
	Rates []float64
	Seeds []uint64
	// Workers, Epochs and Batch size every run; TrainImages (0: all
	// 60,000) trains on the first images only, ValImages are held out for
	// tuning.
	Workers, Epochs, Batch, TrainImages, ValImages int
	// Setup turns a run's flags into what it trains (flock train's).
	Setup func(Run) (Setup, error)
}

// NamedStudy is a study of flock experiment: its title, what it tests,
// its learning rates, and its arms.
type NamedStudy struct {
	Title, About string
	Rates        []float64
	make         func(o StudyOptions, base Study) ([]Study, error)
}

// Studies are the named studies of flock
var Studies = map[string]NamedStudy{
	"qsr": {"QSR at a long horizon: every arm at its own best learning rate", studyAbout["qsr"], []float64{0.05, 0.1, 0.2}, qsrStudy},
	"decentralized": {"Decentralized SGD at a long horizon: exponential graphs and Swarm SGD against data parallel", studyAbout["decentralized"],
		[]float64{0.05, 0.1, 0.2}, decentralizedStudy},
	"jointspar": {"JointSpar-LARS at a long horizon: sampled layers against dense LARS", studyAbout["jointspar"], []float64{16, 32, 64}, jointsparStudy},
}

// Make returns the studies of n for o.
func (n NamedStudy) Make(o StudyOptions) ([]Study, error) {
	if o.Rates == nil {
		o.Rates = n.Rates
	}
	base, err := studyBase(o)
	if err != nil {
		return nil, err
	}
	return n.make(o, base)
}

// studyBase checks o and returns what every study's runs share: the
// rates, the seeds, the held-out images and the flags common to every run
// (the CNN, K workers, a one-epoch warm-up — a tenth of the run under ten
// epochs —, an evaluation every 3 epochs).
func studyBase(o StudyOptions) (Study, error) {
	if o.Setup == nil {
		return Study{}, fmt.Errorf("a study needs StudyOptions.Setup")
	}
	if o.Workers < 2 || o.Epochs < 1 || o.Batch < 1 || o.TrainImages < 0 || o.ValImages < 1 || len(o.Rates) == 0 || len(o.Seeds) == 0 {
		return Study{}, fmt.Errorf("workers %d, epochs %d, batch-size %d, train-images %d, val-images %d: want workers ≥ 2, epochs, batch-size, val-images ≥ 1, train-images ≥ 0, rates and seeds",
			o.Workers, o.Epochs, o.Batch, o.TrainImages, o.ValImages)
	}
	warmup := "1"
	if o.Epochs < 10 {
		warmup = formatRate(float64(o.Epochs) / 10)
	}
	common := []string{"--model", "cnn", "--workers", strconv.Itoa(o.Workers), "--epochs", strconv.Itoa(o.Epochs),
		"--batch-size", strconv.Itoa(o.Batch), "--warmup", warmup, "--eval-every", "3", "--log-every", "0"}
	if o.TrainImages > 0 {
		common = append(common, "--train-images", strconv.Itoa(o.TrainImages))
	}
	return Study{Rates: o.Rates, TuneSeed: 1, Seeds: o.Seeds, ValImages: o.ValImages, Common: common}, nil
}

// lrArm is an arm of flock train flags args at the tuned rate.
func lrArm(name, label string, args ...string) Arm {
	return Arm{Name: name, Label: label, Args: func(lr float64) []string {
		return append([]string{"--lr", formatRate(lr)}, args...)
	}}
}

// decentralizedStudy tests the exponential graphs' and Swarm SGD's
// claims: DmSGD on the static and the one-peer exponential graph, and
// Swarm SGD with 2 local steps, against data parallel.
func decentralizedStudy(o StudyOptions, s Study) ([]Study, error) {
	s.Name = "Decentralized SGD against data parallel, cosine decay"
	s.Arms = []Arm{
		lrArm("dp", "Data parallel", "--strategy", "dp"),
		lrArm("dmsgd-exp", "DmSGD, static exponential graph", "--strategy", "dmsgd", "--topology", "exp"),
		lrArm("dmsgd-one-peer", "DmSGD, one-peer exponential graph", "--strategy", "dmsgd", "--topology", "one-peer-exp"),
		lrArm("swarm", "Swarm SGD, H = 2", "--strategy", "swarm", "--topology", "full", "--local-steps", "2"),
	}
	s.Compare = [][2]string{{"dmsgd-one-peer", "dmsgd-exp"}, {"dmsgd-one-peer", "dp"}, {"dmsgd-exp", "dp"}, {"swarm", "dp"}}
	return []Study{s}, nil
}

// jointsparStudy tests JointSpar's claim: JointSpar-LARS at budget 0.5,
// with draws shared by the workers and with balanced draws, against
// data-parallel LARS, every parameter with its own trust ratio.
func jointsparStudy(o StudyOptions, s Study) ([]Study, error) {
	s.Name = "JointSpar-LARS against LARS, cosine decay"
	s.Arms = []Arm{
		lrArm("lars", "Data parallel, LARS", "--strategy", "dp", "--optimizer", "lars", "--lars-adapt-all"),
		lrArm("jointspar-balanced", "JointSpar-LARS, budget 0.5, balanced draws", "--strategy", "jointspar", "--budget", "0.5", "--balanced-draws", "--optimizer", "lars", "--lars-adapt-all"),
		lrArm("jointspar-shared", "JointSpar-LARS, budget 0.5, shared draws", "--strategy", "jointspar", "--budget", "0.5", "--optimizer", "lars", "--lars-adapt-all"),
	}
	s.Compare = [][2]string{{"jointspar-balanced", "lars"}, {"jointspar-shared", "lars"}}
	return []Study{s}, nil
}

// qsrStudy is the QSR study: under cosine, linear and step decay, Local
// SGD with QSR against data parallel and constant H at Hbase and at the H
// that makes as many synchronizations as QSR; under cosine decay also
// against H ∝ η⁻¹ at the α that makes as many synchronizations as QSR,
// and post-local SGD.
func qsrStudy(o StudyOptions, base Study) ([]Study, error) {
	common := base.Common
	trainN := 60000
	if o.TrainImages > 0 {
		trainN = min(trainN, o.TrainImages)
	}
	// syncs counts the synchronizations of the local run with flags args
	// on the final runs' data (at any rate: α scales with it) and its
	// steps.
	syncs := func(args ...string) (n, total int, err error) {
		set, err := o.Setup(Run{Args: append(append(slices.Clone(common), "--lr", "0.05"), args...)})
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
			return append([]string{"--lr", formatRate(lr), "--strategy", "local"}, args...)
		}
	}
	power := func(gamma, ratio float64) func(float64) []string {
		return func(lr float64) []string {
			return local("--sync", "power", "--power-gamma", formatRate(gamma), "--h-base", strconv.Itoa(qsrHBase), "--qsr-alpha", alpha(ratio, lr))(lr)
		}
	}
	var out []Study
	for _, decay := range []string{"cosine", "linear", "step"} {
		sched := []string{"--schedule", decay}
		n, steps, err := syncs(append(sched, "--strategy", "local", "--sync", "qsr", "--h-base", strconv.Itoa(qsrHBase), "--qsr-alpha", alpha(qsrAlphaRatio, 0.05))...)
		if err != nil {
			return nil, err
		}
		hMatch := max(1, (steps+n/2)/n)
		arm := func(name, label string, args func(float64) []string) Arm {
			return Arm{Name: name + "-" + decay, Label: label + ", " + decay, Args: func(lr float64) []string { return append(slices.Clone(sched), args(lr)...) }}
		}
		arms := []Arm{
			arm("dp", "Data parallel", func(lr float64) []string { return []string{"--lr", formatRate(lr), "--strategy", "dp"} }),
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
				arm("post-local", "Post-local SGD, H = 8 after ¼", local("--sync", "post-local", "--h", "8", "--post-local-switch", formatRate(float64(o.Epochs)/4))))
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

// studyAbout says what each named study tests.
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
