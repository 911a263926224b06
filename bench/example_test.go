package bench_test

import (
	"fmt"

	"github.com/flockml/flock/bench"
)

// Two warm-up and three timed training steps of the small CNN on batches
// of 8 images; ImagesPerSec is 8·3 divided by the timed seconds.
func ExampleMeasureTrainStep() {
	r, err := bench.MeasureTrainStep(bench.TrainStepConfig{Model: "cnn", Batch: 8, Warmup: 2, Steps: 3, Seed: 1})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d parameters, %d timed steps of %d images, %t\n",
		r.Model, r.Params, r.Steps, r.Batch, r.ImagesPerSec > 0)
	// Output:
	// cnn: 105866 parameters, 3 timed steps of 8 images, true
}
