package cuda_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/backendtest"
)

// unaryHarness reads lines "op x" (x a float64 in hex) and prints the bits
// of unary_f on float32(x) and of unary_d on x, from kernels/unary.cuh.
const unaryHarness = `#include "unary.cuh"
int main() {
  int op;
  double x;
  while (scanf("%d %la", &op, &x) == 2) {
    float f = unary_f(op, (float)x, 0.0f, 0.0);
    double d = unary_d(op, x, 0.0);
    unsigned u; unsigned long long v;
    memcpy(&u, &f, 4); memcpy(&v, &d, 8);
    printf("%x %llx\n", u, v);
  }
  return 0;
}
`

// TestUnaryKernelsOnHost compiles the arithmetic of the unary kernels
// (kernels/unary.cuh) as host C++ (when a C++ compiler is installed) and
// checks GELU and its tanh approximation in float32 and float64 against the
// conformance suite's float64 formulas and tolerances, over the suite's
// range and into the left tail, where 1 + erf(x/√2) and 1 + tanh(u) lose
// every digit in float32. The host's libm stands in for CUDA's erfcf and
// expf (both within a few ulp).
func TestUnaryKernelsOnHost(t *testing.T) {
	exe := compileOnHost(t, "kernels/unary.cuh", unaryHarness)
	cases := []struct {
		op   backend.UnaryOp
		name string
		ref  func(float64) float64
	}{
		// The references of backendtest's unary cases.
		{backend.GELU, "GELU", func(x float64) float64 { return x / 2 * (1 + math.Erf(x/math.Sqrt2)) }},
		{backend.GELUTanh, "GELUTanh", func(x float64) float64 {
			return x / 2 * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
		}},
	}
	var xs []float64
	for i := 0; i <= 4000; i++ {
		xs = append(xs, -9+15*float64(i)/4000)
	}
	xs = append(xs, 0, math.Copysign(0, -1), 1e-30, -1e-30, 1e3, -1e3, math.Inf(1), math.Inf(-1), math.NaN())
	var in strings.Builder
	for _, c := range cases {
		for _, x := range xs {
			fmt.Fprintf(&in, "%d %s\n", int(c.op), strconv.FormatFloat(x, 'x', -1, 64))
		}
	}
	cmd := exec.Command(exe)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	close := func(got, want float64, dt backend.DType) bool {
		rtol, atol := backendtest.Tol(dt)*4, backendtest.Tol(dt)*1e-3
		return (math.IsNaN(got) && math.IsNaN(want)) || got == want || math.Abs(got-want) <= atol+rtol*math.Abs(want)
	}
	for _, c := range cases {
		bad := 0
		for _, x := range xs {
			if !sc.Scan() {
				t.Fatalf("%s: the harness stopped early", c.name)
			}
			var fb uint32
			var db uint64
			if _, err := fmt.Sscanf(sc.Text(), "%x %x", &fb, &db); err != nil {
				t.Fatalf("%s: harness line %q: %v", c.name, sc.Text(), err)
			}
			x32 := float64(float32(x))
			got32, want32 := float64(math.Float32frombits(fb)), backendtest.Round(backend.Float32, c.ref(x32))
			got64, want64 := math.Float64frombits(db), c.ref(x)
			if !close(got32, want32, backend.Float32) {
				bad++
				if bad <= 5 {
					t.Errorf("%s float32(%v) = %v, want %v", c.name, x32, got32, want32)
				}
			}
			if !close(got64, want64, backend.Float64) {
				bad++
				if bad <= 5 {
					t.Errorf("%s float64(%v) = %v, want %v", c.name, x, got64, want64)
				}
			}
		}
		if bad > 5 {
			t.Errorf("%s: %d mismatches in all", c.name, bad)
		}
	}
}
