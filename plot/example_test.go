package plot_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/flockml/flock/plot"
)

// Example draws two runs of flock train --json, Local SGD and data
// parallel, in one figure.
func Example() {
	runs, err := plot.ReadFiles("testdata/local_h3.jsonl", "testdata/dp.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	var svg bytes.Buffer
	if err := plot.WriteSVG(&svg, runs); err != nil {
		log.Fatal(err)
	}
	for _, r := range runs {
		fmt.Printf("%s: %d losses, %d evaluations, %d rounds\n", r.Label(), len(r.Loss), len(r.TestAcc), len(r.H))
	}
	fmt.Println(bytes.Contains(svg.Bytes(), []byte("<svg")))
	// Output:
	// local_h3: Local SGD (constant H = 3): 6 losses, 2 evaluations, 4 rounds
	// dp: data parallel (gradients averaged every step): 6 losses, 2 evaluations, 0 rounds
	// true
}
