package tensor

import (
	"errors"
	"fmt"

	"github.com/flockml/flock/backend"
)

// SGDParams and AdamWParams are the settings of the fused optimizer
// updates (see backend.FusedSGD and backend.FusedAdamW).
type (
	SGDParams   = backend.SGDParams
	AdamWParams = backend.AdamWParams
)

// FusedSGDStep applies one SGD update to param in place, and to its
// momentum buffer buf (nil when p.Momentum is 0), in a single pass with the
// device's fused kernel (backend.FusedSGD): see that interface for the
// formulas. It reports false and changes nothing when the device has no
// such kernel or an operand is not contiguous; the caller then composes the
// update from elementwise ops. Operands on different devices, of different
// dtypes or shapes are programmer errors and panic.
func FusedSGDStep(param, grad, buf *Tensor, p SGDParams) bool {
	const op = "FusedSGDStep"
	ts := []*Tensor{param, grad}
	if p.Momentum != 0 {
		if buf == nil {
			panic("tensor: FusedSGDStep: momentum needs a buffer")
		}
		ts = append(ts, buf)
	}
	if !fusedOperands(op, ts...) {
		return false
	}
	f, ok := param.Device().(backend.FusedSGD)
	if !ok {
		return false
	}
	var bv backend.View
	if buf != nil && p.Momentum != 0 {
		bv = buf.Raw()
	}
	err := f.SGDStep(param.Raw(), grad.Raw(), bv, p)
	if errors.Is(err, backend.ErrUnimplemented) {
		return false
	}
	must(op, err, ts...)
	return true
}

// FusedAdamWStep applies one AdamW update to param and its moments m and v
// in place, in a single pass with the device's fused kernel
// (backend.FusedAdamW). Like FusedSGDStep it reports false, changing
// nothing, when the device cannot.
func FusedAdamWStep(param, grad, m, v *Tensor, p AdamWParams) bool {
	const op = "FusedAdamWStep"
	if !fusedOperands(op, param, grad, m, v) {
		return false
	}
	f, ok := param.Device().(backend.FusedAdamW)
	if !ok {
		return false
	}
	err := f.AdamWStep(param.Raw(), grad.Raw(), m.Raw(), v.Raw(), p)
	if errors.Is(err, backend.ErrUnimplemented) {
		return false
	}
	must(op, err, param, grad, m, v)
	return true
}

// fusedOperands checks the operands of a fused update (one device, one
// float dtype, param's shape) and reports whether all are contiguous.
func fusedOperands(op string, ts ...*Tensor) bool {
	sameDevice(op, ts...)
	sameDType(op, ts...)
	floatOnly(op, ts...)
	for _, t := range ts[1:] {
		if !t.shape.Equal(ts[0].shape) {
			panic(fmt.Sprintf("tensor: %s: operands of different shapes (%s)", op, describe(ts...)))
		}
	}
	for _, t := range ts {
		if !t.IsContiguous() {
			return false
		}
	}
	return true
}
