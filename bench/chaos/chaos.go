package chaos

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kind is a kind of fault.
type Kind string

// The kinds of fault the suite injects.
const (
	// KillStep kills a random rank with SIGKILL at a random step.
	KillStep Kind = "kill-step"
	// KillSync freezes rank 0's peers (SIGSTOP) at a random step; once
	// rank 0 has reported nothing for a while it waits in a collective,
	// and it is killed there; the peers then go on.
	KillSync Kind = "kill-sync"
	// KillCheckpoint kills a rank while it writes its checkpoint file
	// (its temporary file exists: the rank is frozen first, the file
	// checked, then killed).
	KillCheckpoint Kind = "kill-checkpoint"
	// Term sends SIGTERM to flock run, as a scheduler ending a job does.
	Term Kind = "sigterm"
	// Stop freezes a rank with SIGSTOP for longer than the job's timeout.
	Stop Kind = "sigstop"
	// DiskFull fills the file system that holds the checkpoints (a tmpfs
	// mounted for the trial).
	DiskFull Kind = "disk-full"
	// Loss drops a random share of the packets on a link between two
	// network namespaces, for a while.
	Loss Kind = "loss"
	// Partition drops every packet on that link for a while.
	Partition Kind = "partition"
	// Reorder holds a random share of the packets on that link in a slow
	// queue (an htb class), for a while: they arrive late and out of
	// order.
	Reorder Kind = "reorder"
	// Slow caps the link's rate, for a while.
	Slow Kind = "slow"
	// Delay adds latency with jitter and reorders packets on that link
	// (tc netem; not every kernel has it).
	Delay Kind = "delay"
)

// Kinds lists every kind of fault, in the order of reports.
var Kinds = []Kind{KillStep, KillSync, KillCheckpoint, Term, Stop, DiskFull, Loss, Partition, Reorder, Slow, Delay}

// network reports whether the kind needs the two network namespaces.
func (k Kind) network() bool {
	return k == Loss || k == Partition || k == Reorder || k == Slow || k == Delay
}

// Strategies are the strategies the suite runs, with the flock train
// flags that choose them.
var Strategies = map[string][]string{
	"dp":        {"--strategy", "dp"},
	"local-qsr": {"--strategy", "local", "--sync", "qsr"},
	"diloco":    {"--strategy", "diloco"},
	"dmsgd":     {"--strategy", "dmsgd"},
	"swarm":     {"--strategy", "swarm"},
	"jointspar": {"--strategy", "jointspar"},
}

// deterministic reports whether a strategy's results are a function of
// its seed (Swarm's depend on the timing of its workers).
func deterministic(strategy string) bool { return strategy != "swarm" }

// checkpoints reports whether a strategy's runs write checkpoints.
func checkpoints(strategy string) bool { return strategy != "swarm" }

// Options configure a suite.
type Options struct {
	// Flock is the path of the flock binary the jobs run.
	Flock string
	// Seed chooses the trials' order, steps, victims and fault sizes.
	Seed uint64
	// Budget bounds the suite's time: no trial starts after it.
	Budget time.Duration
	// Trials bounds the number of trials and Rounds the number of rounds,
	// each striking once with every kind this machine allows (0: as many
	// as the budget allows).
	Trials, Rounds int
	// Kinds and Strategies restrict the trials (nil: all).
	Kinds      []Kind
	Strategies []string
	// Dir holds the trials' files (empty: a temporary directory, removed).
	Dir string
	// Timeout is the jobs' --timeout (default 4s); Grace flock run's
	// --grace (default 2s).
	Timeout, Grace time.Duration
	// Log receives a line per trial (nil: nothing).
	Log io.Writer
}

