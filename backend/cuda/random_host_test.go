package cuda_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
	"github.com/flockml/flock/tensor"
	syscpu "golang.org/x/sys/cpu"
)

// randomHarness runs random_f32/random_f64 and dropout_f32 of
// kernels/random.cu on the host and prints the results' bits.
const randomHarness = `#include "random.cu"
int main(int argc, char **argv) {
  int what = atoi(argv[1]);
  u64 seed = strtoull(argv[2], 0, 0), offset = strtoull(argv[3], 0, 0);
  i64 n = atoll(argv[4]);
  int kind = atoi(argv[5]);
  double a = strtod(argv[6], 0), b = strtod(argv[7], 0), top = strtod(argv[8], 0);
  if (what == 0) {
    float *d = (float *)calloc(n + 1, sizeof(float));
    random_f32(d, n, kind, a, b, top, seed, offset);
    for (i64 i = 0; i < n; i++) { unsigned u; memcpy(&u, d + i, 4); printf("%x\n", u); }
  } else if (what == 1) {
    double *d = (double *)calloc(n + 1, sizeof(double));
    random_f64(d, n, kind, a, b, top, seed, offset);
    for (i64 i = 0; i < n; i++) { unsigned long long u; memcpy(&u, d + i, 8); printf("%llx\n", u); }
  } else {
    float *x = (float *)calloc(n + 1, sizeof(float)), *d = (float *)calloc(n + 1, sizeof(float));
    unsigned char *m = (unsigned char *)calloc(n + 1, 1);
    for (i64 i = 0; i < n; i++) x[i] = 1;
    dropout_f32(d, m, x, n, a, 1 / (1 - a), seed, offset);
    for (i64 i = 0; i < n; i++) printf("%d\n", m[i]);
  }
  return 0;
}
`

// compileOnHost compiles harness, a C++ program including kernel files, for
// the host with testdata/host_prelude.h (skipping the test when there is no
// C++ compiler) and returns the executable. what names the kernel source
// in errors; flags go to the compiler after the defaults.
func compileOnHost(t *testing.T, what, harness string, flags ...string) string {
	t.Helper()
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	if _, err := exec.LookPath(cxx); err != nil {
		t.Skipf("no C++ compiler (%s): %v", cxx, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "harness.cpp")
	if err := os.WriteFile(src, []byte(harness), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "harness")
	prelude, _ := filepath.Abs("testdata/host_prelude.h")
	kernels, _ := filepath.Abs("kernels")
	args := append([]string{"-std=c++14", "-O1", "-ffp-contract=off"}, flags...)
	args = append(args, "-include", prelude, "-I", kernels, "-o", exe, src, "-lm")
	out, err := exec.Command(cxx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("compile %s for the host: %v\n%s", what, err, out)
	}
	return exe
}

// TestRandomKernelsOnHost compiles the Philox kernels of kernels/random.cu
// as host C++ (when a C++ compiler is installed), runs them, and checks
// that they draw exactly the CPU backend's numbers: the stream layout of
// the CUDA source, not only of the Go code, is pinned without a GPU. A
// second build contracts a·b + c into fused multiply-adds wherever the
// compiler may, as NVRTC does by default, so that the kernels' arithmetic
// is pinned to the CPU's roundings whatever the compiler fuses.
func TestRandomKernelsOnHost(t *testing.T) {
	builds := []struct {
		name  string
		flags []string
	}{{"separate roundings", nil}}
	if runtime.GOARCH == "amd64" && syscpu.X86.HasFMA {
		builds = append(builds, struct {
			name  string
			flags []string
		}{"contracted", []string{"-O2", "-mfma", "-ffp-contract=fast"}})
	} else {
		t.Logf("no FMA on this host (%s): the kernels are not run with contracted arithmetic", runtime.GOARCH)
	}
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			checkRandomKernelsOnHost(t, compileOnHost(t, "kernels/random.cu", randomHarness, b.flags...))
		})
	}
}

