package backend

// FusedBatchNormReLU is implemented by backends that can apply a ReLU inside
// batch normalisation: the forward pass writes max(BatchNorm(x), 0) in the
// same pass over memory, and the backward pass masks the gradient by the
// output as it reads it, so the pair costs what BatchNorm alone does. A
// backend without it leaves callers to compose BatchNorm and ReLU (the
// tensor package does so).
type FusedBatchNormReLU interface {
	// BatchNormReLU is BatchNorm (same operands and parameters) with y
	// replaced by max(y, 0) (ReLU(NaN) is NaN).
	BatchNormReLU(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar View, p NormParams) error
	// BatchNormReLUBackward is BatchNormBackward of the gradient
	// dy·[y > 0], where y is BatchNormReLU's output (contiguous, x's
	// shape): the gradient of the composition.
	BatchNormReLUBackward(dx, dweight, dbias, dy, y, x, weight, saveMean, saveInvStd View, p NormParams) error
}
