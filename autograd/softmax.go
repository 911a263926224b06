package autograd

import "github.com/flockml/flock/tensor"

// Softmax returns y = e^x / Σ e^x along axis. Its gradient is
// ∂L/∂x = y·(G − Σ G·y), computed from the saved output.
func Softmax(x *Var, axis int) *Var { return softmax("Softmax", x, axis, false) }

// LogSoftmax returns y = x − log Σ e^x along axis. Its gradient is
// ∂L/∂x = G − e^y·Σ G, computed from the saved output.
func LogSoftmax(x *Var, axis int) *Var { return softmax("LogSoftmax", x, axis, true) }

func softmax(op string, x *Var, axis int, log bool) *Var {
	axis = x.Value.Axis(op, axis)
	var y *tensor.Tensor
	if log {
		y = x.Value.LogSoftmax(axis)
	} else {
		y = x.Value.Softmax(axis)
	}
	return Record(op, y, []*Var{x}, []*tensor.Tensor{y},
		func(ctx *Context, g *tensor.Tensor) []*tensor.Tensor {
			return []*tensor.Tensor{tensor.SoftmaxBackward(ctx.Saved[0], g, axis, log)}
		})
}
