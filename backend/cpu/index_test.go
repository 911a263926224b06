package cpu

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flockml/flock/backend"
)

// denseView returns a contiguous view of a new buffer of c holding vals
// converted to dt.
func denseView(t *testing.T, c *Backend, dt backend.DType, shape backend.Shape, vals []float64) backend.View {
	t.Helper()
	buf, err := c.Alloc(max(shape.NumElements(), 1) * dt.Size())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Free(buf) })
	v := backend.Contiguous(buf, dt, shape)
	for i, x := range vals {
		switch dt {
		case backend.Float32:
			F32(v)[i] = float32(x)
		case backend.Float64:
			F64(v)[i] = x
		case backend.Int32:
			I32(v)[i] = int32(x)
		case backend.Int64:
			I64(v)[i] = int64(x)
		}
	}
	return v
}

// wantError fails unless err mentions each of words.
func wantError(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func TestIndexErrorsNameTheIndex(t *testing.T) {
	t.Parallel()
	c := New()
	f32 := backend.Float32
	x := denseView(t, c, f32, backend.Shape{3, 4}, nil)
	idx2 := denseView(t, c, backend.Int64, backend.Shape{2, 2}, []float64{0, 1, 2, 7})
	idx1 := denseView(t, c, backend.Int32, backend.Shape{3}, []float64{0, -2, 1})
	wantError(t, "Gather", c.Gather(denseView(t, c, f32, backend.Shape{2, 2}, nil), x, idx2, 1),
		"cpu: gather", "index 7", "[1 1]", "[0, 4)")
	wantError(t, "ScatterAdd", c.ScatterAdd(x, idx2, denseView(t, c, f32, backend.Shape{2, 2}, nil), 1),
		"cpu: scatter_add", "index 7")
	wantError(t, "IndexSelect", c.IndexSelect(denseView(t, c, f32, backend.Shape{3, 3}, nil), x, idx1, 1),
		"cpu: index_select", "index -2", "[1]")
	wantError(t, "IndexAdd", c.IndexAdd(x, idx1, denseView(t, c, f32, backend.Shape{3, 3}, nil), 1),
		"cpu: index_add", "index -2")
	for i, v := range F32(x)[:12] {
		if v != 0 {
			t.Fatalf("a failed accumulation changed dst: element %d = %v", i, v)
		}
	}
	bcast := backend.View{Buf: x.Buf, DType: f32, Shape: backend.Shape{3, 4}, Strides: []int{0, 1}}
	wantError(t, "broadcast dst", c.IndexAdd(bcast, idx1, denseView(t, c, f32, backend.Shape{3, 3}, nil), 1),
		"cpu: index_add", "stride 0")
}

// TestScatterParallel runs accumulations large enough to be split between
// goroutines, both across rows (axis innermost) and within rows (axis
// outer), against a sequential sum; under -race it also checks that no two
// goroutines write one element.
func TestScatterParallel(t *testing.T) {
	t.Parallel()
	c := New()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		dst, index backend.Shape
		axis       int
	}{
		{backend.Shape{300, 64}, backend.Shape{2000, 64}, 0},
		{backend.Shape{64, 300}, backend.Shape{64, 2000}, 1},
		{backend.Shape{8, 50, 40}, backend.Shape{8, 300, 40}, 1},
	} {
		n := tc.index.NumElements()
		iv, sv := make([]float64, n), make([]float64, n)
		for i := range iv {
			iv[i] = float64(rng.IntN(tc.dst[tc.axis]))
			sv[i] = float64(rng.IntN(100))
		}
		dst := denseView(t, c, backend.Int64, tc.dst, make([]float64, tc.dst.NumElements()))
		index := denseView(t, c, backend.Int32, tc.index, iv)
		src := denseView(t, c, backend.Int64, tc.index, sv)
		if err := c.ScatterAdd(dst, index, src, tc.axis); err != nil {
			t.Fatal(err)
		}
		want := make([]int64, tc.dst.NumElements())
		outer, inner := tc.index[:tc.axis].NumElements(), tc.index[tc.axis+1:].NumElements()
		k := tc.index[tc.axis]
		for o := range outer {
			for j := range k {
				for i := range inner {
					at := (o*k+j)*inner + i
					want[(o*tc.dst[tc.axis]+int(iv[at]))*inner+i] += int64(sv[at])
				}
			}
		}
		got := I64(dst)[:len(want)]
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("ScatterAdd %v into %v along %d: element %d = %d, want %d", tc.index, tc.dst, tc.axis, i, got[i], want[i])
			}
		}
	}
}
