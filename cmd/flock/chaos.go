package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/flockml/flock/bench/chaos"
	"github.com/flockml/flock/internal/atomicfile"
)

func init() {
	extraCommands = append(extraCommands, command{"chaos", "inject faults into real multi-process jobs and check that nothing hangs or is lost", runChaos, chaosHelp})
}

func chaosHelp(w io.Writer) {
	names := make([]string, len(chaos.Kinds))
	for i, k := range chaos.Kinds {
		names[i] = string(k)
	}
	fmt.Fprintf(w, `Usage: flock chaos [flags]

Run flock train jobs under flock run (two or three ranks on loopback, or two
ranks in two network namespaces joined by a veth pair) and strike each once,
at a step drawn from --seed: a rank killed between steps, while it waits in
a collective or while it writes its checkpoint; SIGTERM to the job; a rank
frozen past the timeout; the checkpoint file system filled up; packets lost,
a partition, packets held back and reordered, a slow link or (where the
kernel has netem) latency with jitter on the link. After each fault it checks that no process hangs, that the job
finishes or names the fault, that the checkpoint is the newest complete one
or newer, and that the job resumed from it gives the losses, test accuracy,
bytes and synchronizations of an uninterrupted run, bit for bit.

The trials come in rounds, each striking once with every fault this machine
allows, on strategies dp, local-qsr, diloco, dmsgd, swarm and jointspar in
turn. The namespaces, mounts and nftables rules need root, ip and nft; a
fault that cannot be injected is listed with the reason.

Flags:
  --budget DURATION   start no trial after DURATION (default 10m)
  --faults LIST       comma-separated faults (default all: %s)
  --out PATH          also write the report (Markdown) to PATH
  --rounds N          stop after N rounds (0: when the budget is spent)
  --seed N            seed of the trials' order, steps, victims and sizes (default 1)
  --strategies LIST   comma-separated strategies (default all)
  --timeout DURATION  the jobs' --timeout (default 4s)
  --trials N          stop after N trials (0: when the budget is spent)

Exit status: 0 when every invariant held, 1 when one failed or the suite
could not run, 2 for a usage error.

Example:
  sudo flock chaos --seed 1 --budget 10m --out chaos.md
`, strings.Join(names, ", "))
}

func runChaos(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("flock chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	seed := fs.Uint64("seed", 1, "")
	budget := fs.Duration("budget", 10*time.Minute, "")
	trials := fs.Int("trials", 0, "")
	rounds := fs.Int("rounds", 0, "")
	faults := fs.String("faults", "", "")
	strategies := fs.String("strategies", "", "")
	timeout := fs.Duration("timeout", 4*time.Second, "")
	out := fs.String("out", "", "")
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "flock chaos: "+format+"; run 'flock chaos --help' for usage\n", a...)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			chaosHelp(stdout)
			return exitOK
		}
		return usage("%v", err)
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if *trials < 0 || *rounds < 0 || *budget < 0 || *timeout <= 0 {
		return usage("--trials, --rounds and --budget must be ≥ 0 and --timeout > 0")
	}
	opts := chaos.Options{Seed: *seed, Budget: *budget, Trials: *trials, Rounds: *rounds, Timeout: *timeout, Log: stdout}
	for _, f := range splitList(*faults) {
		opts.Kinds = append(opts.Kinds, chaos.Kind(f))
	}
	opts.Strategies = splitList(*strategies)
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "flock chaos: %v\n", err)
		return exitFailure
	}
	opts.Flock = exe
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	rep, err := chaos.Run(ctx, opts)
	if err != nil && strings.Contains(err.Error(), "unknown") {
		return usage("%v", strings.TrimPrefix(err.Error(), "chaos: "))
	}
	fmt.Fprintln(stdout)
	rep.WriteMarkdown(stdout)
	if *out != "" {
		if werr := atomicfile.Write(*out, rep.WriteMarkdown); werr != nil {
			fmt.Fprintf(stderr, "flock chaos: write %s: %v\n", *out, werr)
			return exitFailure
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "flock %v\n", err)
		return exitFailure
	}
	if v := rep.Violations(); len(v) > 0 {
		fmt.Fprintf(stderr, "flock chaos: %d invariants failed\n", len(v))
		return exitFailure
	}
	return exitOK
}

// splitList returns the comma-separated items of s, trimmed (nil for "").
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
