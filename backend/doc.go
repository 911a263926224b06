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
// backend may report a kernel it lacks with ErrUnimplemented (embed
// Unimplemented to start from nothing).
//
// # Kernels a backend may leave out
//
// The tensor package falls back to a composition of other kernels for
// exactly these, when a backend lacks them (the interface is not
// implemented, or its method returns ErrUnimplemented):
//
//   - FusedSGD and FusedAdamW, an optimizer update in one pass: package
//     optim then composes the update from elementwise ops (tensor's
//     FusedSGDStep and FusedAdamWStep report false).
//   - FusedBatchNormReLU, batch normalisation with a ReLU applied as the
//     output is written and the gradient masked as it is read: BatchNorm
//     then Unary ReLU forward, the ReLUGrad mask then BatchNormBackward.
//   - The activation gradients among the BinaryOps (ReLUGrad, GELUGrad,
//     GELUTanhGrad, TanhGrad, SigmoidGrad): composed from Where, Binary and
//     Unary ops and the forward functions.
//
// Every other kernel of Backend is required by a training step of flock's
// models (or by evaluation, initialisation and checkpointing): tensor does
// not compose it, and an ErrUnimplemented from it becomes a panic naming
// the kernel and the operands, like any other kernel error. For instance the
// CUDA backend without cuBLAS multiplies float32 and float64 matrices with
// its own kernel but returns ErrUnimplemented for products in other or mixed
// dtypes (half precision, autocast), which then fail.
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
