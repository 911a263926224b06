package cpu

import "testing"

// UseKernelPathForTest switches the kernel path for the rest of a test of
// package cpu_test, restoring the previous one at its end.
func UseKernelPathForTest(t *testing.T, name string) {
	t.Helper()
	withKernelPath(t, name)
}
