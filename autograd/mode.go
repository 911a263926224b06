package autograd

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// Gradient recording is switched off per goroutine, like PyTorch's
// thread-local grad mode. scopes counts the no-grad scopes open in the whole
// process, so that the common case (none open) costs one atomic load per op.
var (
	scopes   atomic.Int64
	disabled sync.Map // goroutine id → depth of its open scopes
)

// NoGrad runs fn with gradient recording off on the calling goroutine: ops
// inside produce Vars that do not require gradients and keep nothing for a
// backward pass. Goroutines that fn starts are not affected.
func NoGrad(fn func()) {
	id := goid()
	depth, _ := disabled.Load(id)
	d, _ := depth.(int)
	disabled.Store(id, d+1)
	scopes.Add(1)
	defer func() {
		scopes.Add(-1)
		if d == 0 {
			disabled.Delete(id)
		} else {
			disabled.Store(id, d)
		}
	}()
	fn()
}

// GradEnabled reports whether ops on the calling goroutine record gradients.
func GradEnabled() bool {
	if scopes.Load() == 0 {
		return true
	}
	_, off := disabled.Load(goid())
	return !off
}

// goid returns the calling goroutine's id, read from its stack header
// ("goroutine 17 [running]:").
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		panic("autograd: cannot read goroutine id")
	}
	return id
}
