package cpu

import (
	"testing"

	"github.com/flockml/flock/backend"
)

func benchView(b *testing.B, c *Backend, dt backend.DType, shape backend.Shape) backend.View {
	buf, err := c.Alloc(shape.NumElements() * dt.Size())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Free(buf) })
	v := backend.Contiguous(buf, dt, shape)
	if err := c.Fill(v, 0.5); err != nil {
		b.Fatal(err)
	}
	return v
}

// transposed returns v (2-D) with its axes swapped.
func transposed(v backend.View) backend.View {
	v.Shape = backend.Shape{v.Shape[1], v.Shape[0]}
	v.Strides = []int{v.Strides[1], v.Strides[0]}
	return v
}

const benchN = 1 << 20

func BenchmarkElementwise(b *testing.B) {
	c := New()
	x := benchView(b, c, backend.Float32, backend.Shape{1024, 1024})
	y := benchView(b, c, backend.Float32, backend.Shape{1024, 1024})
	dst := benchView(b, c, backend.Float32, backend.Shape{1024, 1024})
	row := benchView(b, c, backend.Float32, backend.Shape{1, 1024})
	row.Shape, row.Strides = backend.Shape{1024, 1024}, []int{0, 1}
	mask := benchView(b, c, backend.Bool, backend.Shape{1024, 1024})
	cases := []struct {
		name string
		fn   func() error
	}{
		{"Add", func() error { return c.Binary(backend.Add, dst, x, y) }},
		{"AddInPlace", func() error { return c.Binary(backend.Add, x, x, y) }},
		{"AddBroadcastRow", func() error { return c.Binary(backend.Add, dst, x, row) }},
		{"AddTransposed", func() error { return c.Binary(backend.Add, dst, x, transposed(y)) }},
		{"Lt", func() error { return c.Binary(backend.Lt, mask, x, y) }},
		{"GELU", func() error { return c.Unary(backend.GELU, dst, x, 0) }},
		{"MulScalar", func() error { return c.Unary(backend.MulScalar, dst, x, 2) }},
		{"Copy", func() error { return c.Copy(dst, x) }},
		{"CopyTransposed", func() error { return c.Copy(dst, transposed(x)) }},
		{"Where", func() error { return c.Where(dst, mask, x, y) }},
		{"RandomNormal", func() error {
			return c.Random(dst, backend.RandomParams{Kind: backend.Normal, B: 1, Seed: 1})
		}},
		{"Dropout", func() error { return c.Dropout(dst, mask, x, 0.1, 1, 0) }},
	}
	for _, cs := range cases {
		b.Run(cs.name, func(b *testing.B) {
			b.SetBytes(benchN * 4)
			for b.Loop() {
				if err := cs.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReduce(b *testing.B) {
	c := New()
	x := benchView(b, c, backend.Float32, backend.Shape{1024, 1024})
	all := benchView(b, c, backend.Float32, backend.Shape{})
	vec := benchView(b, c, backend.Float32, backend.Shape{1024})
	idx := benchView(b, c, backend.Int64, backend.Shape{1024})
	small := benchView(b, c, backend.Float32, backend.Shape{benchN / 4})
	cases := []struct {
		name string
		fn   func() error
	}{
		{"SumAll", func() error { return c.Reduce(backend.Sum, all, x, []int{0, 1}, backend.ReduceParams{}) }},
		{"SumRows", func() error { return c.Reduce(backend.Sum, vec, x, []int{1}, backend.ReduceParams{}) }},
		{"SumColumns", func() error { return c.Reduce(backend.Sum, vec, x, []int{0}, backend.ReduceParams{}) }},
		{"VarRows", func() error { return c.Reduce(backend.Var, vec, x, []int{1}, backend.ReduceParams{}) }},
		{"SumRowsOf4", func() error {
			v := x
			v.Shape, v.Strides = backend.Shape{benchN / 4, 4}, []int{4, 1}
			return c.Reduce(backend.Sum, small, v, []int{1}, backend.ReduceParams{})
		}},
		{"ArgMaxRows", func() error { return c.Reduce(backend.ArgMax, idx, x, []int{1}, backend.ReduceParams{}) }},
	}
	for _, cs := range cases {
		b.Run(cs.name, func(b *testing.B) {
			b.SetBytes(benchN * 4)
			for b.Loop() {
				if err := cs.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
