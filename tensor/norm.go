package tensor

import (
	"errors"
	"fmt"

	"github.com/flockml/flock/backend"
)

// NormParams are the settings of BatchNorm: eps, the momentum of the running
// statistics (r ← (1−m)·r + m·batch, PyTorch's convention) and whether to
// use batch statistics (training) or the running ones.
type NormParams = backend.NormParams

// BatchNorm normalises x [N, C, ...] per channel:
//
//	y = (x − μ_c)/√(σ²_c + eps)·weight_c + bias_c.
//
// In training (p.Training) μ and σ² are the batch mean and biased variance
// over every axis but C; saveMean = μ and saveInvStd = 1/√(σ² + eps) [C] are
// returned for BatchNormBackward, and runningMean and runningVar [C], when
// given, are updated in place with the unbiased variance. Otherwise the
// running statistics (then required) normalise and saveMean and saveInvStd
// are nil. weight, bias, runningMean and runningVar may each be nil.
// Updating running statistics needs more than one value per channel.
func BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, p NormParams) (y, saveMean, saveInvStd *Tensor) {
	return batchNorm("BatchNorm", x, weight, bias, runningMean, runningVar, p, false)
}

// BatchNormReLU is BatchNorm followed by ReLU, max(·, 0), with BatchNorm's
// saved statistics: the pair of layers after most convolutions of a ResNet.
// Where the device has the fused kernel (backend.FusedBatchNormReLU) the
// output is written once; otherwise ReLU runs in place on BatchNorm's
// output.
func BatchNormReLU(x, weight, bias, runningMean, runningVar *Tensor, p NormParams) (y, saveMean, saveInvStd *Tensor) {
	return batchNorm("BatchNormReLU", x, weight, bias, runningMean, runningVar, p, true)
}

func batchNorm(op string, x, weight, bias, runningMean, runningVar *Tensor, p NormParams, relu bool) (y, saveMean, saveInvStd *Tensor) {
	floatOnly(op, x)
	if x.Dim() < 2 {
		panic(fmt.Sprintf("tensor: %s: input of shape %v; want [N, C, ...] (add a batch axis with Unsqueeze(0))", op, x.shape))
	}
	c := x.shape[1]
	params := []*Tensor{weight, bias, runningMean, runningVar}
	names := []string{"weight", "bias", "runningMean", "runningVar"}
	for i, t := range params {
		if t != nil {
			groupVector(op, names[i], x, t, c)
		}
	}
	if (runningMean == nil) != (runningVar == nil) {
		panic(fmt.Sprintf("tensor: %s: pass runningMean and runningVar together (or neither)", op))
	}
	if !p.Training && runningMean == nil {
		panic(fmt.Sprintf("tensor: %s: evaluation (Training false) needs runningMean and runningVar; pass them or normalise with batch statistics", op))
	}
	xc := x.Contiguous()
	defer xc.Release()
	w, b := contiguousOrNil(weight), contiguousOrNil(bias)
	defer w.Release()
	defer b.Release()
	// The running statistics are updated in place; a non-contiguous one is
	// updated through a contiguous copy written back afterwards.
	rm, rv := contiguousOrNil(runningMean), contiguousOrNil(runningVar)
	defer rm.Release()
	defer rv.Release()
	backMean := p.Training && runningMean != nil && !runningMean.IsContiguous()
	backVar := p.Training && runningVar != nil && !runningVar.IsContiguous()

	dev := x.Device()
	y = empty(dev, x.dtype, x.shape)
	if p.Training {
		saveMean = empty(dev, x.dtype, Shape{c})
		saveInvStd = empty(dev, x.dtype, Shape{c})
	}
	operands := nonNil(x, weight, bias, runningMean, runningVar)
	fused := false
	if f, ok := dev.(backend.FusedBatchNormReLU); relu && ok {
		err := f.BatchNormReLU(y.Raw(), rawOrZero(saveMean), rawOrZero(saveInvStd), xc.Raw(),
			rawOrZero(w), rawOrZero(b), rawOrZero(rm), rawOrZero(rv), p)
		if fused = !errors.Is(err, backend.ErrUnimplemented); fused {
			must(op, err, operands...)
		}
	}
	if !fused {
		must(op, dev.BatchNorm(y.Raw(), rawOrZero(saveMean), rawOrZero(saveInvStd), xc.Raw(),
			rawOrZero(w), rawOrZero(b), rawOrZero(rm), rawOrZero(rv), p), operands...)
		if relu {
			must(op, dev.Unary(backend.ReLU, y.Raw(), y.Raw(), 0), operands...)
		}
	}
	if backMean {
		runningMean.CopyFrom(rm)
	}
	if backVar {
		runningVar.CopyFrom(rv)
	}
	return y, saveMean, saveInvStd
}

