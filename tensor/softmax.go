package tensor

import "fmt"

// Softmax returns e^x / Σ e^x along axis (negative counts from the end),
// computed stably by shifting each line by its maximum. A 0-dimensional t
// takes axis 0 or −1 and gives 1.
func (t *Tensor) Softmax(axis int) *Tensor { return t.softmax("Softmax", axis, false) }

// LogSoftmax returns x − log Σ e^x along axis, computed stably by shifting
// each line by its maximum.
func (t *Tensor) LogSoftmax(axis int) *Tensor { return t.softmax("LogSoftmax", axis, true) }

func (t *Tensor) softmax(op string, axis int, log bool) *Tensor {
	floatOnly(op, t)
	if t.Dim() == 0 {
		if axis != 0 && axis != -1 {
			panic(fmt.Sprintf("tensor: %s: axis %d out of range for a 0-dimensional tensor", op, axis))
		}
		v := t.Reshape(1)
		defer v.Release()
		y := v.softmax(op, 0, log)
		defer y.Release()
		return y.Reshape()
	}
	a := t.axis(op, axis)
	x := t.Contiguous()
	defer x.Release()
	out := empty(x.Device(), x.dtype, x.shape)
	must(op, x.Device().Softmax(out.Raw(), x.Raw(), a, log), t)
	return out
}

// SoftmaxBackward returns the gradient with respect to the input of Softmax
// (log false) or LogSoftmax (log true) along axis, from the forward output y
// and the gradient dy of the same shape:
//
//	softmax:     dx = y·(dy − Σ dy·y)
//	log-softmax: dx = dy − e^y·Σ dy
//
// with the sums along axis.
func SoftmaxBackward(y, dy *Tensor, axis int, log bool) *Tensor {
	const op = "SoftmaxBackward"
	sameDevice(op, y, dy)
	sameDType(op, y, dy)
	floatOnly(op, y)
	if !y.shape.Equal(dy.shape) {
		panic(fmt.Sprintf("tensor: %s: y and dy differ in shape (%s); pass the gradient of the softmax output", op, describe(y, dy)))
	}
	if y.Dim() == 0 {
		if axis != 0 && axis != -1 {
			panic(fmt.Sprintf("tensor: %s: axis %d out of range for a 0-dimensional tensor", op, axis))
		}
		yv, gv := y.Reshape(1), dy.Reshape(1)
		defer yv.Release()
		defer gv.Release()
		dx := SoftmaxBackward(yv, gv, 0, log)
		defer dx.Release()
		return dx.Reshape()
	}
	a := y.axis(op, axis)
	yc, gc := y.Contiguous(), dy.Contiguous()
	defer yc.Release()
	defer gc.Release()
	dx := empty(y.Device(), y.dtype, y.shape)
	must(op, y.Device().SoftmaxBackward(dx.Raw(), yc.Raw(), gc.Raw(), a, log), y, dy)
	return dx
}
