package train_test

import (
	"math"
	"slices"
	"testing"

	"github.com/flockml/flock/autograd"
	"github.com/flockml/flock/dist"
	"github.com/flockml/flock/nn"
	"github.com/flockml/flock/tensor"
	"github.com/flockml/flock/train"
)

// TestFlatParams checks that on a host Comm the parameters live in the
// flat buffer (a write to it is a write to them), that extra tensors are
// copied in by Gather and out by Scatter, and that the tail follows them.
func TestFlatParams(t *testing.T) {
	w := autograd.Param(tensor.FromSlice([]float32{1, 2, 3, 4}, tensor.Shape{2, 2}))
	b := autograd.Param(tensor.FromSlice([]float32{5}, tensor.Shape{1}))
	frozen := autograd.Const(tensor.FromSlice([]float32{9}, tensor.Shape{1}))
	params, bytes, err := train.Trainable([]nn.NamedParameter{{Name: "w", Param: w}, {Name: "frozen", Param: frozen}, {Name: "b", Param: b}})
	if err != nil || len(params) != 2 || bytes != 20 {
		t.Fatalf("Trainable: %d parameters, %d bytes, %v; want w and b, 20 bytes", len(params), bytes, err)
	}
	state := tensor.FromSlice([]float32{7, 8}, tensor.Shape{2})
	f, err := train.NewFlatParams(dist.NewLocal(1)[0], params, []*tensor.Tensor{state}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	if got := f.Flat.Float32s(); f.Elements() != 7 || f.ParamElements() != 5 || len(got) != 9 {
		t.Fatalf("flat %v: %d elements, %d of parameters", got, f.Elements(), f.ParamElements())
	}
	f.Flat.Fill(0.5)
	if got := w.Value.Float32s(); got[0] != 0.5 || b.Value.Float32s()[0] != 0.5 {
		t.Errorf("the parameters %v, %v do not live in the flat buffer", got, b.Value.Float32s())
	}
	if state.Float32s()[0] != 7 {
		t.Errorf("the optimizer state changed before Scatter")
	}
	f.Scatter()
	if state.Float32s()[1] != 0.5 {
		t.Errorf("Scatter left the state at %v", state.Float32s())
	}
	state.Fill(3)
	f.Gather()
	tail := f.Tail()
	defer tail.Release()
	if got := f.Flat.Float32s(); got[5] != 3 || got[6] != 3 || tail.NumElements() != 2 {
		t.Errorf("after Gather: flat %v, tail of %d", got, tail.NumElements())
	}
}

// TestConsensusSample checks the distance against one computed here: at
// every position for a model no larger than the sample, within 10% on a
// stratified sample of a model 16 times larger whose layers drift apart
// by different amounts.
func TestConsensusSample(t *testing.T) {
	for _, tt := range []struct {
		sizes []int
		m     int
		rtol  float64
	}{{[]int{300, 20, 100}, 512, 1e-12}, {[]int{16384, 64, 8192, 10, 8192}, 2048, 0.1}} {
		n := 0
		for _, s := range tt.sizes {
			n += s
		}
		bar, x := make([]float64, n), make([]float64, n)
		g := tensor.NewGenerator(5)
		nt := g.Randn(tensor.Shape{2 * n})
		noise := slices.Clone(nt.Float32s())
		nt.Release()
		off := 0
		for l, s := range tt.sizes {
			for i := range s {
				bar[off+i] = float64(noise[off+i])
				x[off+i] = bar[off+i] + float64(l+1)*0.1*float64(noise[n+off+i])
			}
			off += s
		}
		var d2, n2 float64
		for i := range x {
			d2 += (x[i] - bar[i]) * (x[i] - bar[i])
			n2 += bar[i] * bar[i]
		}
		want := math.Sqrt(d2 / n2)
		c := train.NewConsensusSample(tt.sizes, tt.m, tensor.DefaultDevice())
		xs := tensor.FromSlice(x, tensor.Shape{n})
		bs := tensor.FromSlice(bar, tensor.Shape{n})
		got := c.Distance(c.Read(xs), c.Read(bs))
		if math.Abs(got-want) > tt.rtol*want {
			t.Errorf("sizes %v, sample of %d: distance %v, want %v", tt.sizes, c.Len(), got, want)
		}
		xs.Release()
		bs.Release()
		c.Release()
	}
}
