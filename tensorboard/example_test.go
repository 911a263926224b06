package tensorboard_test

import (
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flockml/flock/tensorboard"
)

// Example logs a training loss and learning rate for TensorBoard
// (tensorboard --logdir DIR shows the run "mlp").
func Example() {
	dir, err := os.MkdirTemp("", "runs")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := tensorboard.Create(filepath.Join(dir, "mlp"))
	if err != nil {
		log.Fatal(err)
	}
	for step := int64(1); step <= 100; step++ {
		lr := 0.1 * math.Cos(math.Pi/2*float64(step)/100)
		err := w.Scalars(step, time.Now(),
			tensorboard.Value{Tag: "train/loss", Value: 2 / math.Sqrt(float64(step))},
			tensorboard.Value{Tag: "train/lr", Value: lr})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(filepath.Base(w.Path()), "events.out.tfevents."))
	// Output: true
}
