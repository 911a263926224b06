package nn

import (
	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// CrossEntropyLoss is the cross-entropy between softmax(logits) and class
// targets, as PyTorch's nn.CrossEntropyLoss: per row
// ℓ = −Σ_c q_c·log softmax(x)_c with q = (1−ε)·onehot(target) + ε/C, rows
// whose target is the ignore index contributing nothing, and the mean over
// the other rows (or the sum, or no reduction). The zero value is PyTorch's
// default: no smoothing, ignore index −100, mean reduction.
type CrossEntropyLoss struct {
	LabelSmoothing float64
	// IgnoreIndex is the target value to skip; zero stands for −100
	// (autograd.DefaultIgnoreIndex) unless UseIgnoreIndex is set.
	IgnoreIndex    int64
	UseIgnoreIndex bool
	Reduction      autograd.Reduction
}

// NewCrossEntropyLoss returns a CrossEntropyLoss with label smoothing ε and
// PyTorch's other defaults.
func NewCrossEntropyLoss(labelSmoothing float64) CrossEntropyLoss {
	return CrossEntropyLoss{LabelSmoothing: labelSmoothing}
}

// Forward returns the loss of logits [N, C] against target [N] (int32 or
// int64 class indices).
func (l CrossEntropyLoss) Forward(logits *autograd.Var, target *tensor.Tensor) *autograd.Var {
	return autograd.CrossEntropy(logits, target, autograd.CrossEntropyOptions{
		LabelSmoothing: l.LabelSmoothing,
		IgnoreIndex:    l.IgnoreIndex,
		UseIgnoreIndex: l.UseIgnoreIndex,
		Reduction:      l.Reduction,
	})
}

// MSELoss is the mean (or sum, or elementwise) squared error (x − y)².
type MSELoss struct {
	Reduction autograd.Reduction
}

// Forward returns the squared error of x against y (same shapes).
func (l MSELoss) Forward(x, y *autograd.Var) *autograd.Var {
	return autograd.MSELoss(x, y, l.Reduction)
}
