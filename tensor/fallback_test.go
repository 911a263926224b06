package tensor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// withoutMatMul is the CPU backend with its matrix product left out: a
// required kernel, which tensor does not compose.
type withoutMatMul struct{ *cpu.Backend }

func (withoutMatMul) MatMul(dst, a, b backend.View, p backend.MatMulParams) error {
	return fmt.Errorf("test backend: MatMul: %w", backend.ErrUnimplemented)
}

// TestRequiredKernelUnimplemented checks what the backend package documents:
// outside the optional kernels, a kernel that returns ErrUnimplemented is
// not composed but fails, naming the op and the reason.
func TestRequiredKernelUnimplemented(t *testing.T) {
	t.Parallel()
	dev := withoutMatMul{cpu.New()}
	a := FromSlice([]float32{1, 2, 3, 4}, Shape{2, 2}, On(dev))
	defer a.Release()
	defer func() {
		msg := fmt.Sprint(recover())
		if !strings.Contains(msg, "MatMul") || !strings.Contains(msg, backend.ErrUnimplemented.Error()) {
			t.Errorf("MatMul without the kernel: panic %q, want one naming MatMul and %q", msg, backend.ErrUnimplemented)
		}
	}()
	MatMul(a, a).Release()
}
