package gossip

import (
	"fmt"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// flatModel holds a model's trainable parameters end to end in one
// buffer on the Comm's device (dist.DeviceOf), so that a whole model goes
// out in one message and is averaged in one pass. When the Comm can take
// every parameter where it lies (dist.Holds) its Value is a view of flat
// for good (inPlace); otherwise gather and scatter copy between the
// parameters and flat around each exchange.
type flatModel struct {
	params  []nn.NamedParameter // those that require a gradient
	flat    *tensor.Tensor
	views   []*tensor.Tensor // flat's parts in the parameters' shapes
	inPlace bool
}

// collect takes the parameters that require a gradient and returns their
// bytes; who prefixes its error when there is none.
func (f *flatModel) collect(params []nn.NamedParameter, who string) (int64, error) {
	var n int64
	for _, p := range params {
		if p.Param.RequiresGrad() {
			f.params = append(f.params, p)
			n += int64(p.Param.Value.NumElements() * p.Param.Value.DType().Size())
		}
	}
	if len(f.params) == 0 {
		return 0, fmt.Errorf("%s: the model has no parameter that requires a gradient", who)
	}
	return n, nil
}

// layout allocates flat and its views for f.params where c takes its
// operands (the host for a nil c) and returns each parameter's number of
// elements; who prefixes its errors.
func (f *flatModel) layout(c dist.Comm, who string) ([]int, error) {
	dt := f.params[0].Param.Value.DType()
	n := 0
	f.inPlace = true
	sizes := make([]int, len(f.params))
	for i, p := range f.params {
		v := p.Param.Value
		if v.DType() != dt {
			return nil, fmt.Errorf("%s: parameter %s is %v, %s is %v (one dtype per model)", who, p.Name, v.DType(), f.params[0].Name, dt)
		}
		f.inPlace = f.inPlace && dist.Holds(c, v)
		sizes[i] = v.NumElements()
		n += sizes[i]
	}
	f.flat = tensor.Zeros(tensor.Shape{n}, tensor.Of(dt), tensor.On(dist.DeviceOf(c)))
	off := 0
	for i, p := range f.params {
		part := f.flat.Slice(0, off, off+sizes[i])
		view := part.View(p.Param.Value.Shape()...)
		part.Release()
		view.CopyFrom(p.Param.Value)
		f.views = append(f.views, view)
		if f.inPlace {
			p.Param.Value.Release()
			p.Param.Value = view.Retain()
		}
		off += sizes[i]
	}
	return sizes, nil
}

// gather brings the parameters' current values into flat.
func (f *flatModel) gather() {
	if !f.inPlace {
		for i, p := range f.params {
			f.views[i].CopyFrom(p.Param.Value)
		}
	}
}

// scatter puts flat's values back into the parameters.
func (f *flatModel) scatter() {
	if !f.inPlace {
		for i, p := range f.params {
			p.Param.Value.CopyFrom(f.views[i])
		}
	}
}

// release frees flat and its views.
func (f *flatModel) release() {
	for _, v := range f.views {
		v.Release()
	}
	f.views = nil
	if f.flat != nil {
		f.flat.Release()
		f.flat = nil
	}
}
