package tensor

import (
	"fmt"

	"github.com/flockml/flock/backend"
)

// CrossEntropyParams are the settings of CrossEntropy: label smoothing ε
// and the target value whose rows are ignored. Note that the zero value
// ignores class 0; PyTorch's default IgnoreIndex is −100.
type CrossEntropyParams = backend.CrossEntropyParams

// CrossEntropy returns the per-row loss [N] of logits [N, C] against integer
// class targets [N]:
//
//	loss_n = −Σ_c q_c·log softmax(logits_n)_c,  q = (1−ε)·onehot(target_n) + ε/C,
//
// PyTorch's cross_entropy with reduction='none'. Rows whose target equals
// p.IgnoreIndex get 0; any other target outside [0, C) panics.
func CrossEntropy(logits, target *Tensor, p CrossEntropyParams) *Tensor {
	const op = "CrossEntropy"
	l, tg := crossEntropyOperands(op, logits, target)
	defer l.Release()
	defer tg.Release()
	loss := empty(l.Device(), l.dtype, Shape{l.shape[0]})
	must(op, l.Device().CrossEntropy(loss.Raw(), l.Raw(), tg.Raw(), p), logits, target)
	return loss
}

// CrossEntropyBackward returns the gradient with respect to logits [N, C] of
// Σ_n dloss_n·loss_n:
//
//	dlogits_{n,c} = dloss_n·(softmax(logits_n)_c − q_{n,c}),
//
// zero on ignored rows. dloss has shape [N] or broadcasts to it (a scalar
// for a sum of the losses).
func CrossEntropyBackward(logits, target, dloss *Tensor, p CrossEntropyParams) *Tensor {
	const op = "CrossEntropyBackward"
	l, tg := crossEntropyOperands(op, logits, target)
	defer l.Release()
	defer tg.Release()
	sameDevice(op, logits, dloss)
	sameDType(op, logits, dloss)
	n := Shape{l.shape[0]}
	if _, err := backend.BroadcastShapes(dloss.shape, n); err != nil || len(dloss.shape) > 1 {
		panic(fmt.Sprintf("tensor: %s: dloss of shape %v does not match %d rows of logits %v; pass one gradient per row", op, dloss.shape, n[0], logits.shape))
	}
	dv := dloss.BroadcastTo(n)
	defer dv.Release()
	dl := dv.Contiguous()
	defer dl.Release()
	dx := empty(l.Device(), l.dtype, l.shape)
	must(op, l.Device().CrossEntropyBackward(dx.Raw(), l.Raw(), tg.Raw(), dl.Raw(), p), logits, target, dloss)
	return dx
}

// crossEntropyOperands checks logits and target and returns them ready for
// the kernels: contiguous, with Uint8 targets widened to Int64.
func crossEntropyOperands(op string, logits, target *Tensor) (l, tg *Tensor) {
	sameDevice(op, logits, target)
	floatOnly(op, logits)
	if logits.Dim() != 2 {
		panic(fmt.Sprintf("tensor: %s: logits of shape %v; want [N, C] (move the class axis last and flatten the rest with Permute and Reshape)", op, logits.shape))
	}
	if !target.dtype.IsInt() {
		panic(fmt.Sprintf("tensor: %s: target of dtype %v; want integer class indices (int32 or int64)", op, target.dtype))
	}
	if !target.shape.Equal(Shape{logits.shape[0]}) {
		panic(fmt.Sprintf("tensor: %s: logits %v need a target of shape [%d], got %v", op, logits.shape, logits.shape[0], target.shape))
	}
	if target.dtype == Uint8 {
		tg = target.Cast(Int64)
	} else {
		tg = target.Contiguous()
	}
	return logits.Contiguous(), tg
}
