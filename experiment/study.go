package experiment

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Arm is one method of a study: the flock train flags that select it at
// a given peak learning rate.
type Arm struct {
	Name, Label string
	Args        func(lr float64) []string
}

// Study compares arms, each at its own best learning rate. Every arm
// first trains once per rate of Rates with seed TuneSeed, holding out the
// last ValImages training images and evaluating on them (--val-images);
// the rate whose run reached the highest final validation accuracy is the
// arm's (the lower rate on a tie). The arm then trains once per seed of
// Seeds at that rate on the whole training set, evaluated on the test
// set: those runs make the study's results. Common are the flags of
// every run.
type Study struct {
	Name      string
	Arms      []Arm
	Rates     []float64
	TuneSeed  uint64
	Seeds     []uint64
	ValImages int
	Common    []string
	// Compare lists pairs of arms whose difference in test accuracy the
	// report states, the first arm against the second.
	Compare [][2]string
}

// TuneID is the ID of arm's tuning run at rate lr.
func TuneID(arm string, lr float64) string { return "tune/" + arm + "/lr" + formatRate(lr) }

func formatRate(lr float64) string { return strconv.FormatFloat(lr, 'g', -1, 64) }

// tuneRun is arm a's tuning run at rate lr.
func (s Study) tuneRun(a Arm, lr float64) Run {
	args := append(append(cloneArgs(s.Common), "--seed", strconv.FormatUint(s.TuneSeed, 10), "--val-images", strconv.Itoa(s.ValImages)), a.Args(lr)...)
	return Run{ID: TuneID(a.Name, lr), Strategy: a.Name, Label: a.Label, Seed: s.TuneSeed, Args: args}
}

// cloneArgs returns a copy of args, so that appending to it never writes
// into the study's own.
func cloneArgs(args []string) []string { return append([]string(nil), args...) }

// Chosen returns arm's chosen rate and its validation accuracy, once its
// tuning runs are all in done.
func (s Study) Chosen(arm Arm, done map[string]Record) (lr, acc float64, ok bool) {
	acc = -1
	for _, r := range s.Rates {
		rec, found := done[TuneID(arm.Name, r)]
		if !found {
			return 0, 0, false
		}
		if rec.TestAcc > acc || rec.TestAcc == acc && r < lr {
			lr, acc = r, rec.TestAcc
		}
	}
	return lr, acc, len(s.Rates) > 0
}

// Tuning returns the study's tuning runs, arm by arm.
func (s Study) Tuning() []Run {
	var runs []Run
	for _, a := range s.Arms {
		for _, lr := range s.Rates {
			runs = append(runs, s.tuneRun(a, lr))
		}
	}
	return runs
}

// Runs returns the study's runs whose flags are known: every tuning run,
// then the final runs of the arms whose tuning is in done; and whether
// every run there will be is in done.
func (s Study) Runs(done map[string]Record) (runs []Run, complete bool) {
	f, tuning := s.Final(done)
	runs = append(s.Tuning(), f...)
	return runs, len(tuning) == 0 && CountDone(runs, done) == len(runs)
}

// Final returns the runs at the chosen rates of the arms whose tuning is
// in done, and the names of the arms still being tuned.
func (s Study) Final(done map[string]Record) (runs []Run, tuning []string) {
	for _, a := range s.Arms {
		lr, _, ok := s.Chosen(a, done)
		if !ok {
			tuning = append(tuning, a.Name)
			continue
		}
		for _, seed := range s.Seeds {
			args := append(append(cloneArgs(s.Common), "--seed", strconv.FormatUint(seed, 10)), a.Args(lr)...)
			runs = append(runs, Run{ID: fmt.Sprintf("%s/seed%d", a.Name, seed), Strategy: a.Name, Label: a.Label, Seed: seed, Args: args})
		}
	}
	return runs, tuning
}