// Trial is one job with one fault, and what came of it.
type Trial struct {
	Index     int    `json:"index"`
	Kind      Kind   `json:"kind"`
	Strategy  string `json:"strategy"`
	Ranks     int    `json:"ranks"`
	Transport string `json:"transport"` // shm, tcp (loopback) or veth
	Step      int    `json:"step"`      // the step after which the fault came
	Victim    int    `json:"victim"`    // the rank it struck (-1: none)
	Detail    string `json:"detail"`    // the fault's size

	// Outcome is finished (exit 0), stopped (SIGTERM), failed or hung.
	Outcome string `json:"outcome"`
	// Message is the first log line naming the fault.
	Message string `json:"message"`
	// Detect is from the fault to that line; Recover from the fault to
	// the first step of the resumed (or restarted) job, or to the end of
	// a job that finished. Zero when not reached.
	Detect  time.Duration `json:"detect_ns"`
	Recover time.Duration `json:"recover_ns"`
	// Before is the step of the newest complete checkpoint seen before the
	// fault, After that of the checkpoint after it (-1: none).
	Before int `json:"checkpoint_before"`
	After  int `json:"checkpoint_after"`
	// Lost counts the steps of a complete checkpoint that the fault lost.
	Lost int `json:"lost_steps"`
	// Recovered: the job finished, or its resumed (restarted) job did,
	// with the results of an uninterrupted run where the strategy is
	// deterministic.
	Recovered bool `json:"recovered"`
	// Resumed is the step the resumed job started from (-1: restarted
	// from the beginning or not needed).
	Resumed int `json:"resumed_from"`
	// Hang: a process outlived its bound.
	Hang bool `json:"hang"`
	// Skipped says why the fault was not injected (the job ended first, a
	// checkpoint write was not caught).
	Skipped string `json:"skipped,omitempty"`
	// Violations lists the invariants that failed.
	Violations []string `json:"violations,omitempty"`
}

// Report is a suite's result.
type Report struct {
	Seed        uint64          `json:"seed"`
	Budget      time.Duration   `json:"budget_ns"`
	Trials      []Trial         `json:"trials"`
	Unavailable map[Kind]string `json:"unavailable,omitempty"`
	Elapsed     time.Duration   `json:"elapsed_ns"`
}

// Violations returns every trial's failed invariants, prefixed with the
// trial.
func (r Report) Violations() []string {
	var out []string
	for _, t := range r.Trials {
		for _, v := range t.Violations {
			out = append(out, fmt.Sprintf("trial %d (%s, %s, %d ranks, %s): %s", t.Index, t.Kind, t.Strategy, t.Ranks, t.Transport, v))
		}
	}
	return out
}

// The training run of every job: a small CNN on 3,072 Fashion-MNIST
// images, two epochs, a record per step.
var trainArgs = []string{"train", "--model", "cnn", "--train-images", "3072", "--batch-size", "64",
	"--epochs", "2", "--log-every", "1", "--json", "--seed", "7", "--no-download"}

// layout is how a job's ranks meet.
type layout struct {
	ranks     int
	transport string // shm, tcp or veth
}

type suite struct {
	opts  Options
	dir   string
	rng   *mrand.Rand
	net   *network
	refs  map[string]reference
	token string
	mount bool // tmpfs mounts work
}

// reference is an uninterrupted run's records.
type reference struct {
	records []record
	wall    time.Duration
}

