package main

import (
	"encoding/json"
	"io"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/flockml/flock/train"
)

// writeJSONLine writes v to w as one line of JSON, as encoding/json would,
// except that NaN and ±Inf, which JSON cannot hold and encoding/json
// refuses, are written as null: a diverged run's records keep their other
// fields.
func writeJSONLine(w io.Writer, v any) error {
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

// outputWriter remembers the first error writing to w and then calls
// failed once, so that a command whose output cannot be written (a full
// disk, a closed pipe) stops and fails instead of going on blind.
type outputWriter struct {
	w      io.Writer
	failed func()
	mu     sync.Mutex
	err    error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if err != nil {
		o.mu.Lock()
		first := o.err == nil
		if first {
			o.err = err
		}
		o.mu.Unlock()
		if first && o.failed != nil {
			o.failed()
		}
	}
	return n, err
}

// Err returns the first write error.
func (o *outputWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// runRecordJSON is the first record of flock train --json: what ran, so
// that a log stands on its own.
type runRecordJSON struct {
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

func newRunRecord(cfg train.Config, world int, device, strategy string) runRecordJSON {
	r := runRecordJSON{Kind: "run", Version: "(unknown)", Go: runtime.Version(), Config: cfg, Seed: cfg.Seed,
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
	return r
}
