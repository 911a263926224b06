package train

import (
	"fmt"
	"math"
	"slices"

	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
)

// Trainable returns the parameters of params that require a gradient, the
// ones a strategy averages, and their bytes. It fails when there is none.
func Trainable(params []nn.NamedParameter) ([]nn.NamedParameter, int64, error) {
	var out []nn.NamedParameter
	var n int64
	for _, p := range params {
		if p.Param.RequiresGrad() {
			out = append(out, p)
			n += int64(p.Param.Value.NumElements() * p.Param.Value.DType().Size())
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("the model has no parameter that requires a gradient")
	}
	return out, n, nil
}

// FlatParams holds a model's trainable parameters end to end in one buffer
// on a Comm's device (dist.DeviceOf), so that a whole model is averaged or
// sent in one operation (llm.c's layout: one allocation, one all-reduce).
// Further tensors of the same dtype (optimizer state that rides along) may
// follow the parameters, and a tail of extra elements after them carries
// small values in the same collective.
//
// When the Comm can take every parameter where it lies (dist.Holds: host
// tensors for a host transport, tensors on its GPU for NCCL), the
// parameters move into Flat for good — their Vars' values become views of
// it — and Gather and Scatter copy only the extra tensors; otherwise they
// copy everything between the tensors and Flat around each exchange.
type FlatParams struct {
	// Params are the parameters laid out, in order.
	Params []nn.NamedParameter
	// Flat is [Elements + tail], contiguous on the Comm's device.
	Flat *tensor.Tensor

	tensors []*tensor.Tensor // the parameters' values, then the extra tensors
	views   []*tensor.Tensor // Flat's parts in tensors' shapes
	sizes   []int
	nParam  int // elements of the parameters' part
	inPlace bool
}

// NewFlatParams lays out params (which should require gradients), then
// extra, then tail zero elements, in one buffer where c takes its operands
// (the host for a nil c). Every tensor must have the first parameter's
// dtype.
func NewFlatParams(c dist.Comm, params []nn.NamedParameter, extra []*tensor.Tensor, tail int) (*FlatParams, error) {
	if len(params) == 0 {
		return nil, fmt.Errorf("no parameter to lay out")
	}
	f := &FlatParams{Params: params, inPlace: true}
	dt := params[0].Param.Value.DType()
	n := 0
	for i, p := range params {
		v := p.Param.Value
		if v.DType() != dt {
			return nil, fmt.Errorf("parameter %s is %v, %s is %v (one dtype per model)", p.Name, v.DType(), params[0].Name, dt)
		}
		f.inPlace = f.inPlace && dist.Holds(c, v)
		f.tensors = append(f.tensors, v)
		f.sizes = append(f.sizes, v.NumElements())
		n += f.sizes[i]
	}
	f.nParam = n
	for i, t := range extra {
		if t.DType() != dt {
			return nil, fmt.Errorf("tensor %d laid out after the parameters is %v, the parameters %v", i, t.DType(), dt)
		}
		f.tensors = append(f.tensors, t)
		f.sizes = append(f.sizes, t.NumElements())
		n += t.NumElements()
	}
	f.Flat = tensor.Zeros(tensor.Shape{n + tail}, tensor.Of(dt), tensor.On(dist.DeviceOf(c)))
	off := 0
	for i, t := range f.tensors {
		part := f.Flat.Slice(0, off, off+f.sizes[i])
		view := part.View(t.Shape()...)
		part.Release()
		view.CopyFrom(t)
		f.views = append(f.views, view)
		if f.inPlace && i < len(params) {
			p := params[i].Param
			p.Value.Release()
			p.Value = view.Retain()
			f.tensors[i] = p.Value
		}
		off += f.sizes[i]
	}
	return f, nil
}

// Elements returns the number of elements laid out before the tail.
func (f *FlatParams) Elements() int { return f.nParam + f.extraElements() }

// ParamElements returns the number of the parameters' elements, Flat's
// first.
func (f *FlatParams) ParamElements() int { return f.nParam }

// Sizes returns the parameters' numbers of elements, in order.
func (f *FlatParams) Sizes() []int { return slices.Clone(f.sizes[:len(f.Params)]) }

func (f *FlatParams) extraElements() int {
	n := 0
	for _, s := range f.sizes[len(f.Params):] {
		n += s
	}
	return n
}

// Tail returns Flat's elements after the laid-out tensors (a new
// reference the caller releases).
func (f *FlatParams) Tail() *tensor.Tensor {
	return f.Flat.Slice(0, f.Elements(), f.Flat.NumElements())
}

// Gather brings the current values of the parameters and the extra
// tensors into Flat.
func (f *FlatParams) Gather() { f.gather(len(f.tensors)) }

// Scatter puts Flat's values back into the parameters and the extra
// tensors.
func (f *FlatParams) Scatter() { f.scatter(len(f.tensors)) }

// GatherParams and ScatterParams are Gather and Scatter for the parameters
// alone.
func (f *FlatParams) GatherParams()  { f.gather(len(f.Params)) }
func (f *FlatParams) ScatterParams() { f.scatter(len(f.Params)) }

func (f *FlatParams) gather(n int) {
	for i, t := range f.tensors[:n] {
		if !f.inPlace || i >= len(f.Params) {
			f.views[i].CopyFrom(t)
		}
	}
}

func (f *FlatParams) scatter(n int) {
	for i, t := range f.tensors[:n] {
		if !f.inPlace || i >= len(f.Params) {
			t.CopyFrom(f.views[i])
		}
	}
}

// Release frees Flat and its views; parameters that live in Flat keep
// their storage through their own references.
func (f *FlatParams) Release() {
	for _, v := range f.views {
		v.Release()
	}
	f.views = nil
	if f.Flat != nil {
		f.Flat.Release()
		f.Flat = nil
	}
}

// ConsensusSample is where the consensus distance ‖θ_k − θ̄‖ / ‖θ̄‖ of a
// model is measured: positions in its parameters laid end to end and the
// weight of each in the sums of squares. Every strategy that reports
// CommStats.Consensus measures it on the same sample, so that the figure
// means the same thing whoever reports it.
//
// A model of at most m parameters (the sample's size) is measured at every
// position: a strategy that sends its sample takes a small m
// (ConsensusSampleSize), one that reads it locally can afford a large one.
// Otherwise the sample is stratified by tensor, as distances differ far
// more between layers than within one: a tensor of at most sampleFloor
// elements (a bias, a normalisation's scale) is read whole, a larger one
// gets sampleFloor positions plus its share, in proportion to its size, of
// what is left of m; a tensor's positions are evenly spread through it
// and weighted by its size over their count (within a few percent of the
// exact distance: 6% on an MLP of 83,460 parameters).
type ConsensusSample struct {
	// Index holds the positions (Int64, on the flat buffer's device).
	Index  *tensor.Tensor
	weight []float64
}

// ConsensusSampleSize is the size of a sample that travels in a
// collective: 8192 positions, 32 KiB in float32 (more for a model of over
// 128 tensors).
const ConsensusSampleSize = 1 << 13

const sampleFloor = 64

// NewConsensusSample returns the sample of about m positions of
// parameters of the given sizes, laid end to end, with its index on dev.
func NewConsensusSample(sizes []int, m int, dev tensor.Device) *ConsensusSample {
	idx, w := samplePositions(sizes, m)
	return &ConsensusSample{Index: tensor.FromSlice(idx, tensor.Shape{len(idx)}, tensor.On(dev)), weight: w}
}

// Len returns the number of positions.
func (c *ConsensusSample) Len() int { return len(c.weight) }

// Read returns flat's values at the sampled positions.
func (c *ConsensusSample) Read(flat *tensor.Tensor) []float64 {
	sel := tensor.IndexSelect(flat, 0, c.Index)
	defer sel.Release()
	return sel.Float64s()
}

// Distance returns ‖x − x̄‖/‖x̄‖ over the sampled positions, x and x̄ as
// Read returns them.
func (c *ConsensusSample) Distance(x, bar []float64) float64 {
	var d2, n2 float64
	for i, v := range x {
		e := v - bar[i]
		d2 += c.weight[i] * e * e
		n2 += c.weight[i] * bar[i] * bar[i]
	}
	if n2 == 0 {
		return 0
	}
	return math.Sqrt(d2 / n2)
}

// Release frees the index.
func (c *ConsensusSample) Release() {
	if c.Index != nil {
		c.Index.Release()
		c.Index = nil
	}
}

// samplePositions returns the positions and weights of ConsensusSample.
func samplePositions(sizes []int, m int) ([]int64, []float64) {
	total := 0
	for _, s := range sizes {
		total += s
	}
	counts := slices.Clone(sizes)
	if total > m {
		left, rest := m, 0
		for i, s := range sizes {
			counts[i] = min(s, sampleFloor)
			left -= counts[i]
			rest += s - counts[i]
		}
		for i, s := range sizes {
			if left > 0 && rest > 0 {
				counts[i] += int(math.Round(float64(left) * float64(s-counts[i]) / float64(rest)))
			}
		}
	}
	var idx []int64
	var w []float64
	off := 0
	for i, s := range sizes {
		k := counts[i]
		for j := range k {
			idx = append(idx, int64(off+int((int64(2*j+1)*int64(s))/int64(2*k))))
			w = append(w, float64(s)/float64(k))
		}
		off += s
	}
	return idx, w
}
