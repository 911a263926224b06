package tensor

import "fmt"

// Dropout zeroes each element of x with probability p and scales the rest
// by 1/(1−p), so that the expectation is unchanged (Srivastava et al.,
// "Dropout: a simple way to prevent neural networks from overfitting",
// JMLR 2014). It returns y and the Bool mask of kept elements; y = x·mask/(1−p).
// The draws come from g's counter-based stream, so the same generator state
// gives the same mask on every device and thread count.
func Dropout(x *Tensor, p float64, g *Generator) (y, mask *Tensor) {
	floatOnly("Dropout", x)
	if !(p >= 0 && p <= 1) {
		panic(fmt.Sprintf("tensor: Dropout: probability %v outside [0, 1]", p))
	}
	if g == nil {
		panic("tensor: Dropout: nil Generator")
	}
	xc := x.Contiguous()
	defer xc.Release()
	dev := x.Device()
	y = empty(dev, x.dtype, x.shape)
	mask = empty(dev, Bool, x.shape)
	seed, off := g.Reserve(x.NumElements())
	must("Dropout", dev.Dropout(y.Raw(), mask.Raw(), xc.Raw(), p, seed, off), x)
	return y, mask
}
