package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flockml/flock/internal/atomicfile"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

// Checkpoint file layout. One safetensors file holds
//
//	model.<name>     the model's state dict (parameters and buffers)
//	optim.<key>      the optimizer's state tensors (momentum buffers, moments)
//	strategy.<key>   a Stateful strategy's tensors
//
// and string metadata: the format and version, the run's Config as JSON,
// the step and data position (epoch, batch), the number of workers, the
// run's random generator (seed, offset), the optimizer's and strategy's
// scalars under "optim." and "strategy.", the metric accumulators (so that
// the records after a resume equal those of an uninterrupted run), the
// elapsed wall time, the names of the tensors ("tensors", a JSON list) and
// a checksum of the tensors ("checksum", see checksum), checked on load so
// that a damaged file is refused instead of trained from.
//
// Version 2 added the tensor list, the checksum and the number of workers.
const (
	checkpointFormat  = "flock-train-checkpoint"
	checkpointVersion = "2"
)

// checksum returns the CRC-32C (Castagnoli) of the tensors taken in name
// order, each as its name, type, shape and bytes: every byte of a
// checkpoint's data region and the header entries that describe it.
func checksum(ts map[string]safetensors.Tensor) string {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, name := range slices.Sorted(maps.Keys(ts)) {
		t := ts[name]
		fmt.Fprintf(h, "%s\x00%s%v\x00", name, t.DType, t.Shape)
		h.Write(t.Data)
	}
	return fmt.Sprintf("crc32c:%08x", h.Sum32())
}

// SaveCheckpoint writes everything needed to resume the run exactly to path,
// atomically: a crash or error leaves the previous file at path intact.
//
// With Options.CheckpointComm every rank calls it at the same step and the
// checkpoint is a set: rank r writes its own file, path.step<N>.rank<r>;
// once every rank has written, rank 0 writes at path a manifest (JSON)
// naming the files, atomically, and then each rank removes the file of
// the set before. The manifest is the set's commit point: until it is
// renamed into place, path names the previous complete set.
//
// Temporary files that earlier writes to path left behind, killed before
// they could remove them, are removed (for a set, with any files of this
// rank that no manifest names once the new set is in place).
func (t *Trainer) SaveCheckpoint(path string) error {
	if t.opts.CheckpointComm != nil {
		return t.saveCheckpointSet(path)
	}
	// Best effort: a temporary file that cannot be removed does not stop
	// the checkpoint.
	atomicfile.RemoveTemps(path)
	return t.writeCheckpoint(path)
}

