package experiment

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/job"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/nn/models"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// Run is one run of a grid.
type Run struct {
	// ID is unique in the grid: the strategy and the seed.
	ID, Strategy, Label string
	Seed                uint64
	// Args are the run's flock train flags: what the grid's Setup turns
	// into the run's configuration, and what tells a run recorded with
	// other settings.
	Args []string
}

// CountDone returns how many of runs done holds.
func CountDone(runs []Run, done map[string]Record) int {
	n := 0
	for _, r := range runs {
		if _, ok := done[r.ID]; ok {
			n++
		}
	}
	return n
}

// Record is what a run measured: one line of a grid's runs file.
type Record struct {
	Record   string   `json:"record"`
	ID       string   `json:"id"`
	Strategy string   `json:"strategy"`
	Label    string   `json:"label"`
	Seed     uint64   `json:"seed"`
	Args     []string `json:"args"`
	Model    string   `json:"model"`
	Workers  int      `json:"workers"`
	// Jobs is how many runs went at once, and Cores this process's
	// GOMAXPROCS: the share of the machine the workers had.
	Jobs  int `json:"jobs"`
	Cores int `json:"cores"`
	// Params is the model's number of parameters (float32).
	Params int     `json:"params"`
	Epochs int     `json:"epochs"`
	Steps  int     `json:"steps"`
	Wall   float64 `json:"wall_s"`
	// EvalTime is the part of Wall spent evaluating on the test set.
	EvalTime float64 `json:"eval_s"`
	// TestAcc is the final test accuracy; Curve the test accuracy after
	// each evaluated epoch. For a run with ValImages both measure the
	// validation set, the last ValImages images of the training set,
	// which the run held out.
	TestAcc   float64    `json:"test_acc"`
	Curve     []EpochAcc `json:"curve"`
	ValImages int        `json:"val_images,omitempty"`
	// Diverged marks a run of a grid with KeepDiverged that stopped
	// because its training loss diverged: it has no accuracy (0) and
	// no summary.
	Diverged bool `json:"diverged,omitempty"`
	// H is the length of each round of a local-update strategy, by the
	// step that closed it.
	H    []RoundH        `json:"h,omitempty"`
	Comm train.CommStats `json:"comm"`
	// Kind is flock train's --strategy; Pattern and Topology how its
	// synchronizations travel (train.CommPattern).
	Kind     string `json:"kind"`
	Pattern  string `json:"pattern,omitempty"`
	Topology string `json:"topology,omitempty"`
	// NodeSize is the workers of a node of a two-level run (0: one level).
	NodeSize int `json:"node_size,omitempty"`
}

// EpochAcc is the test accuracy after an epoch.
type EpochAcc struct {
	Epoch int     `json:"epoch"`
	Acc   float64 `json:"acc"`
}

// RoundH is the length H of the round that the synchronization at Step
// closed.
type RoundH struct {
	Step int `json:"step"`
	H    int `json:"h"`
}

// ReadRecords reads the records of the runs file at path by ID; a missing
// file holds none. A last line without its newline, cut short by a crash,
// is left out (and dropped from the file when a grid appends to it).
// pattern gives the communication pattern of a record written before
// records held it, from its flags.
func ReadRecords(path string, pattern func(args []string) (train.CommPattern, error)) (map[string]Record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	done := map[string]Record{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Record != "run" || r.ID == "" {
			return nil, fmt.Errorf("%s:%d: not a run record (%v)", path, line, err)
		}
		if r.Pattern == "" {
			pat, err := pattern(r.Args)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: flags %q: %w", path, line, r.Args, err)
			}
			r.Pattern, r.Topology, r.NodeSize = pat.Kind, pat.Graph, pat.NodeSize
		}
		done[r.ID] = r
	}
	return done, sc.Err()
}

