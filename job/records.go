package job

import (
	"encoding/json"
	"io"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/flockml/flock/train"
)

// WriteJSONLine writes v to w as one line of JSON, as encoding/json would,
// except that NaN and ±Inf, which JSON cannot hold and encoding/json
// refuses, are written as null: a diverged run's records keep their other
// fields. It writes the records of flock train --json: a RunRecord, the
// train.Records, a SummaryRecord.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := appendJSON(nil, reflect.ValueOf(v))
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// appendJSON appends the JSON of v: structs field by field following their
// json tags (name, omitempty, "-"), floats with non-finite values as null,
// and everything else by encoding/json.
func appendJSON(b []byte, v reflect.Value) ([]byte, error) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return append(b, "null"...), nil
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return append(b, "null"...), nil
		}
		return appendJSON(b, v.Elem())
	case reflect.Struct:
		if v.Type().Implements(marshalerType) {
			break
		}
		b = append(b, '{')
		first := true
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || strings.Contains(opts, "omitempty") && v.Field(i).IsZero() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			key, err := json.Marshal(name)
			if err != nil {
				return nil, err
			}
			b = append(append(b, key...), ':')
			if b, err = appendJSON(b, v.Field(i)); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	out, err := json.Marshal(v.Interface())
	return append(b, out...), err
}

// RunRecord is the first record of a run's JSON Lines (flock train
// --json): what ran, so that a log stands on its own.
type RunRecord struct {
	Kind string `json:"kind"`
	// Version and Commit identify the flock that ran (the module's version
	// and the VCS revision it was built from, "+dirty" when modified).
	Version string `json:"flock_version"`
	Commit  string `json:"commit,omitempty"`
	Go      string `json:"go"`
	// Config is the whole configuration, Seed its seed.
	Config train.Config `json:"config"`
	Seed   uint64       `json:"seed"`
	// World is the number of workers, Device where they train, Threads
	// GOMAXPROCS.
	World   int    `json:"world"`
	Device  string `json:"device"`
	Threads int    `json:"threads"`
	// Strategy describes how the workers cooperate, Pattern how its
	// synchronizations travel.
	Strategy string            `json:"strategy,omitempty"`
	Pattern  train.CommPattern `json:"comm_pattern"`
	// Data names the data set (a file, or Fashion-MNIST and whether its
	// embedded subset); TrainImages and TestImages count what the run
	// trains on and evaluates on, ValImages the images held out of the
	// training set that it evaluates on instead of a test set.
	Data        string `json:"data,omitempty"`
	TrainImages int    `json:"train_images,omitempty"`
	TestImages  int    `json:"test_images,omitempty"`
	ValImages   int    `json:"val_images,omitempty"`
}

// NewRunRecord returns the record of a run of cfg by world workers on
// device ("cpu", "cuda", …), cooperating as strategy says, on data: the
// images it trains on and evaluates on, those held out for validation
// counted as such. Version and Commit are those of the running program's
// build.
func NewRunRecord(cfg train.Config, world int, device, strategy string, data Data) RunRecord {
	r := RunRecord{Kind: "run", Version: "(unknown)", Go: runtime.Version(), Config: cfg, Seed: cfg.Seed,
		World: world, Device: device, Threads: runtime.GOMAXPROCS(0), Strategy: strategy, Pattern: train.PatternOf(cfg.Strategy)}
	if bi, ok := debug.ReadBuildInfo(); ok {
		r.Version = bi.Main.Version
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				r.Commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && r.Commit != "" {
			r.Commit += "+dirty"
		}
	}
	r.Data = data.Name()
	r.TrainImages, r.TestImages = data.Counts()
	r.TrainImages = cfg.TrainImagesOf(r.TrainImages)
	if cfg.ValImages > 0 {
		r.TestImages, r.ValImages = 0, cfg.ValImages
	}
	return r
}

// SummaryRecord is the last record of a run's JSON Lines: its
// train.Summary, with the test loss and accuracy left out when the run
// did not evaluate.
type SummaryRecord struct {
	Kind         string           `json:"kind"`
	Epochs       int              `json:"epochs"`
	Steps        int              `json:"steps"`
	Wall         float64          `json:"wall_s"`
	ImagesPerSec float64          `json:"img_per_s"`
	TrainLoss    float64          `json:"train_loss"`
	TrainAcc     float64          `json:"train_acc"`
	DataWait     float64          `json:"data_wait_s"`
	TestLoss     *float64         `json:"test_loss,omitempty"`
	TestAcc      *float64         `json:"test_acc,omitempty"`
	Comm         *train.CommStats `json:"comm,omitempty"`
	// Saving is data parallel's bytes over those sent (CommStats.Saving).
	Saving float64 `json:"comm_saving,omitempty"`
}

// NewSummaryRecord returns the record of s.
func NewSummaryRecord(s train.Summary) SummaryRecord {
	v := SummaryRecord{Kind: "summary", Epochs: s.Epochs, Steps: s.Steps, Wall: s.Wall.Seconds(), ImagesPerSec: s.ImagesPerSec,
		TrainLoss: s.TrainLoss, TrainAcc: s.TrainAcc, DataWait: s.DataWait.Seconds(), Comm: s.Comm}
	if s.Comm != nil {
		v.Saving = s.Comm.Saving()
	}
	if s.Evaluated {
		v.TestLoss, v.TestAcc = &s.TestLoss, &s.TestAcc
	}
	return v
}
