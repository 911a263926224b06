// Package autograd is flock's reverse-mode automatic differentiation, in the
// eager style of PyTorch.
//
// # Model
//
// A Var wraps a tensor. Leaves are made by the user — Param for trainable
// parameters, Const for inputs — and every op (Add, MatMul, Conv2d,
// CrossEntropy, ...) computes its result at once and, when an input requires
// a gradient, records a node: the inputs, the tensors its gradient formula
// needs, and the formula. Backward walks the recorded graph from a scalar
// back to the leaves, running each node once its output gradient is
// complete, and accumulates into each leaf's Grad.
//
// # Gradient formulas
//
// Formulas live with their ops, one file per family (elementwise.go,
// reduce.go, shape.go, matmul.go, conv.go, softmax.go, loss.go, norm.go,
// dropout.go, index.go), and are written with tensor ops, so they run on any
// backend. Record is the one way a node is made; code outside the package
// adds ops with it too. Gradcheck compares any op's gradients with float64
// central differences.
//
// # Memory
//
// A node holds references to what it saved until it has run; Backward then
// releases them and unlinks the node, so a graph is traversed once (a second
// Backward through it panics). Leaves keep their gradients until ZeroGrad.
// A Var owns its value; Release frees it.
//
// # Hooks
//
// OnGradReady registers a function that runs as soon as a leaf's gradient is
// final within a backward pass — while the rest of the pass still runs —
// which is where data-parallel training starts the all-reduce of a bucket.
//
// # Grad mode
//
// NoGrad runs a function with recording off on the calling goroutine (other
// goroutines, such as in-process workers, are unaffected). Detach makes a
// leaf that shares a value but not its history.
package autograd