// checkCheckpointPath reports a checkpoint path whose directory is missing
// or not writable, before a run spends an epoch to find out.
func checkCheckpointPath(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("train: checkpoint %s: is a directory", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: directory %s: %w", path, dir, err)
	}
	probe, err := os.CreateTemp(dir, "."+filepath.Base(path)+".probe*")
	if err != nil {
		return fmt.Errorf("train: checkpoint %s: directory %s is not writable: %w", path, dir, err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// writeCheckpoint writes this worker's checkpoint file.
func (t *Trainer) writeCheckpoint(path string) error {
	raw := map[string]safetensors.Tensor{}
	add := func(prefix string, ts map[string]*tensor.Tensor) {
		for k, v := range ts {
			raw[prefix+k] = safetensors.FromTensor(v)
			v.Release()
		}
	}
	meta := map[string]string{}
	addMeta := func(prefix string, m map[string]string) {
		for k, v := range m {
			meta[prefix+k] = v
		}
	}
	add("model.", nn.StateDict(t.model))
	ots, oscalars := t.opt.State()
	add("optim.", ots)
	addMeta("optim.", oscalars)
	if s, ok := t.strategy.(Stateful); ok {
		sts, sscalars := s.State()
		add("strategy.", sts)
		addMeta("strategy.", sscalars)
	}

	cfg, err := json.Marshal(t.cfg)
	if err != nil {
		return fmt.Errorf("train: save checkpoint %s: %w", path, err)
	}
	names, err := json.Marshal(slices.Sorted(maps.Keys(raw)))
	if err != nil {
		return fmt.Errorf("train: save checkpoint %s: %w", path, err)
	}
	pos := t.Position()
	seed, offset := t.gen.State()
	addMeta("", map[string]string{
		"format":          checkpointFormat,
		"version":         checkpointVersion,
		"config":          string(cfg),
		"step":            strconv.Itoa(t.step),
		"epoch":           strconv.Itoa(pos.Epoch),
		"batch":           strconv.Itoa(pos.Batch),
		"steps_per_epoch": strconv.Itoa(t.StepsPerEpoch()),
		"world":           strconv.Itoa(max(t.opts.World, 1)),
		"rng.seed":        strconv.FormatUint(seed, 10),
		"rng.offset":      strconv.FormatUint(offset, 10),
		"elapsed_ns":      strconv.FormatInt(int64(t.Elapsed()), 10),
		"evaluated":       strconv.FormatBool(t.evaluated),
		"test.loss":       strconv.FormatFloat(t.testLoss, 'g', -1, 64),
		"test.acc":        strconv.FormatFloat(t.testAcc, 'g', -1, 64),
		"tensors":         string(names),
		"checksum":        checksum(raw),
	})
	t.interval.encode(meta, "metrics.interval")
	t.epoch.encode(meta, "metrics.epoch")
	t.prevEpoch.encode(meta, "metrics.prev_epoch")
	t.total.encode(meta, "metrics.total")
	if err := safetensors.WriteFile(path, raw, meta); err != nil {
		return fmt.Errorf("train: save checkpoint: %w", err)
	}
	return nil
}

// ReadCheckpointConfig returns the Config stored in the checkpoint at path.
func ReadCheckpointConfig(path string) (Config, error) {
	if m, err := readManifest(path); err == nil {
		path = m.file(path, 0)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("train: read checkpoint: %w", err)
	}
	return checkpointConfig(path, f.Metadata)
}

func checkpointConfig(path string, meta map[string]string) (Config, error) {
	if meta["format"] != checkpointFormat {
		return Config{}, fmt.Errorf("train: %s is not a flock training checkpoint (metadata format %q, want %q)", path, meta["format"], checkpointFormat)
	}
	if meta["version"] != checkpointVersion {
		return Config{}, fmt.Errorf("train: checkpoint %s has version %q; this flock reads version %s", path, meta["version"], checkpointVersion)
	}
	var cfg Config
	dec := json.NewDecoder(strings.NewReader(meta["config"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("train: checkpoint %s: config: %w", path, err)
	}
	// The model is the Trainer's to check (a model of the caller's, built
	// outside nn/models, has a name the registry does not know).
	if err := cfg.validateRun(); err != nil {
		return Config{}, fmt.Errorf("train: checkpoint %s: stored %s", path, strings.TrimPrefix(err.Error(), "train: "))
	}
	return cfg, nil
}

// LoadCheckpoint restores a checkpoint written by SaveCheckpoint, so that
// the next Run continues exactly where the saved run stood. The Trainer
// must have been built for the same model and data: a checkpoint of
// another model (other parameter names or shapes) or one written with a
// different number of steps per epoch is refused with an error that says
// so, before anything is changed. The remaining settings may differ (more
// epochs, for instance), but then the run is no longer the one saved.
func (t *Trainer) LoadCheckpoint(path string) error {
	path, err := t.checkpointFile(path)
	if err != nil {
		return err
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("train: load checkpoint: %w", err)
	}
	meta := f.Metadata
	saved, err := checkpointConfig(path, meta)
	if err != nil {
		return err
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("train: load checkpoint %s: "+format, append([]any{path}, a...)...)
	}
	var listed []string
	if err := json.Unmarshal([]byte(meta["tensors"]), &listed); err != nil {
		return fail("metadata tensors: %v", err)
	}
	for _, name := range listed {
		if _, ok := f.Tensors[name]; !ok {
			return fail("tensor %q, which its metadata lists, is missing (an optimizer buffer left out would restart from zero)", name)
		}
	}
	if sum := checksum(f.Tensors); meta["checksum"] != sum {
		return fail("checksum %s, but its tensors give %s: the file is damaged", meta["checksum"], sum)
	}

	ints := map[string]int{}
	for _, k := range []string{"step", "epoch", "batch", "steps_per_epoch"} {
		v, err := strconv.Atoi(meta[k])
		if err != nil || v < 0 {
			return fail("metadata %s %q: want an integer ≥ 0", k, meta[k])
		}
		ints[k] = v
	}
	step, spe := ints["step"], t.StepsPerEpoch()
	if w, ok := meta["world"]; ok {
		world, err := strconv.Atoi(w)
		if err != nil || world < 1 {
			return fail("metadata world %q: want an integer ≥ 1", w)
		}
		if world != max(t.opts.World, 1) {
			return fail("it was written by a run of %d workers, this run has %d (resume with %d workers: each worker's share of the data sets the steps per epoch)",
				world, max(t.opts.World, 1), world)
		}
	}
	if saved.BatchSize != t.cfg.BatchSize || ints["steps_per_epoch"] != spe {
		return fail("it was written with batch size %d and %d steps per epoch, this run has batch size %d and %d steps per epoch (another batch size or data set)",
			saved.BatchSize, ints["steps_per_epoch"], t.cfg.BatchSize, spe)
	}
	if step/spe != ints["epoch"] || step%spe != ints["batch"] {
		return fail("step %d is inconsistent with its data position (epoch %d, batch %d)", step, ints["epoch"], ints["batch"])
	}
	if step > t.TotalSteps() {
		return fail("it is at step %d, past the %d steps of this run", step, t.TotalSteps())
	}
	seed, err1 := strconv.ParseUint(meta["rng.seed"], 10, 64)
	offset, err2 := strconv.ParseUint(meta["rng.offset"], 10, 64)
	elapsed, err3 := strconv.ParseInt(meta["elapsed_ns"], 10, 64)
	evaluated, err4 := strconv.ParseBool(meta["evaluated"])
	testLoss, err5 := strconv.ParseFloat(meta["test.loss"], 64)
	testAcc, err6 := strconv.ParseFloat(meta["test.acc"], 64)
	for i, e := range []error{err1, err2, err3, err4, err5, err6} {
		if e != nil {
			key := []string{"rng.seed", "rng.offset", "elapsed_ns", "evaluated", "test.loss", "test.acc"}[i]
			return fail("metadata %s %q: %v", key, meta[key], e)
		}
	}
	var meters [4]meter
	for i, name := range []string{"interval", "epoch", "prev_epoch", "total"} {
		if err := meters[i].decode(meta, "metrics."+name); err != nil {
			return fail("%v", err)
		}
	}

	groups := map[string]map[string]*tensor.Tensor{"model": {}, "optim": {}, "strategy": {}}
	defer func() {
		for _, g := range groups {
			nn.ReleaseAll(g)
		}
	}()
	for _, name := range f.Names() {
		prefix, key, _ := strings.Cut(name, ".")
		g, ok := groups[prefix]
		if !ok || key == "" {
			return fail("unexpected tensor %q (want model.*, optim.* or strategy.*)", name)
		}
		v, err := f.Tensors[name].ToTensor()
		if err != nil {
			return fail("tensor %q: %w", name, err)
		}
		g[key] = v
	}
	_, stateful := t.strategy.(Stateful)
	if !stateful && len(groups["strategy"]) > 0 {
		return fail("it holds strategy state, but this run's strategy %T keeps none", t.strategy)
	}
	if err := nn.LoadStateDict(t.model, groups["model"], true); err != nil {
		if saved.Model != t.cfg.Model {
			return fail("it holds a %q model, this run trains %q: %w", saved.Model, t.cfg.Model, err)
		}
		return fail("its %q model does not match this run's (another input size or number of classes?): %w", saved.Model, err)
	}
	if err := t.opt.LoadState(groups["optim"], scalars(meta, "optim.")); err != nil {
		return fail("%w", err)
	}
	if s, ok := t.strategy.(Stateful); ok {
		if err := s.LoadState(groups["strategy"], scalars(meta, "strategy.")); err != nil {
			return fail("strategy: %w", err)
		}
	}

	t.gen.SetState(seed, offset)
	t.step = step
	t.elapsed = time.Duration(elapsed)
	t.evaluated, t.testLoss, t.testAcc = evaluated, testLoss, testAcc
	t.interval, t.epoch, t.prevEpoch, t.total = meters[0], meters[1], meters[2], meters[3]
	t.setContext()
	return nil
}

// scalars returns the entries of meta under prefix, with prefix removed.
func scalars(meta map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range meta {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}