// Run runs trials until the budget or the trial count is spent, and
// returns what each showed. An error means the suite could not run (the
// binary is missing, an uninterrupted reference run failed), not that an
// invariant failed: those are in the report's trials.
func Run(ctx context.Context, opts Options) (Report, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 4 * time.Second
	}
	if opts.Grace <= 0 {
		opts.Grace = 2 * time.Second
	}
	if len(opts.Kinds) == 0 {
		opts.Kinds = Kinds
	}
	if len(opts.Strategies) == 0 {
		opts.Strategies = slices.Sorted(func(yield func(string) bool) {
			for s := range Strategies {
				if !yield(s) {
					return
				}
			}
		})
	}
	for _, s := range opts.Strategies {
		if _, ok := Strategies[s]; !ok {
			return Report{}, fmt.Errorf("chaos: unknown strategy %q", s)
		}
	}
	for _, k := range opts.Kinds {
		if !slices.Contains(Kinds, k) {
			return Report{}, fmt.Errorf("chaos: unknown fault %q", k)
		}
	}
	if _, err := os.Stat(opts.Flock); err != nil {
		return Report{}, fmt.Errorf("chaos: flock binary: %w", err)
	}
	start := time.Now()
	s := &suite{opts: opts, rng: mrand.New(mrand.NewPCG(opts.Seed, 0x6368616f73)), refs: map[string]reference{}}
	tok := make([]byte, 24)
	rand.Read(tok)
	s.token = hex.EncodeToString(tok)
	s.dir = opts.Dir
	if s.dir == "" {
		d, err := os.MkdirTemp("", "flock-chaos-")
		if err != nil {
			return Report{}, err
		}
		defer os.RemoveAll(d)
		s.dir = d
	}
	rep := Report{Seed: opts.Seed, Budget: opts.Budget, Unavailable: map[Kind]string{}}

	// What this machine allows.
	needNet := slices.ContainsFunc(opts.Kinds, Kind.network)
	if needNet {
		var tag [4]byte
		rand.Read(tag[:])
		n, err := newNetwork(hex.EncodeToString(tag[:3]))
		if err != nil {
			for _, k := range opts.Kinds {
				if k.network() {
					rep.Unavailable[k] = err.Error()
				}
			}
		} else {
			defer n.close()
			s.net = n
			if !n.netem {
				rep.Unavailable[Delay] = "the kernel has no netem queueing discipline (tc qdisc add … netem: unknown kind)"
			}
		}
	}
	if slices.Contains(opts.Kinds, DiskFull) {
		if err := s.probeMount(); err != nil {
			rep.Unavailable[DiskFull] = err.Error()
		} else {
			s.mount = true
		}
	}

	// The trials come in rounds: each round strikes once with every kind
	// that can be injected here, in an order drawn from the seed, each kind
	// on the next of its strategies (shuffled once), so that a few rounds
	// cover every pair.
	var kinds []Kind
	strategies := map[Kind][]string{}
	for _, k := range opts.Kinds {
		if _, no := rep.Unavailable[k]; no {
			continue
		}
		for _, st := range opts.Strategies {
			if checkpoints(st) || k != KillCheckpoint && k != DiskFull {
				strategies[k] = append(strategies[k], st)
			}
		}
		if len(strategies[k]) > 0 {
			kinds = append(kinds, k)
			sts := strategies[k]
			s.rng.Shuffle(len(sts), func(i, j int) { sts[i], sts[j] = sts[j], sts[i] })
		}
	}
	if len(kinds) == 0 {
		return rep, errors.New("chaos: no fault can be injected here")
	}
	var round []Kind
	for i := 0; ; i++ {
		if opts.Trials > 0 && i >= opts.Trials || opts.Rounds > 0 && i >= opts.Rounds*len(kinds) ||
			opts.Budget > 0 && time.Since(start) > opts.Budget {
			break
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if i%len(kinds) == 0 {
			round = slices.Clone(kinds)
			s.rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		}
		k := round[i%len(kinds)]
		sts := strategies[k]
		t, err := s.trial(ctx, i, k, sts[(i/len(kinds))%len(sts)])
		if err != nil {
			return rep, err
		}
		rep.Trials = append(rep.Trials, t)
		if opts.Log != nil {
			fmt.Fprintln(opts.Log, t.line())
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// line is a one-line account of a trial.
func (t Trial) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trial %d: %s on %s (%d ranks, %s) after step %d", t.Index, t.Kind, t.Strategy, t.Ranks, t.Transport, t.Step)
	if t.Victim >= 0 {
		fmt.Fprintf(&b, ", rank %d", t.Victim)
	}
	if t.Detail != "" {
		fmt.Fprintf(&b, ", %s", t.Detail)
	}
	fmt.Fprintf(&b, ": %s", t.Outcome)
	if t.Skipped != "" {
		fmt.Fprintf(&b, " (not injected: %s)", t.Skipped)
	}
	if t.Detect > 0 {
		fmt.Fprintf(&b, ", detected in %v", t.Detect.Round(time.Millisecond))
	}
	if t.Recovered {
		fmt.Fprintf(&b, ", recovered in %v", t.Recover.Round(time.Millisecond))
		if t.Resumed >= 0 {
			fmt.Fprintf(&b, " from step %d", t.Resumed)
		}
	}
	for _, v := range t.Violations {
		fmt.Fprintf(&b, "\n  VIOLATION: %s", v)
	}
	return b.String()
}

// env returns the jobs' environment: one thread per rank (results are
// deterministic for a given thread count), the job's secret, and the
// transport.
func (s *suite) env(transport string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, k := range []string{"GOMAXPROCS=", "FLOCK_SHM=", "FLOCK_JOB_TOKEN=", "FLOCK_TIMEOUT=", "RANK=", "WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT="} {
			if strings.HasPrefix(kv, k) {
				return true
			}
		}
		return false
	})
	env = append(env, "GOMAXPROCS=1", "FLOCK_JOB_TOKEN="+s.token)
	if transport != "shm" {
		env = append(env, "FLOCK_SHM=0")
	}
	return env
}