// BatchNormBackward returns the gradients of BatchNorm with respect to x,
// weight and bias, from the upstream gradient dy and the saved statistics.
// With x̂ = (x − μ)·s and M values per channel:
//
//	dbias = Σ dy,  dweight = Σ dy·x̂,
//	dx = weight·s·(dy − dbias/M − x̂·dweight/M)   (p.Training),
//	dx = weight·s·dy                             (otherwise),
//
// where without training saveMean and saveInvStd are the running mean and
// 1/√(runningVar + eps) that normalised. dweight and dbias are nil when
// weight is nil.
func BatchNormBackward(dy, x, weight, saveMean, saveInvStd *Tensor, p NormParams) (dx, dweight, dbias *Tensor) {
	return batchNormBackward("BatchNormBackward", dy, nil, x, weight, saveMean, saveInvStd, p)
}

// BatchNormReLUBackward returns the gradients of BatchNormReLU with respect
// to x, weight and bias: those of BatchNorm for the gradient dy·[y > 0],
// where y is BatchNormReLU's output. The mask is applied as dy is read
// where the device has the fused kernel.
func BatchNormReLUBackward(dy, y, x, weight, saveMean, saveInvStd *Tensor, p NormParams) (dx, dweight, dbias *Tensor) {
	const op = "BatchNormReLUBackward"
	if y == nil {
		panic(fmt.Sprintf("tensor: %s: y, the output of BatchNormReLU, is required", op))
	}
	sameDevice(op, dy, y)
	sameDType(op, dy, y)
	if !y.shape.Equal(dy.shape) {
		panic(fmt.Sprintf("tensor: %s: dy and y differ in shape (%s)", op, describe(dy, y)))
	}
	return batchNormBackward(op, dy, y, x, weight, saveMean, saveInvStd, p)
}

func batchNormBackward(op string, dy, y, x, weight, saveMean, saveInvStd *Tensor, p NormParams) (dx, dweight, dbias *Tensor) {
	floatOnly(op, x)
	if x.Dim() < 2 {
		panic(fmt.Sprintf("tensor: %s: input of shape %v; want [N, C, ...]", op, x.shape))
	}
	sameDevice(op, dy, x)
	sameDType(op, dy, x)
	if !dy.shape.Equal(x.shape) {
		panic(fmt.Sprintf("tensor: %s: dy and x differ in shape (%s); pass the gradient of BatchNorm's output", op, describe(dy, x)))
	}
	if saveMean == nil || saveInvStd == nil {
		panic(fmt.Sprintf("tensor: %s: saveMean and saveInvStd are required (BatchNorm returns them in training)", op))
	}
	c := x.shape[1]
	groupVector(op, "saveMean", x, saveMean, c)
	groupVector(op, "saveInvStd", x, saveInvStd, c)
	if weight != nil {
		groupVector(op, "weight", x, weight, c)
	}
	xc, gc := x.Contiguous(), dy.Contiguous()
	defer xc.Release()
	defer gc.Release()
	w, sm, sis := contiguousOrNil(weight), saveMean.Contiguous(), saveInvStd.Contiguous()
	defer w.Release()
	defer sm.Release()
	defer sis.Release()
	dev := x.Device()
	dx = empty(dev, x.dtype, x.shape)
	if weight != nil {
		dweight = empty(dev, x.dtype, weight.shape)
		dbias = empty(dev, x.dtype, weight.shape)
	}
	operands := nonNil(dy, x, weight, saveMean, saveInvStd)
	g := gc
	if y != nil {
		if f, ok := dev.(backend.FusedBatchNormReLU); ok {
			yc := y.Contiguous()
			defer yc.Release()
			err := f.BatchNormReLUBackward(dx.Raw(), rawOrZero(dweight), rawOrZero(dbias), gc.Raw(), yc.Raw(), xc.Raw(),
				rawOrZero(w), sm.Raw(), sis.Raw(), p)
			if !errors.Is(err, backend.ErrUnimplemented) {
				must(op, err, operands...)
				return dx, dweight, dbias
			}
		}
		masked := ReLUGrad(gc, y)
		defer masked.Release()
		g = masked
	}
	must(op, dev.BatchNormBackward(dx.Raw(), rawOrZero(dweight), rawOrZero(dbias), g.Raw(), xc.Raw(),
		rawOrZero(w), sm.Raw(), sis.Raw(), p), operands...)
	return dx, dweight, dbias
}