// tCI95 returns the half-width of the 95% confidence interval of the mean
// of n values of standard deviation sd (Student's t; 0 for n < 2).
func tCI95(sd float64, n int) float64 {
	if n < 2 {
		return 0
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	return t * sd / math.Sqrt(float64(n))
}

// welch returns the difference of the means of a and b and the half-width
// of its 95% confidence interval (Welch's t, with the Welch–Satterthwaite
// degrees of freedom); the half-width is NaN when either has fewer than
// two values.
func welch(a, b []float64) (diff, half float64) {
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	diff = ma - mb
	if len(a) < 2 || len(b) < 2 {
		return diff, math.NaN()
	}
	sa, sb := va/float64(len(a)), vb/float64(len(b))
	se := math.Sqrt(sa + sb)
	if se == 0 {
		return diff, 0
	}
	nu := (sa + sb) * (sa + sb) / (sa*sa/float64(len(a)-1) + sb*sb/float64(len(b)-1))
	return diff, distuv.StudentsT{Mu: 0, Sigma: 1, Nu: nu}.Quantile(0.975) * se
}

// WriteStudy writes DIR/study.md: for each study, the tuning (each arm's
// validation accuracy at each rate, the chosen one in bold), the test
// accuracy at the chosen rate with its 95% interval, and the comparisons,
// from the runs in done, under the heading title. command is what made
// it.
func WriteStudy(dir, title, command string, studies []Study, done map[string]Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\nMade by (from the repository root):\n\n```\n%s\n```\n\n", title, command)
	b.WriteString("Each arm trains once per learning rate on the training set less its last images (held out as a validation set), " +
		"seed 1; the rate of the highest final validation accuracy is the arm's. At that rate it trains on the whole training set once per seed, " +
		"evaluated on the test set; a rate chosen at the end of the grid is marked (edge). Test accuracy: mean ± std over the seeds and the 95% interval of the mean (Student's t). " +
		"Differences: mean of the first arm less mean of the second, with the 95% interval of Welch's t; " +
		"an interval that holds 0 is no evidence of a difference. Bytes: sent per worker, mean over the seeds.\n")
	for _, s := range studies {
		fmt.Fprintf(&b, "\n## %s\n\n", s.Name)
		b.WriteString("| arm |")
		for _, lr := range s.Rates {
			fmt.Fprintf(&b, " val. acc. at lr %s (%%) |", formatRate(lr))
		}
		b.WriteString(" seeds | test accuracy (%) | 95% interval | sent (MiB) | synchronizations |\n|---|")
		b.WriteString(strings.Repeat("---|", len(s.Rates)+5) + "\n")
		finals := map[string][]Record{}
		for _, a := range s.Arms {
			fmt.Fprintf(&b, "| %s |", a.Label)
			chosen, _, ok := s.Chosen(a, done)
			for _, lr := range s.Rates {
				rec, found := done[TuneID(a.Name, lr)]
				switch {
				case !found:
					b.WriteString(" – |")
				case rec.Diverged:
					b.WriteString(" diverged |")
				case ok && lr == chosen:
					edge := ""
					if len(s.Rates) > 1 && (lr == s.Rates[0] || lr == s.Rates[len(s.Rates)-1]) {
						edge = " (edge)"
					}
					fmt.Fprintf(&b, " **%.2f**%s |", 100*rec.TestAcc, edge)
				default:
					fmt.Fprintf(&b, " %.2f |", 100*rec.TestAcc)
				}
			}
			var accs, sent, syncs []float64
			for _, seed := range s.Seeds {
				if rec, found := done[fmt.Sprintf("%s/seed%d", a.Name, seed)]; found && ok {
					finals[a.Name] = append(finals[a.Name], rec)
					accs = append(accs, 100*rec.TestAcc)
					sent = append(sent, float64(rec.Comm.Sent)/(1<<20))
					syncs = append(syncs, float64(rec.Comm.Syncs))
				}
			}
			if len(accs) == 0 {
				b.WriteString(" 0 | – | – | – | – |\n")
				continue
			}
			m, sd := stat.MeanStdDev(accs, nil)
			if len(accs) == 1 {
				sd = 0
			}
			h := tCI95(sd, len(accs))
			fmt.Fprintf(&b, " %d | %.2f ± %.2f | %.2f – %.2f | %.1f | %.0f |\n", len(accs), m, sd, m-h, m+h, stat.Mean(sent, nil), stat.Mean(syncs, nil))
		}
		if len(s.Compare) == 0 {
			continue
		}
		b.WriteString("\n| comparison | difference (points) | 95% interval | bytes, first / second |\n|---|---|---|---|\n")
		label := map[string]string{}
		for _, a := range s.Arms {
			label[a.Name] = a.Label
		}
		for _, c := range s.Compare {
			ra, rb := finals[c[0]], finals[c[1]]
			if len(ra) == 0 || len(rb) == 0 {
				fmt.Fprintf(&b, "| %s − %s | – | – | – |\n", label[c[0]], label[c[1]])
				continue
			}
			acc := func(rs []Record) (xs []float64) {
				for _, r := range rs {
					xs = append(xs, 100*r.TestAcc)
				}
				return xs
			}
			sentOf := func(rs []Record) (xs []float64) {
				for _, r := range rs {
					xs = append(xs, float64(r.Comm.Sent))
				}
				return xs
			}
			d, h := welch(acc(ra), acc(rb))
			interval := "–"
			if !math.IsNaN(h) {
				interval = fmt.Sprintf("%+.2f – %+.2f", d-h, d+h)
			}
			fmt.Fprintf(&b, "| %s − %s | %+.2f | %s | %.2f |\n", label[c[0]], label[c[1]], d, interval, stat.Mean(sentOf(ra), nil)/stat.Mean(sentOf(rb), nil))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "study.md"), []byte(b.String()), 0o644)
}