func checkRandomKernelsOnHost(t *testing.T, exe string) {
	run := func(args ...string) []string {
		t.Helper()
		out, err := exec.Command(exe, args...).Output()
		if err != nil {
			t.Fatalf("harness %v: %v", args, err)
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		return lines
	}
	hex := func(x float64) string { return strconv.FormatFloat(x, 'x', -1, 64) }
	c := cpu.New()
	for _, dt := range []backend.DType{backend.Float32, backend.Float64} {
		for _, p := range []backend.RandomParams{
			{Kind: backend.Uniform, A: 0, B: 1, Seed: 0, Offset: 0},
			{Kind: backend.Uniform, A: -2, B: 3, Seed: 0xdeadbeefcafef00d, Offset: 5},
			{Kind: backend.Uniform, A: 0, B: 1, Seed: 7, Offset: 1<<34 + 3},
			{Kind: backend.Uniform, A: -1, B: 2, Seed: 0x1234, Offset: 3}, // TestMatchesCPU's
			{Kind: backend.Normal, A: 0, B: 1, Seed: 42, Offset: 0},
			{Kind: backend.Normal, A: 1.5, B: 0.25, Seed: 1 << 40, Offset: 6},
		} {
			const n = 1000
			x := tensor.Empty(tensor.Shape{n}, tensor.On(c), tensor.Of(dt))
			if err := c.Random(x.Raw(), p); err != nil {
				t.Fatal(err)
			}
			want := x.Float64s()
			x.Release()
			top := math.Nextafter(p.B, math.Inf(-1))
			what := "1"
			if dt == backend.Float32 {
				what = "0"
				top = float64(math.Nextafter32(float32(p.B), float32(math.Inf(-1))))
			}
			lines := run(what, fmt.Sprint(p.Seed), fmt.Sprint(p.Offset), fmt.Sprint(n), fmt.Sprint(int(p.Kind)), hex(p.A), hex(p.B), hex(top))
			if len(lines) != n {
				t.Fatalf("%v %+v: %d values from the kernel", dt, p, len(lines))
			}
			for i, l := range lines {
				bits, _ := strconv.ParseUint(l, 16, 64)
				var got float64
				if dt == backend.Float32 {
					got = float64(math.Float32frombits(uint32(bits)))
				} else {
					got = math.Float64frombits(bits)
				}
				ok := got == want[i]
				if !ok && p.Kind == backend.Normal {
					// The host's log, sin and cos may differ from Go's in the
					// last bits of a float64: allow a few ulp, and for
					// float32 the neighbouring value.
					if dt == backend.Float32 {
						ok = float32(got) == math.Nextafter32(float32(want[i]), float32(got))
					} else {
						ulp := math.Nextafter(math.Abs(want[i]), math.Inf(1)) - math.Abs(want[i])
						ok = math.Abs(got-want[i]) <= 4*ulp
					}
				}
				if !ok {
					t.Fatalf("%v %+v: element %d = %v from the kernel source, %v from the CPU backend", dt, p, i, got, want[i])
				}
			}
		}
	}
	// Dropout masks.
	const n = 777
	for _, prob := range []float64{0.1, 0.5} {
		x := tensor.Ones(tensor.Shape{n}, tensor.On(c))
		mask := tensor.Empty(tensor.Shape{n}, tensor.On(c), tensor.Of(tensor.Bool))
		dst := tensor.Empty(tensor.Shape{n}, tensor.On(c))
		if err := c.Dropout(dst.Raw(), mask.Raw(), x.Raw(), prob, 0x1234567890, 6); err != nil {
			t.Fatal(err)
		}
		want := mask.Bools()
		x.Release()
		mask.Release()
		dst.Release()
		lines := run("2", fmt.Sprint(uint64(0x1234567890)), "6", fmt.Sprint(n), "0", hex(prob), "0", "0")
		got := strings.Join(lines, "")
		for i, w := range want {
			if (got[i] == '1') != w {
				t.Fatalf("dropout p=%v: mask element %d = %c from the kernel source, %v from the CPU backend", prob, i, got[i], w)
			}
		}
	}
}