// openRecords opens the runs file for appending, first dropping a last line
// that a crash left without its newline, so that the next record starts
// on a line of its own.
func openRecords(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err == nil {
		if n := int64(bytes.LastIndexByte(data, '\n') + 1); n < int64(len(data)) {
			err = f.Truncate(n)
		}
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return f, nil
}

// Setup is what a run trains: its configuration, its number of
// in-process workers, and job.Spec's MaxNonFiniteSteps.
type Setup struct {
	Config            train.Config
	Workers           int
	MaxNonFiniteSteps int
}

// Grid trains the runs not yet done, Jobs at a time, each on in-process
// workers through job.Run, appending each record to Path as it finishes.
type Grid struct {
	Runs []Run
	// Done holds the runs already recorded (ReadRecords); Run adds those
	// it finishes.
	Done map[string]Record
	Path string
	Jobs int
	// Setup turns a run into what it trains.
	Setup func(Run) (Setup, error)
	// Build and StepsPerEpoch give job.Spec's: the worker's Trainer and
	// the steps of an epoch for workers workers. Every run evaluates on
	// a test set of TestImages images.
	Build         func(cfg train.Config, withTest bool, opts train.Options) (*train.Trainer, func(), error)
	StepsPerEpoch func(cfg train.Config, workers int) int
	TestImages    int
	// Progress shows how far the grid is (nothing when nil).
	Progress *Progress
	// KeepDiverged records a run whose training loss diverged
	// (train.ErrDiverged) as a result, with Record.Diverged, instead of
	// failing it: a learning rate too large is what tuning looks for.
	KeepDiverged bool

	mu sync.Mutex
}

// Run trains the runs not done. A run that fails is reported and left
// out of the runs file, so that the next start tries it again; the others
// go on. A failing write of the runs file, or ctx ending, stops the grid.
func (g *Grid) Run(ctx context.Context) error {
	if g.Progress == nil {
		g.Progress = NewProgress(io.Discard, false)
	}
	var todo []Run
	for _, r := range g.Runs {
		if _, ok := g.Done[r.ID]; !ok {
			todo = append(todo, r)
		}
	}
	g.Progress.start(len(g.Runs), len(g.Runs)-len(todo), g.Jobs)
	if len(todo) == 0 {
		return nil
	}
	f, err := openRecords(g.Path)
	if err != nil {
		return err
	}
	defer f.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan Run)
	var (
		wg       sync.WaitGroup
		failed   []string
		writeErr error
	)
	for range min(g.Jobs, len(todo)) {
		wg.Go(func() {
			for r := range queue {
				g.Progress.begin(r)
				rec, err := g.train(ctx, r)
				if err != nil {
					g.Progress.end(r, nil)
					if ctx.Err() != nil {
						continue
					}
					slog.Error("experiment: run failed", "run", r.ID, "err", err)
					g.mu.Lock()
					failed = append(failed, r.ID)
					g.mu.Unlock()
					continue
				}
				line, err := json.Marshal(rec)
				g.mu.Lock()
				if err == nil {
					_, err = f.Write(append(line, '\n'))
				}
				if err == nil {
					err = f.Sync()
				}
				if err == nil {
					g.Done[r.ID] = rec
				} else if writeErr == nil {
					writeErr = fmt.Errorf("write %s: %w", g.Path, err)
					cancel()
				}
				g.mu.Unlock()
				g.Progress.end(r, &rec)
			}
		})
	}
	for _, r := range todo {
		select {
		case queue <- r:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(queue)
	wg.Wait()
	g.Progress.finish()
	switch {
	case writeErr != nil:
		return writeErr
	case ctx.Err() != nil:
		return ctx.Err()
	case len(failed) > 0:
		slices.Sort(failed)
		return fmt.Errorf("%d of %d runs failed (%s); the others are in %s, and the same command tries the failed ones again", len(failed), len(todo), strings.Join(failed, ", "), g.Path)
	}
	return nil
}

// train runs r as flock train does (job.Run on in-process workers) and
// keeps what the report needs: the test accuracy and time of each
// evaluation, the rounds' H, and the summary.
func (g *Grid) train(ctx context.Context, r Run) (Record, error) {
	set, err := g.Setup(r)
	if err != nil {
		return Record{}, err
	}
	cfg := set.Config
	if err := cfg.Validate(); err != nil {
		return Record{}, err
	}
	params, err := modelParams(cfg.Model)
	if err != nil {
		return Record{}, err
	}
	rec := Record{Record: "run", ID: r.ID, Strategy: r.Strategy, Label: r.Label, Seed: r.Seed, Args: r.Args,
		Model: cfg.Model, Workers: set.Workers, Jobs: g.Jobs, Cores: runtime.GOMAXPROCS(0), Params: params, Kind: cfg.Strategy.Name,
		ValImages: cfg.ValImages}
	evalImages := g.TestImages
	if cfg.ValImages > 0 {
		evalImages = cfg.ValImages
	}
	pat := train.PatternOf(cfg.Strategy)
	rec.Pattern, rec.Topology, rec.NodeSize = pat.Kind, pat.Graph, pat.NodeSize
	spec := job.Spec{
		Config: cfg, Comms: dist.NewLocal(set.Workers), Build: g.Build, StepsPerEpoch: g.StepsPerEpoch(cfg, set.Workers), Test: true,
		MaxNonFiniteSteps: set.MaxNonFiniteSteps,
		OnRecord: func(v train.Record) {
			switch v.Kind {
			case train.KindEval:
				rec.Curve = append(rec.Curve, EpochAcc{v.Epoch, v.Acc})
				if v.ImagesPerSec > 0 {
					rec.EvalTime += float64(evalImages) / v.ImagesPerSec
				}
			case train.KindSync:
				if v.H > 0 {
					rec.H = append(rec.H, RoundH{v.Step, v.H})
				}
			}
		},
	}
	res, err := job.Run(ctx, spec)
	switch {
	case ctx.Err() != nil:
		return Record{}, ctx.Err()
	case err != nil && g.KeepDiverged && errors.Is(err, train.ErrDiverged):
		rec.Diverged, rec.Curve, rec.H = true, nil, nil
		rec.Epochs, rec.Steps = cfg.Epochs, res.Step
		return rec, nil
	case err != nil:
		return Record{}, fmt.Errorf("flock train %s: %w", strings.Join(r.Args, " "), err)
	case res.Interrupted:
		return Record{}, fmt.Errorf("flock train %s: interrupted after step %d of %d", strings.Join(r.Args, " "), res.Step, res.TotalSteps)
	}
	s := res.Summary
	if !s.Evaluated || s.Comm == nil {
		return Record{}, fmt.Errorf("flock train %s: no test accuracy or no communication in the summary", strings.Join(r.Args, " "))
	}
	rec.Epochs, rec.Steps, rec.Wall, rec.TestAcc, rec.Comm = s.Epochs, s.Steps, s.Wall.Seconds(), s.TestAcc, *s.Comm
	return rec, nil
}

// modelParams is the number of parameters of the model name on
// Fashion-MNIST.
func modelParams(name string) (int, error) {
	m, err := models.Build(name, models.FashionMNIST, tensor.NewGenerator(1))
	if err != nil {
		return 0, err
	}
	return nn.NumParameters(m), nil
}
