// Command trainstep measures flock's training-step throughput: for each
// model it builds the network, runs warm-up steps and then times a number
// of steps on one fixed batch (see package bench), and prints images per
// second — one line per measurement, as JSON Lines with -json.
//
//	trainstep -model mlp,cnn -batch 128 -warmup 10 -steps 100 -repeat 3 -json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/flockml/flock/bench"
)

// record is one measurement with the settings that produced it; the fields
// shared with bench/peers/torch_train.py have the same names.
type record struct {
	Impl    string `json:"impl"`
	Version string `json:"version"`
	bench.TrainStepResult
	GOARCH string `json:"goarch"`
	Time   string `json:"time"`
}

func main() {
	models := flag.String("model", "mlp,cnn", "comma-separated models registered in nn/models")
	batch := flag.Int("batch", 128, "images per step")
	warmup := flag.Int("warmup", 10, "untimed steps before each measurement")
	steps := flag.Int("steps", 100, "timed steps per measurement")
	repeat := flag.Int("repeat", 1, "measurements per model")
	seed := flag.Uint64("seed", 1, "seed of the weights and the batch")
	asJSON := flag.Bool("json", false, "print JSON Lines")
	flag.Parse()

	enc := json.NewEncoder(os.Stdout)
	for range *repeat {
		for _, m := range strings.Split(*models, ",") {
			r, err := bench.MeasureTrainStep(bench.TrainStepConfig{
				Model: m, Batch: *batch, Warmup: *warmup, Steps: *steps, Seed: *seed,
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, "trainstep:", err)
				os.Exit(1)
			}
			if !*asJSON {
				fmt.Printf("%-4s batch %d: %9.1f img/s  %8.3f ms/step  (%d steps, %d threads, loss %.4f → %.4f)\n",
					r.Model, r.Batch, r.ImagesPerSec, r.MillisPerStep, r.Steps, r.Threads, r.LossFirst, r.LossLast)
				continue
			}
			rec := record{Impl: "flock", Version: runtime.Version(), TrainStepResult: r,
				GOARCH: runtime.GOARCH, Time: time.Now().UTC().Format(time.RFC3339)}
			if err := enc.Encode(rec); err != nil {
				fmt.Fprintln(os.Stderr, "trainstep:", err)
				os.Exit(1)
			}
		}
	}
}
