package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/flockml/flock/localopt"
	"github.com/flockml/flock/optim"
	"github.com/flockml/flock/train"
)

func init() {
	extraCommands = append(extraCommands, command{"sync-plan", "print the synchronization rounds of a local-update schedule", runSyncPlan, syncPlanHelp})
}

// syncPlanOptions are the flags of flock sync-plan.
type syncPlanOptions struct {
	lr, warmupStartLR, finalLR float64
	warmupSteps, steps         int
	decay                      string
	sync                       *localopt.Settings
	switchStep                 int
	roundsOnly                 bool
}

func syncPlanFlags(o *syncPlanOptions) *flag.FlagSet {
	fs := flag.NewFlagSet("flock sync-plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Float64Var(&o.lr, "lr", o.lr, "peak learning rate, reached at the end of the warm-up")
	fs.IntVar(&o.warmupSteps, "warmup-steps", o.warmupSteps, "`N` steps of linear warm-up")
	fs.Float64Var(&o.warmupStartLR, "warmup-start-lr", o.warmupStartLR, "learning rate of the warm-up's first step")
	fs.Float64Var(&o.finalLR, "final-lr", o.finalLR, "learning rate at the end of a cosine or linear decay")
	fs.IntVar(&o.steps, "steps", o.steps, "`N` steps in the run")
	fs.StringVar(&o.decay, "decay", o.decay, "decay after the warm-up: cosine, linear, step (×0.1 at 50% and 75%), constant")
	fs.StringVar(&o.sync.Sync, "sync", o.sync.Sync, "rule: constant, post-local, power, qsr")
	fs.IntVar(&o.sync.H, "h", o.sync.H, "`H` of constant and post-local")
	fs.IntVar(&o.sync.HBase, "h-base", o.sync.HBase, "`Hbase` of power and qsr")
	fs.Float64Var(&o.sync.Alpha, "qsr-alpha", o.sync.Alpha, "`α` of power and qsr")
	fs.Float64Var(&o.sync.Gamma, "power-gamma", o.sync.Gamma, "`γ` of power")
	fs.IntVar(&o.switchStep, "post-local-switch-step", o.switchStep, "`STEP` at which post-local SGD starts its local steps")
	fs.BoolVar(&o.roundsOnly, "rounds-only", o.roundsOnly, "print only the rounds, start:H space-separated on one line")
	return fs
}

func defaultSyncPlan() syncPlanOptions {
	d := train.DefaultConfig()
	return syncPlanOptions{lr: d.LR, warmupStartLR: d.LR * 0.1, decay: "cosine", steps: 1000, warmupSteps: 50,
		sync: localopt.DefaultSettings()}
}

func syncPlanHelp(w io.Writer) {
	o := defaultSyncPlan()
	fs := syncPlanFlags(&o)
	fmt.Fprint(w, `Usage: flock sync-plan [flags]

Print the rounds a synchronization rule gives for a learning-rate schedule,
without training: each round as start:H (H local steps from step start, the
steps counted from 0), the number of synchronizations, and the
communication saved against data parallel, which all-reduces the gradients
at every step (a synchronization all-reduces the parameters, as many
bytes). H is chosen at each round's first step from that step's learning
rate, is Hbase during the warm-up and never passes the end of the run.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Example (the Quadratic Synchronization Rule on a cosine schedule):
  flock sync-plan --lr 0.1 --warmup-steps 10 --warmup-start-lr 0 --final-lr 0 --steps 110 --sync qsr --qsr-alpha 0.2 --h-base 2
`)
}

func runSyncPlan(args []string, stdout, stderr io.Writer) int {
	o := defaultSyncPlan()
	fs := syncPlanFlags(&o)
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flock sync-plan: "+format+"; run 'flock sync-plan --help' for usage\n", a...)
		return exitUsage
	}
	if helpAsked(args) {
		syncPlanHelp(stdout)
		return exitOK
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			syncPlanHelp(stdout)
			return exitOK
		}
		return bad("%v", err)
	}
	if fs.NArg() > 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	decay, err := optim.ParseDecay(o.decay)
	if err != nil {
		return bad("%v", err)
	}
	if !(o.lr > 0) || o.steps < 1 || o.warmupSteps < 0 || o.warmupSteps >= o.steps || !(o.warmupStartLR >= 0) || !(o.finalLR >= 0) {
		return bad("want lr > 0, steps ≥ 1, 0 ≤ warm-up steps < steps, and learning rates ≥ 0")
	}
	lr := optim.Schedule{Base: o.lr, Decay: decay, WarmupSteps: o.warmupSteps, WarmupStart: o.warmupStartLR / o.lr,
		TotalSteps: o.steps, Final: o.finalLR}
	if decay == optim.Step {
		lr.Milestones, lr.Gamma = []int{o.steps / 2, o.steps * 3 / 4}, 0.1
	}
	if err := lr.Validate(); err != nil {
		return bad("%v", err)
	}
	if err := o.sync.Validate("local"); err != nil {
		return bad("%v", err)
	}
	sched, err := o.sync.Schedule(1)
	if err != nil {
		return bad("%v", err)
	}
	if p, ok := sched.(localopt.PostLocal); ok {
		p.SwitchStep = o.switchStep
		sched = p
	}
	rounds := localopt.Plan(sched, lr, o.steps)
	if o.roundsOnly {
		fmt.Fprintln(stdout, localopt.FormatRounds(rounds))
		return exitOK
	}
	fmt.Fprintf(stdout, "%v on %d steps of lr %g %v (warm-up %d steps from %g, final %g)\n", sched, o.steps, o.lr, decay, o.warmupSteps, o.warmupStartLR, o.finalLR)
	fmt.Fprintf(stdout, "rounds: %s\n", localopt.FormatRounds(rounds))
	longest := 0
	for _, r := range rounds {
		longest = max(longest, r.H)
	}
	fmt.Fprintf(stdout, "%d synchronizations (data parallel: %d), longest round %d steps\n", len(rounds), o.steps, longest)
	fmt.Fprintf(stdout, "communication vs data parallel: %.1f× less\n", float64(o.steps)/float64(len(rounds)))
	return exitOK
}
