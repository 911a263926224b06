// Package tensor is flock's n-dimensional array: a dtype, a shape, strides
// and an element offset into reference-counted storage on a device.
//
// # Model
//
// Every op runs eagerly on the device of its operands by calling that
// backend's kernels (package backend); the default device is the CPU. Views
// — Reshape/View, Slice, Select, Transpose/Permute, BroadcastTo/Expand,
// Squeeze/Unsqueeze — share storage and copy nothing; Contiguous copies only
// when the layout requires it. Binary ops broadcast under NumPy's rules.
// Fused ops (the activation gradients such as ReLUGrad and GELUGrad,
// BatchNormReLU, FusedSGDStep) use a device's one-pass kernel where it has
// one and compose other ops where it does not.
//
// # Memory
//
// Storage is reference counted: every function that returns a *Tensor
// returns a new reference, which the caller drops with Release; views hold
// references of their own, and the memory returns to the device's pool when
// the last one is released. A tensor that is dropped without Release is
// reclaimed by the garbage collector on the CPU, but deterministic code (and
// any GPU code) releases explicitly. Inputs are never consumed by an op.
//
// # Errors
//
// Shape, dtype and device mistakes are programming errors: they panic with a
// message naming the op, the operands' dtypes, shapes and devices, and the
// fix (mix devices with To, dtypes with Cast).
//
// # Randomness
//
// Generator draws from the counter-based Philox4x32-10 stream: element i of
// a draw depends only on (seed, offset+i), so results are the same on any
// number of threads and on any device.
package tensor
