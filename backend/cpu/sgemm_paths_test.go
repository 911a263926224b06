package cpu_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/flockml/flock/backend/backendtest"
	"github.com/flockml/flock/backend/cpu"
)

// TestConformanceKernelPaths runs the conformance suite on every kernel path
// of this CPU besides the active one, which TestConformance covers. (Other
// packages' tests, the golden ones among them, take a path from the
// environment: FLOCK_CPU_KERNELS=avx2 go test ./nn/...)
func TestConformanceKernelPaths(t *testing.T) {
	active := cpu.KernelPath()
	for _, path := range cpu.KernelPaths() {
		if path == active {
			continue
		}
		t.Run(path, func(t *testing.T) {
			cpu.UseKernelPathForTest(t, path)
			if got := cpu.KernelPath(); got != path {
				t.Fatalf("KernelPath() = %q after switching to %q", got, path)
			}
			backendtest.Run(t, cpu.New())
		})
	}
}

// TestKernelsEnv starts this test binary with FLOCK_CPU_KERNELS set to
// each path (and to names it cannot honour) and checks the path it chose.
func TestKernelsEnv(t *testing.T) {
	if os.Getenv("FLOCK_TEST_KERNELS_CHILD") == "1" {
		fmt.Printf("path=%s\n", cpu.KernelPath())
		return
	}
	paths := cpu.KernelPaths()
	cases := map[string]string{"": paths[0], "auto": paths[0], "bogus": paths[0], " GO ": "go"}
	for _, p := range paths {
		cases[p] = p
	}
	if !slices.Contains(paths, "avx512") {
		cases["avx512"] = paths[0]
	}
	for env, want := range cases {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsEnv$", "-test.count=1")
		cmd.Env = append(os.Environ(), "FLOCK_TEST_KERNELS_CHILD=1", cpu.KernelsEnv+"="+env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s=%q: %v\n%s", cpu.KernelsEnv, env, err, out)
		}
		if !strings.Contains(string(out), "path="+want+"\n") {
			t.Errorf("%s=%q: child reports %q, want path=%s", cpu.KernelsEnv, env, out, want)
		}
		if env == "bogus" && !strings.Contains(string(out), "cannot run") {
			t.Errorf("%s=%q: no warning in %q", cpu.KernelsEnv, env, out)
		}
	}
}