// LayerNorm normalises each group of the last normSize elements of x (the
// product of x's trailing extents, like torch's normalized_shape):
//
//	y = (x − μ)/√(σ² + eps)·weight + bias,
//
// with μ and σ² the group's mean and biased variance. weight and bias hold
// normSize elements (any shape) and may be nil. mean and rstd = 1/√(σ² + eps)
// have x's shape without the normalised axes.
func LayerNorm(x, weight, bias *Tensor, normSize int, eps float64) (y, mean, rstd *Tensor) {
	const op = "LayerNorm"
	floatOnly(op, x)
	lead := layerNormLead(op, x, normSize)
	for i, t := range []*Tensor{weight, bias} {
		if t != nil {
			groupVector(op, []string{"weight", "bias"}[i], x, t, normSize)
		}
	}
	xc := x.Contiguous()
	defer xc.Release()
	w, b := contiguousOrNil(weight), contiguousOrNil(bias)
	defer w.Release()
	defer b.Release()
	dev := x.Device()
	y = empty(dev, x.dtype, x.shape)
	mean = empty(dev, x.dtype, lead)
	rstd = empty(dev, x.dtype, lead)
	must(op, dev.LayerNorm(y.Raw(), mean.Raw(), rstd.Raw(), xc.Raw(), rawOrZero(w), rawOrZero(b), normSize, eps), nonNil(x, weight, bias)...)
	return y, mean, rstd
}

// LayerNormBackward returns the gradients of LayerNorm with respect to x,
// weight and bias. With x̂ = (x − μ)·rstd and g = dy·weight per group,
//
//	dx = rstd·(g − mean(g) − x̂·mean(g·x̂)),
//	dweight = Σ_groups dy·x̂,  dbias = Σ_groups dy,
//
// dweight and dbias having weight's shape; they are nil when weight is nil.
func LayerNormBackward(dy, x, weight, mean, rstd *Tensor, normSize int) (dx, dweight, dbias *Tensor) {
	const op = "LayerNormBackward"
	floatOnly(op, x)
	sameDevice(op, dy, x)
	sameDType(op, dy, x)
	if !dy.shape.Equal(x.shape) {
		panic(fmt.Sprintf("tensor: %s: dy and x differ in shape (%s); pass the gradient of LayerNorm's output", op, describe(dy, x)))
	}
	lead := layerNormLead(op, x, normSize)
	rows := lead.NumElements()
	for i, t := range []*Tensor{mean, rstd} {
		name := []string{"mean", "rstd"}[i]
		if t == nil {
			panic(fmt.Sprintf("tensor: %s: %s is required (LayerNorm returns it)", op, name))
		}
		groupVector(op, name, x, t, rows)
	}
	if weight != nil {
		groupVector(op, "weight", x, weight, normSize)
	}
	xc, gc := x.Contiguous(), dy.Contiguous()
	defer xc.Release()
	defer gc.Release()
	w, mc, rc := contiguousOrNil(weight), mean.Contiguous(), rstd.Contiguous()
	defer w.Release()
	defer mc.Release()
	defer rc.Release()
	dev := x.Device()
	dx = empty(dev, x.dtype, x.shape)
	if weight != nil {
		dweight = empty(dev, x.dtype, weight.shape)
		dbias = empty(dev, x.dtype, weight.shape)
	}
	must(op, dev.LayerNormBackward(dx.Raw(), rawOrZero(dweight), rawOrZero(dbias), gc.Raw(), xc.Raw(),
		rawOrZero(w), mc.Raw(), rc.Raw(), normSize), nonNil(dy, x, weight, mean, rstd)...)
	return dx, dweight, dbias
}

// layerNormLead returns the shape of x without the fewest trailing axes
// whose extents multiply to normSize.
func layerNormLead(op string, x *Tensor, normSize int) Shape {
	if normSize <= 0 {
		panic(fmt.Sprintf("tensor: %s: normSize %d must be positive", op, normSize))
	}
	acc, k := 1, x.Dim()
	for k > 0 && acc < normSize {
		k--
		acc *= x.shape[k]
	}
	if acc != normSize {
		panic(fmt.Sprintf("tensor: %s: normSize %d is not the product of trailing extents of shape %v; it must cover whole trailing axes", op, normSize, x.shape))
	}
	return x.shape[:k].Clone()
}

// groupVector checks an operand of n elements with x's dtype and device.
func groupVector(op, name string, x, t *Tensor, n int) {
	sameDevice(op, x, t)
	if t.dtype != x.dtype {
		panic(fmt.Sprintf("tensor: %s: %s is %v but x is %v; convert it with Cast", op, name, t.dtype, x.dtype))
	}
	if t.NumElements() != n {
		panic(fmt.Sprintf("tensor: %s: %s of shape %v for x of shape %v; want %d elements", op, name, t.shape, x.shape, n))
	}
}

// contiguousOrNil is Contiguous for an optional operand.
func contiguousOrNil(t *Tensor) *Tensor {
	if t == nil {
		return nil
	}
	return t.Contiguous()
}

// rawOrZero is Raw for an optional operand: the zero View stands for nil.
func rawOrZero(t *Tensor) backend.View {
	if t == nil {
		return backend.View{}
	}
	return t.Raw()
}

// nonNil returns the operands that are present, for error messages.
func nonNil(ts ...*Tensor) []*Tensor {
	out := ts[:0:0]
	for _, t := range ts {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}
