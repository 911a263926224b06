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
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/tensor"
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

// activationGradHarness reads lines "op g s" (op counted from
// backend.ReLUGrad, g and s float64 in hex) and prints the bits of
// activation_grad of kernels/unary.cuh on float32(g), float32(s) rounded
// to float32, as binary_f<float> of elementwise.cu returns it, and on g, s.
const activationGradHarness = `#include "unary.cuh"
int main() {
  int op;
  double g, s;
  while (scanf("%d %la %la", &op, &g, &s) == 3) {
    float f = (float)activation_grad(op, (double)(float)g, (double)(float)s);
    double d = activation_grad(op, g, s);
    unsigned u; unsigned long long v;
    memcpy(&u, &f, 4); memcpy(&v, &d, 8);
    printf("%x %llx\n", u, v);
  }
  return 0;
}
`

// TestActivationGradKernelsOnHost compiles the activation gradients of the
// binary kernels (kernels/unary.cuh) as host C++ and checks the activation gradients
// against the CPU backend's in float32 and float64, within 16ε·|result| +
// 4ε·|g|: the host's libm (standing in for CUDA's) differs from Go's in the
// last bits, which the sums of GELU's gradients amplify where they cancel.
func TestActivationGradKernelsOnHost(t *testing.T) {
	exe := compileOnHost(t, "kernels/unary.cuh", activationGradHarness)
	cases := []struct {
		op     backend.BinaryOp
		lo, hi float64
		cpu    func(g, s *tensor.Tensor) *tensor.Tensor
	}{
		{backend.ReLUGrad, -3, 3, tensor.ReLUGrad},
		{backend.GELUGrad, -9, 9, tensor.GELUGrad},
		{backend.GELUTanhGrad, -9, 9, tensor.GELUTanhGrad},
		{backend.TanhGrad, -1, 1, tensor.TanhGrad},
		{backend.SigmoidGrad, 0, 1, tensor.SigmoidGrad},
	}
	const n = 2001
	var in strings.Builder
	gs, ss := make([][]float64, len(cases)), make([][]float64, len(cases))
	for k, c := range cases {
		for i := 0; i < n; i++ {
			g := -5 + 10*float64((i*7919)%n)/n
			s := c.lo + (c.hi-c.lo)*float64(i)/(n-1)
			if i%97 == 0 {
				s = 0
			}
			gs[k], ss[k] = append(gs[k], g), append(ss[k], s)
			fmt.Fprintf(&in, "%d %s %s\n", int(c.op-backend.ReLUGrad), strconv.FormatFloat(g, 'x', -1, 64), strconv.FormatFloat(s, 'x', -1, 64))
		}
	}
	cmd := exec.Command(exe)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n*len(cases) {
		t.Fatalf("%d results for %d inputs", len(lines), n*len(cases))
	}
	c := cpu.New()
	for k, cs := range cases {
		for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
			g := tensor.FromSlice(gs[k], tensor.Shape{n}, tensor.On(c))
			s := tensor.FromSlice(ss[k], tensor.Shape{n}, tensor.On(c))
			gc, sc := g.Cast(dt), s.Cast(dt)
			d := cs.cpu(gc, sc)
			want := d.Float64s()
			for _, x := range []*tensor.Tensor{g, s, gc, sc, d} {
				x.Release()
			}
			for i, w := range want {
				f := strings.Fields(lines[k*n+i])
				var got float64
				eps := 0x1p-52
				if dt == backend.Float32 {
					b, _ := strconv.ParseUint(f[0], 16, 32)
					got = float64(math.Float32frombits(uint32(b)))
					eps = 0x1p-23
				} else {
					b, _ := strconv.ParseUint(f[1], 16, 64)
					got = math.Float64frombits(b)
				}
				if got != w && !(math.Abs(got-w) <= 16*eps*math.Abs(w)+4*eps*math.Abs(gs[k][i])) {
					t.Errorf("%v %v: g %v, s %v: %v from the kernel source, %v from the CPU backend", cs.op, dt, gs[k][i], ss[k][i], got, w)
					break
				}
			}
		}
	}
}
