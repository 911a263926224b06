package backendtest_test

import (
	"fmt"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/backendtest"
)

// A backend's test file runs the whole suite with one call:
//
//	func TestConformance(t *testing.T) { backendtest.Run(t, mybackend.New()) }
//
// Tolerances depend on the result's dtype, and references are rounded to
// the dtype under test with Round.
func Example() {
	for _, dt := range []backend.DType{backend.Float64, backend.Float32, backend.BFloat16} {
		fmt.Printf("%-8v tol %.0e  1/3 → %.10f\n", dt, backendtest.Tol(dt), backendtest.Round(dt, 1.0/3))
	}
	// Output:
	// float64  tol 1e-12  1/3 → 0.3333333333
	// float32  tol 1e-05  1/3 → 0.3333333433
	// bfloat16 tol 1e-02  1/3 → 0.3339843750
}
