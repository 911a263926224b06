package sparse_test

import (
	"fmt"

	"github.com/flockml/flock/sparse"
)

// Two layers in four carry most of the gradient: they are drawn more
// often, and the expected number of layers is the budget's half of four.
func ExampleProbabilities() {
	norms := []float64{4, 4, 1, 1}
	known := []bool{true, true, true, true}
	p := sparse.Probabilities(norms, known, 0.5, 0.1)
	fmt.Printf("p = %.2f, expected layers %.1f\n", p, p[0]+p[1]+p[2]+p[3])
	// Output:
	// p = [0.80 0.80 0.20 0.20], expected layers 2.0
}
