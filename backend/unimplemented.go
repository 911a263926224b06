package backend

import "fmt"

// Unimplemented provides every kernel of Backend as a method that returns
// ErrUnimplemented. A partial backend embeds it and overrides what it has.
// Tensor composes only the activation gradients among the rest (see the
// package documentation): a backend that trains must override every other
// kernel. It provides no memory methods: those every backend must have.
type Unimplemented struct{}

func unimpl(kernel string) error { return fmt.Errorf("%s: %w", kernel, ErrUnimplemented) }

func (Unimplemented) Copy(dst, src View) error              { return unimpl("Copy") }
func (Unimplemented) Fill(dst View, value float64) error    { return unimpl("Fill") }
func (Unimplemented) Random(dst View, p RandomParams) error { return unimpl("Random") }
func (Unimplemented) Unary(op UnaryOp, dst, x View, arg float64) error {
	return unimpl("Unary")
}
func (Unimplemented) Binary(op BinaryOp, dst, a, b View) error { return unimpl("Binary") }
func (Unimplemented) Where(dst, cond, a, b View) error         { return unimpl("Where") }
func (Unimplemented) Reduce(op ReduceOp, dst, x View, axes []int, p ReduceParams) error {
	return unimpl("Reduce")
}
func (Unimplemented) MatMul(dst, a, b View, p MatMulParams) error { return unimpl("MatMul") }
func (Unimplemented) Conv2d(dst, x, w View, p ConvParams) error   { return unimpl("Conv2d") }
func (Unimplemented) Conv2dBackwardData(dx, dy, w View, p ConvParams) error {
	return unimpl("Conv2dBackwardData")
}
func (Unimplemented) Conv2dBackwardWeight(dw, x, dy View, p ConvParams) error {
	return unimpl("Conv2dBackwardWeight")
}
func (Unimplemented) Pool2d(op PoolOp, dst, indices, x View, p PoolParams) error {
	return unimpl("Pool2d")
}
func (Unimplemented) Pool2dBackward(op PoolOp, dx, dy, indices View, p PoolParams) error {
	return unimpl("Pool2dBackward")
}
func (Unimplemented) Softmax(dst, x View, axis int, log bool) error { return unimpl("Softmax") }
func (Unimplemented) SoftmaxBackward(dx, y, dy View, axis int, log bool) error {
	return unimpl("SoftmaxBackward")
}
func (Unimplemented) CrossEntropy(loss, logits, target View, p CrossEntropyParams) error {
	return unimpl("CrossEntropy")
}
func (Unimplemented) CrossEntropyBackward(dlogits, logits, target, dloss View, p CrossEntropyParams) error {
	return unimpl("CrossEntropyBackward")
}
func (Unimplemented) BatchNorm(y, saveMean, saveInvStd, x, weight, bias, runningMean, runningVar View, p NormParams) error {
	return unimpl("BatchNorm")
}
func (Unimplemented) BatchNormBackward(dx, dweight, dbias, dy, x, weight, saveMean, saveInvStd View, p NormParams) error {
	return unimpl("BatchNormBackward")
}
func (Unimplemented) LayerNorm(y, mean, rstd, x, weight, bias View, normSize int, eps float64) error {
	return unimpl("LayerNorm")
}
func (Unimplemented) LayerNormBackward(dx, dweight, dbias, dy, x, weight, mean, rstd View, normSize int) error {
	return unimpl("LayerNormBackward")
}
func (Unimplemented) Dropout(dst, mask, x View, prob float64, seed, offset uint64) error {
	return unimpl("Dropout")
}
func (Unimplemented) Gather(dst, x, index View, axis int) error { return unimpl("Gather") }
func (Unimplemented) ScatterAdd(dst, index, src View, axis int) error {
	return unimpl("ScatterAdd")
}
func (Unimplemented) IndexSelect(dst, x, index View, axis int) error {
	return unimpl("IndexSelect")
}
func (Unimplemented) IndexAdd(dst, index, src View, axis int) error { return unimpl("IndexAdd") }
