// Package backend defines the device contract of flock: what a backend (the
// CPU, a GPU) must provide so that tensors can live on it and ops can run on
// it.
//
// # Model
//
// A Backend owns memory (Buffer) and runs kernels. Kernels address memory
// through Views: a buffer, a dtype, a shape, element strides and an element
// offset, so that transposes, slices and broadcasts reach a kernel without a
// copy. The contract is small on purpose — allocation and copies,
// elementwise and broadcast arithmetic, reductions, batched matrix products,
// convolution and pooling, softmax and cross-entropy, normalisation,
// dropout, gathers and scatters — and every method returns an error, so a
// backend may leave a kernel out by returning ErrUnimplemented (embed
// Unimplemented to start from nothing); the tensor package then falls back
// to a composition of other kernels where one exists.
//
// # Optional kernels
//
// Some kernels exist only to save passes over memory and are optional
// interfaces, found with a type assertion: FusedSGD and FusedAdamW (an
// optimizer update in one pass), FusedBatchNormReLU (batch normalisation
// with a ReLU applied as the output is written, and the gradient masked as
// it is read). The activation gradients among the BinaryOps (ReLUGrad …
// SigmoidGrad) may likewise return ErrUnimplemented.
//
// # Types
//
// DType lists the element types (Float32 for compute, Float64 for gradient
// checks, Float16 and BFloat16 for storage, Int32, Int64, Uint8, Bool).
// Shape is a list of extents. Parameters of the heavier kernels come in
// small structs (ConvParams, PoolParams, NormParams, ...) whose fields carry
// PyTorch's meaning.
//
// # Registry
//
// Backends register under a name at init (Register) and are opened on
// first use (Get). The CPU backend registers as "cpu"; a GPU backend returns
// an error from its Factory when no device is present, so programs that
// import it still build and run everywhere.
//
// # Conformance
//
// Every backend runs the suite in backend/backendtest, which checks each
// kernel against a float64 reference.
package backend