// argvs returns the flock run command lines of a job: one on loopback,
// one per namespace on the veth layout.
func (s *suite) argvs(l layout, train []string) [][]string {
	common := []string{"--timeout", s.opts.Timeout.String(), "--grace", s.opts.Grace.String()}
	if l.transport != "veth" {
		argv := append([]string{s.opts.Flock, "run", "--nproc", strconv.Itoa(l.ranks)}, common...)
		return [][]string{append(append(argv, "--", s.opts.Flock), train...)}
	}
	var out [][]string
	for i := range 2 {
		argv := append([]string{s.opts.Flock, "run", "--nnodes", "2", "--node-rank", strconv.Itoa(i), "--nproc", "1",
			"--master", s.net.addr[0] + ":29500"}, common...)
		out = append(out, s.net.exec(i, append(append(argv, "--", s.opts.Flock), train...)))
	}
	return out
}

// bound is how long a job may run before it counts as hung: three times
// an uninterrupted run, plus the timeout and grace, plus extra.
func (s *suite) bound(ref reference, extra time.Duration) time.Duration {
	return 3*ref.wall + s.opts.Timeout + s.opts.Grace + 15*time.Second + extra
}

// reference returns (running it the first time) the uninterrupted run of
// a strategy on a layout.
func (s *suite) reference(ctx context.Context, strategy string, l layout) (reference, error) {
	key := fmt.Sprintf("%s/%d/%s", strategy, l.ranks, l.transport)
	if r, ok := s.refs[key]; ok {
		return r, nil
	}
	train := append(slices.Clone(trainArgs), Strategies[strategy]...)
	j, err := startJob(s.argvs(l, train), s.env(l.transport))
	if err != nil {
		return reference{}, err
	}
	if !j.wait(time.Now().Add(5 * time.Minute)) {
		j.kill()
		return reference{}, fmt.Errorf("chaos: the uninterrupted %s run did not end in 5 minutes", key)
	}
	recs, log := j.snapshot()
	if !j.finished() {
		return reference{}, fmt.Errorf("chaos: the uninterrupted %s run failed (exit %v): %s", key, j.exitCodes(), tail(log, 5))
	}
	r := reference{records: recs, wall: time.Since(j.start)}
	s.refs[key] = r
	return r, nil
}

// summary returns the summary record of recs, or nil.
func summary(recs []record) *record {
	for i := range recs {
		if recs[i].Kind == "summary" {
			return &recs[i]
		}
	}
	return nil
}

// tail returns the last n log lines, joined.
func tail(log []logLine, n int) string {
	var lines []string
	for _, l := range log[max(0, len(log)-n):] {
		lines = append(lines, l.text)
	}
	return strings.Join(lines, " | ")
}

