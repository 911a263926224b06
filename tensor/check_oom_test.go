package tensor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/flockml/flock/backend"
)

// TestMustOutOfMemory: running out of device memory panics with an error
// that wraps backend.ErrOutOfMemory, so that a caller can stop with a
// message; any other failure panics with a string, as a bug does.
func TestMustOutOfMemory(t *testing.T) {
	caught := func(err error) any {
		var r any
		func() {
			defer func() { r = recover() }()
			must("matmul", err)
		}()
		return r
	}
	r := caught(fmt.Errorf("allocating 2.0 GiB: %w", backend.ErrOutOfMemory))
	e, ok := r.(error)
	if !ok || !errors.Is(e, backend.ErrOutOfMemory) || e.Error() != "tensor: matmul(): allocating 2.0 GiB: out of device memory" {
		t.Errorf("out of memory: panic %#v, want an error wrapping backend.ErrOutOfMemory", r)
	}
	if s, ok := caught(errors.New("broken")).(string); !ok || s != "tensor: matmul(): broken" {
		t.Errorf("another failure: panic %#v, want the string of before", s)
	}
}
