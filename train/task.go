package train

import (
	"math"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/tensor"
)

// Task is what a Trainer minimises and measures: the loss of a model's
// output on a batch's targets and, where it means something, how many of
// the batch's samples the output gets right. Classification is the task
// of New and NewWithData; NewModule takes any.
type Task interface {
	// Loss returns the training loss of out on target: a scalar (the mean
	// over the batch) whose Backward gives the gradients.
	Loss(out *autograd.Var, target *tensor.Tensor) *autograd.Var
	// EvalLoss returns the evaluation loss of out on target summed over
	// the batch's samples (without what only training adds, such as label
	// smoothing).
	EvalLoss(out *autograd.Var, target *tensor.Tensor) float64
	// Correct returns how many of the batch's samples out gets right, or
	// −1 when the task has no accuracy (the records' accuracy is then
	// NaN).
	Correct(out, target *tensor.Tensor) int64
}

// Classification is the task of a model whose output is [N, C] logits
// over C classes and whose targets are class indices [N]: cross-entropy
// with label smoothing ε for training, without for evaluation, and the
// accuracy of the argmax.
type Classification struct {
	LabelSmoothing float64
}

var _ Task = Classification{}

// Loss implements Task.
func (c Classification) Loss(out *autograd.Var, target *tensor.Tensor) *autograd.Var {
	return autograd.CrossEntropy(out, target, autograd.CrossEntropyOptions{LabelSmoothing: c.LabelSmoothing})
}

// EvalLoss implements Task.
func (Classification) EvalLoss(out *autograd.Var, target *tensor.Tensor) float64 {
	l := autograd.CrossEntropy(out, target, autograd.CrossEntropyOptions{Reduction: autograd.ReductionSum})
	defer l.Release()
	return l.Value.Item()
}

// Correct implements Task: the rows whose largest logit is at the label.
func (Classification) Correct(out, target *tensor.Tensor) int64 { return countCorrect(out, target) }

// Regression is the task of a model whose output has its targets' shape
// (or broadcasts against it): the mean squared error over every element,
// no accuracy. Its evaluation loss is a sample's squared error summed over
// its elements, summed over the batch.
type Regression struct{}

var _ Task = Regression{}

// Loss implements Task.
func (Regression) Loss(out *autograd.Var, target *tensor.Tensor) *autograd.Var {
	y := autograd.Const(target.Retain())
	defer y.Release()
	return autograd.MSELoss(out, y, autograd.ReductionMean)
}

// EvalLoss implements Task.
func (Regression) EvalLoss(out *autograd.Var, target *tensor.Tensor) float64 {
	y := autograd.Const(target.Retain())
	defer y.Release()
	l := autograd.MSELoss(out, y, autograd.ReductionSum)
	defer l.Release()
	return l.Value.Item()
}

// Correct implements Task: a regression has no accuracy.
func (Regression) Correct(_, _ *tensor.Tensor) int64 { return -1 }

// accuracy returns correct/n, NaN for a task without accuracy.
func accuracy(correct, n int64, has bool) float64 {
	if !has {
		return math.NaN()
	}
	return float64(correct) / float64(n)
}