// trial runs one job with one fault and checks the invariants.
func (s *suite) trial(ctx context.Context, index int, kind Kind, strategy string) (Trial, error) {
	t := Trial{Index: index, Kind: kind, Strategy: strategy, Victim: -1, Before: -1, After: -1, Resumed: -1}
	l := layout{ranks: 2 + s.rng.IntN(2), transport: []string{"shm", "tcp"}[s.rng.IntN(2)]}
	if kind.network() {
		l = layout{ranks: 2, transport: "veth"}
	}
	t.Ranks, t.Transport = l.ranks, l.transport
	ref, err := s.reference(ctx, strategy, l)
	if err != nil {
		return t, err
	}
	total := summary(ref.records).Steps
	t.Step = 3 + s.rng.IntN(max(1, total-8))

	dir := filepath.Join(s.dir, fmt.Sprintf("trial%03d", index))
	ckDir := filepath.Join(dir, "ck")
	if err := os.MkdirAll(ckDir, 0o755); err != nil {
		return t, err
	}
	defer os.RemoveAll(dir)
	if kind == DiskFull {
		if err := run("mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", ckDir); err != nil {
			return t, err
		}
		defer run("umount", "-l", ckDir)
	}
	ckpt := filepath.Join(ckDir, "run.ckpt")
	train := append(slices.Clone(trainArgs), Strategies[strategy]...)
	if checkpoints(strategy) {
		every := "4"
		if kind == KillCheckpoint {
			every = "1"
		}
		train = append(train, "--checkpoint", ckpt, "--checkpoint-every", every)
	}

	j, err := startJob(s.argvs(l, train), s.env(l.transport))
	if err != nil {
		return t, err
	}
	deadline := j.start.Add(s.bound(ref, 0))
	ranks := j.findRanks(l.ranks, 10*time.Second)
	// The newest complete checkpoint, polled while the job runs.
	watch := newCheckpointWatch(ckpt)
	defer watch.stop()

	var faultAt time.Time
	var heal func()
	var extra time.Duration
	if !j.waitStep(t.Step, deadline) {
		t.Skipped = "the job ended before the step"
	} else {
		faultAt, heal, extra, err = s.inject(&t, j, ranks, ckDir)
		if err != nil {
			j.kill()
			return t, err
		}
	}
	ended := j.wait(deadline.Add(extra))
	if !ended {
		t.Hang = true
		t.Violations = append(t.Violations, fmt.Sprintf("the job had not ended %v after it started", s.bound(ref, extra).Round(time.Second)))
		j.kill()
		j.wait(time.Now().Add(10 * time.Second))
	}
	if heal != nil {
		heal()
	}
	watch.stop()
	// Every rank must be gone once its flock run is.
	time.Sleep(200 * time.Millisecond)
	for r, pid := range ranks {
		if alive(pid) {
			t.Hang = true
			t.Violations = append(t.Violations, fmt.Sprintf("rank %d (pid %d) outlived its flock run", r, pid))
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	recs, log := j.snapshot()
	codes := j.exitCodes()
	switch {
	case t.Hang:
		t.Outcome = "hung"
	case j.finished():
		t.Outcome = "finished"
	case kind == Term:
		t.Outcome = "stopped"
	default:
		t.Outcome = "failed"
	}
	if t.Skipped != "" {
		// No fault: the run must simply equal the uninterrupted one.
		if t.Outcome != "finished" {
			t.Violations = append(t.Violations, fmt.Sprintf("a job without a fault %s: %s", t.Outcome, tail(log, 5)))
		}
		return t, nil
	}

	// The failure names the fault.
	if t.Outcome != "finished" {
		if line, at, ok := naming(kind, t.Victim, log, faultAt); ok {
			t.Message, t.Detect = line, at.Sub(faultAt)
		} else {
			t.Violations = append(t.Violations, fmt.Sprintf("no log line names the fault (exit %v): %s", codes, tail(log, 6)))
		}
	}
	if kind == Term && t.Outcome == "finished" {
		t.Violations = append(t.Violations, "SIGTERM did not stop the job")
	}

	// The checkpoint: the newest complete one before the fault, or a newer one.
	t.Before = watch.newest()
	if checkpoints(strategy) {
		after, err := checkpointStep(ckpt)
		switch {
		case err != nil && !errors.Is(err, os.ErrNotExist):
			t.Violations = append(t.Violations, "checkpoint unreadable after the fault: "+err.Error())
		case err == nil:
			t.After = after
		}
		if t.Before >= 0 && t.After < t.Before {
			t.Lost = t.Before - max(t.After, 0)
			t.Violations = append(t.Violations, fmt.Sprintf("the checkpoint of step %d was lost (now: %d)", t.Before, t.After))
		}
	}

	// Recovery: the job's own results, or a resumed (restarted) job's.
	if t.Outcome == "finished" {
		t.Recovered = true
		t.Recover = recs[len(recs)-1].at.Sub(faultAt)
		if deterministic(strategy) {
			if d := compare(ref.records, recs, 0); d != "" {
				t.Recovered = false
				t.Violations = append(t.Violations, "the job finished with other results than an uninterrupted run: "+d)
			}
		}
		return t, nil
	}
	if kind == DiskFull {
		os.Remove(filepath.Join(ckDir, "filler"))
	}
	resume := slices.Clone(train)
	from := 0
	if t.After >= 0 {
		resume = append(resume, "--resume", ckpt)
		from = t.After
		t.Resumed = t.After
	}
	rj, err := startJob(s.argvs(l, resume), s.env(l.transport))
	if err != nil {
		return t, err
	}
	if !rj.wait(time.Now().Add(s.bound(ref, 0))) {
		rj.kill()
		t.Hang = true
		t.Violations = append(t.Violations, "the resumed job hung")
		return t, nil
	}
	rrecs, rlog := rj.snapshot()
	if !rj.finished() {
		t.Violations = append(t.Violations, "the resumed job failed: "+tail(rlog, 5))
		return t, nil
	}
	t.Recovered = true
	for _, r := range rrecs {
		if r.Kind == "train" {
			t.Recover = r.at.Sub(faultAt)
			break
		}
	}
	if deterministic(strategy) {
		if d := compare(ref.records, rrecs, from); d != "" {
			t.Recovered = false
			t.Violations = append(t.Violations, fmt.Sprintf("resumed from step %d, the job's results differ from an uninterrupted run's: %s", from, d))
		}
	}
	return t, nil
}

// inject injects the trial's fault into a running job. It returns when the
// fault came, what undoes it (nil: nothing) and how much longer than an
// uninterrupted run the job may take because of it.
func (s *suite) inject(t *Trial, j *job, ranks map[int]int, ckDir string) (time.Time, func(), time.Duration, error) {
	pick := func() int {
		t.Victim = s.rng.IntN(t.Ranks)
		return ranks[t.Victim]
	}
	sig := func(pid int, sg syscall.Signal) {
		if pid > 0 {
			syscall.Kill(pid, sg)
		}
	}
	switch t.Kind {
	case KillStep:
		pid := pick()
		sig(pid, syscall.SIGKILL)
		return time.Now(), nil, 0, nil
	case KillSync:
		t.Victim = 0
		for r, pid := range ranks {
			if r != 0 {
				sig(pid, syscall.SIGSTOP)
			}
		}
		// Rank 0 reports a step every few milliseconds; silent for 400 ms
		// with its peers frozen, it waits for them in a collective.
		for time.Since(j.lastRecord()) < 400*time.Millisecond && !j.ended() {
			time.Sleep(20 * time.Millisecond)
		}
		sig(ranks[0], syscall.SIGKILL)
		at := time.Now()
		t.Step = j.step()
		for r, pid := range ranks {
			if r != 0 {
				sig(pid, syscall.SIGCONT)
			}
		}
		return at, nil, 0, nil
	case KillCheckpoint:
		// A rank's temporary file (.run.ckpt.stepN.rankR.tmpDIGITS) or the
		// manifest's (.run.ckpt.tmpDIGITS, rank 0's).
		tmp := regexp.MustCompile(`^\.run\.ckpt(?:\.step\d+\.rank(\d+))?\.tmp\d+$`)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) && !j.ended() {
			entries, _ := os.ReadDir(ckDir)
			for _, e := range entries {
				m := tmp.FindStringSubmatch(e.Name())
				if m == nil {
					continue
				}
				r := 0
				if m[1] != "" {
					r, _ = strconv.Atoi(m[1])
				}
				sig(ranks[r], syscall.SIGSTOP)
				if _, err := os.Stat(filepath.Join(ckDir, e.Name())); err != nil {
					// The write ended before the rank froze.
					sig(ranks[r], syscall.SIGCONT)
					continue
				}
				t.Victim = r
				t.Detail = "while writing " + e.Name()
				sig(ranks[r], syscall.SIGKILL)
				t.Step = j.step()
				return time.Now(), nil, 0, nil
			}
			time.Sleep(100 * time.Microsecond)
		}
		t.Skipped = "no checkpoint write was caught"
		return time.Now(), nil, 0, nil
	case Term:
		for _, n := range j.nodes {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
		return time.Now(), nil, 0, nil
	case Stop:
		pid := pick()
		d := s.opts.Timeout + s.opts.Grace + time.Second
		t.Detail = fmt.Sprintf("frozen for %v", d)
		sig(pid, syscall.SIGSTOP)
		at := time.Now()
		go func() {
			time.Sleep(d)
			sig(pid, syscall.SIGCONT)
		}()
		return at, nil, d, nil
	case DiskFull:
		f, err := os.Create(filepath.Join(ckDir, "filler"))
		if err != nil {
			return time.Time{}, nil, 0, err
		}
		buf := make([]byte, 1<<16)
		var n int64
		for {
			w, err := f.Write(buf)
			n += int64(w)
			if err != nil {
				break
			}
		}
		f.Close()
		t.Detail = fmt.Sprintf("%.1f MiB written until the 12 MiB file system was full", float64(n)/(1<<20))
		return time.Now(), nil, 0, nil
	case Loss, Partition, Reorder, Slow, Delay:
		var err error
		var d time.Duration
		switch t.Kind {
		case Reorder:
			pct, kbit := 20+s.rng.IntN(40), 1000*(1+s.rng.IntN(8))
			d = time.Duration(1+s.rng.IntN(3)) * time.Second
			t.Detail = fmt.Sprintf("%d%% of packets through a %d Mbit/s queue for %v", pct, kbit/1000, d)
			err = s.net.shape(pct, kbit)
		case Slow:
			kbit := 1000 * (2 + s.rng.IntN(19))
			d = time.Duration(1+s.rng.IntN(3)) * time.Second
			t.Detail = fmt.Sprintf("the link capped at %d Mbit/s for %v", kbit/1000, d)
			err = s.net.shape(100, kbit)
		case Loss:
			pm := 50 + s.rng.IntN(250)
			d = time.Duration(1+s.rng.IntN(3)) * time.Second
			t.Detail = fmt.Sprintf("%.1f%% of packets dropped for %v", float64(pm)/10, d)
			err = s.net.drop(pm)
		case Partition:
			d = time.Duration(500+s.rng.IntN(int(3*s.opts.Timeout/time.Millisecond))) * time.Millisecond
			t.Detail = fmt.Sprintf("partitioned for %v", d)
			err = s.net.drop(1000)
		case Delay:
			ms := 5 + s.rng.IntN(45)
			d = time.Duration(1+s.rng.IntN(3)) * time.Second
			t.Detail = fmt.Sprintf("%d±%d ms latency, 25%% reordered, for %v", ms, ms/2, d)
			err = s.net.delay(ms, ms/2, 25)
		}
		if err != nil {
			return time.Time{}, nil, 0, err
		}
		at := time.Now()
		healed := make(chan struct{})
		go func() {
			defer close(healed)
			time.Sleep(d)
			s.net.heal()
		}()
		return at, func() { <-healed }, d + 30*time.Second, nil
	}
	return time.Time{}, nil, 0, fmt.Errorf("chaos: no injector for %s", t.Kind)
}

// naming returns the first log line after the fault that names it.
func naming(kind Kind, victim int, log []logLine, at time.Time) (string, time.Time, bool) {
	var pats []string
	switch kind {
	case KillStep, KillSync, KillCheckpoint:
		pats = []string{fmt.Sprintf("rank %d was killed by signal killed", victim)}
	case Term:
		pats = []string{"interrupted"}
	case Stop, Loss, Partition, Reorder, Slow, Delay:
		pats = []string{"silent past the timeout", "connection reset", "broken pipe", "timed out", "i/o timeout"}
	case DiskFull:
		pats = []string{"no space left on device"}
	}
	for _, l := range log {
		if l.at.Before(at) {
			continue
		}
		for _, p := range pats {
			if strings.Contains(l.text, p) {
				return l.text, l.at, true
			}
		}
	}
	return "", time.Time{}, false
}

// compare returns "" when got's records after step from equal ref's, bit
// for bit (losses, accuracies, the summary's test results, bytes and
// synchronizations), or the first difference.
func compare(ref, got []record, from int) string {
	index := map[string]record{}
	key := func(r record) string { return r.Kind + "/" + strconv.Itoa(r.Step) }
	for _, r := range ref {
		index[key(r)] = r
	}
	n := 0
	for _, g := range got {
		switch g.Kind {
		case "train", "eval":
			if g.Step <= from {
				continue
			}
			r, ok := index[key(g)]
			if !ok {
				return fmt.Sprintf("%s record of step %d not in the uninterrupted run", g.Kind, g.Step)
			}
			if r.Loss != g.Loss || r.Acc != g.Acc {
				return fmt.Sprintf("%s step %d: loss %v acc %v, uninterrupted %v %v", g.Kind, g.Step, g.Loss, g.Acc, r.Loss, r.Acc)
			}
			if g.Kind == "train" {
				n++
			}
		}
	}
	rs, gs := summary(ref), summary(got)
	if gs == nil {
		return "no summary"
	}
	if rs.Steps != gs.Steps || rs.TestLoss != gs.TestLoss || rs.TestAcc != gs.TestAcc || rs.TrainLoss != gs.TrainLoss {
		return fmt.Sprintf("summary: %d steps, train loss %v, test loss %v, acc %v; uninterrupted %d, %v, %v, %v",
			gs.Steps, gs.TrainLoss, gs.TestLoss, gs.TestAcc, rs.Steps, rs.TrainLoss, rs.TestLoss, rs.TestAcc)
	}
	if rs.Comm.BytesSent != gs.Comm.BytesSent || rs.Comm.Syncs != gs.Comm.Syncs {
		return fmt.Sprintf("summary: %d bytes sent in %d synchronizations; uninterrupted %d in %d",
			gs.Comm.BytesSent, gs.Comm.Syncs, rs.Comm.BytesSent, rs.Comm.Syncs)
	}
	if want := rs.Steps - from; n < want {
		return fmt.Sprintf("%d training records after step %d, want %d", n, from, want)
	}
	return ""
}

// checkpointStep returns the step of the checkpoint at path: a set's
// manifest (JSON) or a single safetensors file (its metadata).
func checkpointStep(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	var head [8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	if head[0] == '{' {
		data, err := os.ReadFile(path)
		if err != nil {
			return -1, err
		}
		var m struct {
			Step  int      `json:"step"`
			Files []string `json:"files"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return -1, fmt.Errorf("%s: %w", path, err)
		}
		for _, name := range m.Files {
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), name)); err != nil {
				return -1, fmt.Errorf("manifest of step %d names a missing file: %w", m.Step, err)
			}
		}
		return m.Step, nil
	}
	n := binary.LittleEndian.Uint64(head[:])
	if n > 1<<24 {
		return -1, fmt.Errorf("%s: header of %d bytes", path, n)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	var h struct {
		Meta map[string]string `json:"__metadata__"`
	}
	if err := json.Unmarshal(hdr, &h); err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	return strconv.Atoi(h.Meta["step"])
}

// checkpointWatch polls a checkpoint path for the newest complete
// checkpoint's step.
type checkpointWatch struct {
	done, stopped chan struct{}
	step          int
}

func newCheckpointWatch(path string) *checkpointWatch {
	w := &checkpointWatch{done: make(chan struct{}), stopped: make(chan struct{}), step: -1}
	go func() {
		defer close(w.stopped)
		for {
			if s, err := checkpointStep(path); err == nil && s > w.step {
				w.step = s
			}
			select {
			case <-w.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the polling; it may be called more than once.
func (w *checkpointWatch) stop() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	<-w.stopped
}

// newest returns the newest complete checkpoint's step (-1: none); call
// after stop.
func (w *checkpointWatch) newest() int { return w.step }

// probeMount reports whether this process can mount a tmpfs.
func (s *suite) probeMount() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting a small file system needs root")
	}
	d, err := os.MkdirTemp(s.dir, "mount-probe")
	if err != nil {
		return err
	}
	defer os.Remove(d)
	if err := run("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d); err != nil {
		return err
	}
	return run("umount", d)
}
