package cpu

import (
	"fmt"
	"math"

	"github.com/flockml/flock/backend"
)

// CrossEntropy implements backend.Backend. For row n with target t and
// smoothing ε over C classes,
//
//	loss_n = (1−ε)·(lse − x_t) + ε·(lse − mean_c x_c),  lse = log Σ_c e^{x_c},
//
// which is −Σ_c q_c·log softmax(x)_c for q = (1−ε)·onehot(t) + ε/C, the form
// PyTorch's cross_entropy(label_smoothing=ε) computes. The log-sum-exp is
// shifted by the row maximum and accumulated in float64. target may be any
// strided [N] view.
func (c *Backend) CrossEntropy(loss, logits, target backend.View, p backend.CrossEntropyParams) error {
	const k = "cpu: cross_entropy"
	n, classes, err := crossEntropyArgs(k, logits, target)
	if err != nil {
		return err
	}
	if err := backend.CheckDense(k, nil, "loss", loss, logits.DType, backend.Shape{n}); err != nil {
		return err
	}
	tgt, err := crossEntropyTargets(k, target, n, classes, p.IgnoreIndex)
	if err != nil {
		return err
	}
	switch logits.DType {
	case backend.Float32:
		crossEntropyRows(elems[float32](loss, n), elems[float32](logits, n*classes), tgt, classes, p)
	case backend.Float64:
		crossEntropyRows(elems[float64](loss, n), elems[float64](logits, n*classes), tgt, classes, p)
	}
	return nil
}

// CrossEntropyBackward implements backend.Backend:
// dlogits_{n,c} = dloss_n·(softmax(x_n)_c − q_{n,c}), zero for ignored rows.
// target and dloss may be any strided [N] views (dloss may broadcast a single
// value with stride 0).
func (c *Backend) CrossEntropyBackward(dlogits, logits, target, dloss backend.View, p backend.CrossEntropyParams) error {
	const k = "cpu: cross_entropy_backward"
	n, classes, err := crossEntropyArgs(k, logits, target)
	if err != nil {
		return err
	}
	if err := backend.CheckDense(k, nil, "dlogits", dlogits, logits.DType, logits.Shape); err != nil {
		return err
	}
	if dloss.DType != logits.DType || !dloss.Shape.Equal(backend.Shape{n}) {
		return fmt.Errorf("%s: dloss is %v%v, want %v[%d]", k, dloss.DType, dloss.Shape, logits.DType, n)
	}
	tgt, err := crossEntropyTargets(k, target, n, classes, p.IgnoreIndex)
	if err != nil {
		return err
	}
	dl := make([]float64, n)
	if dloss.DType == backend.Float32 {
		src := F32(dloss)
		for i := range dl {
			dl[i] = float64(src[dloss.Offset+i*dloss.Strides[0]])
		}
	} else {
		src := F64(dloss)
		for i := range dl {
			dl[i] = src[dloss.Offset+i*dloss.Strides[0]]
		}
	}
	switch logits.DType {
	case backend.Float32:
		crossEntropyGradRows(elems[float32](dlogits, n*classes), elems[float32](logits, n*classes), tgt, dl, classes, p)
	case backend.Float64:
		crossEntropyGradRows(elems[float64](dlogits, n*classes), elems[float64](logits, n*classes), tgt, dl, classes, p)
	}
	return nil
}

func crossEntropyArgs(kernel string, logits, target backend.View) (n, classes int, err error) {
	if len(logits.Shape) != 2 {
		return 0, 0, fmt.Errorf("%s: logits have shape %v, want [N, C]", kernel, logits.Shape)
	}
	if err := backend.CheckFloat(kernel, logits.DType); err != nil {
		return 0, 0, err
	}
	if err := backend.CheckDense(kernel, nil, "logits", logits, logits.DType, nil); err != nil {
		return 0, 0, err
	}
	n, classes = logits.Shape[0], logits.Shape[1]
	if target.DType != backend.Int32 && target.DType != backend.Int64 {
		return 0, 0, fmt.Errorf("%s: target is %v, want int32 or int64", kernel, target.DType)
	}
	if !target.Shape.Equal(backend.Shape{n}) {
		return 0, 0, fmt.Errorf("%s: target has shape %v for logits %v, want [%d]", kernel, target.Shape, logits.Shape, n)
	}
	return n, classes, nil
}

// crossEntropyTargets reads the targets, marking ignored rows with −1 and
// reporting the first target outside [0, classes).
func crossEntropyTargets(kernel string, target backend.View, n, classes int, ignore int64) ([]int, error) {
	out := make([]int, n)
	var i32 []int32
	var i64 []int64
	if target.DType == backend.Int32 {
		i32 = I32(target)
	} else {
		i64 = I64(target)
	}
	for i := range out {
		at := target.Offset + i*target.Strides[0]
		var t int64
		if i32 != nil {
			t = int64(i32[at])
		} else {
			t = i64[at]
		}
		switch {
		case t == ignore:
			out[i] = -1
		case t < 0 || t >= int64(classes):
			return nil, fmt.Errorf("%s: target %d of row %d out of range [0, %d)", kernel, t, i, classes)
		default:
			out[i] = int(t)
		}
	}
	return out, nil
}

// logSumExp returns m = max x and ls = log Σ_c e^{x_c − m}, so that
// log Σ_c e^{x_c} = m + ls; callers subtract m from a logit before adding ls,
// which keeps the digits of small log-probabilities of large logits.
func logSumExp[T float32 | float64](x []T) (m, ls float64) {
	m = math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m, math.Log(s)
}

func crossEntropyRows[T float32 | float64](loss, logits []T, tgt []int, classes int, p backend.CrossEntropyParams) {
	eps := p.LabelSmoothing
	parallelFor(len(tgt), max(1, 8192/max(classes, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if tgt[i] < 0 {
				loss[i] = 0
				continue
			}
			x := logits[i*classes : (i+1)*classes]
			m, ls := logSumExp(x)
			l := (1 - eps) * (m - float64(x[tgt[i]]) + ls)
			if eps != 0 {
				s := 0.0
				for _, v := range x {
					s += m - float64(v)
				}
				l += eps * (s/float64(classes) + ls)
			}
			loss[i] = T(l)
		}
	})
}

func crossEntropyGradRows[T float32 | float64](dlogits, logits []T, tgt []int, dl []float64, classes int, p backend.CrossEntropyParams) {
	eps := p.LabelSmoothing
	uniform := eps / float64(classes)
	parallelFor(len(tgt), max(1, 8192/max(classes, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			dx := dlogits[i*classes : (i+1)*classes]
			if tgt[i] < 0 {
				clear(dx)
				continue
			}
			x := logits[i*classes : (i+1)*classes]
			m, ls := logSumExp(x)
			g := dl[i]
			for c, v := range x {
				q := uniform
				if c == tgt[i] {
					q += 1 - eps
				}
				dx[c] = T(g * (math.Exp(float64(v)-m-ls) - q))
			}
		}
	})
}
