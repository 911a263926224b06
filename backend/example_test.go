package backend_test

import (
	"fmt"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu" // registers "cpu"
)

// Kernels called directly: add a row vector to every row of a matrix by
// giving it a zero stride, then sum everything.
func Example() {
	b, err := backend.Get("cpu")
	if err != nil {
		panic(err)
	}
	alloc := func(shape backend.Shape) backend.View {
		buf, err := b.Alloc(4 * shape.NumElements())
		if err != nil {
			panic(err)
		}
		return backend.Contiguous(buf, backend.Float32, shape)
	}
	m := alloc(backend.Shape{2, 3})
	copy(cpu.F32(m), []float32{1, 2, 3, 4, 5, 6})
	row := alloc(backend.Shape{3})
	copy(cpu.F32(row), []float32{10, 20, 30})

	row.Shape, row.Strides = backend.Shape{2, 3}, []int{0, 1} // broadcast over rows
	if err := b.Binary(backend.Add, m, m, row); err != nil {
		panic(err)
	}
	total := alloc(backend.Shape{})
	if err := b.Reduce(backend.Sum, total, m, []int{0, 1}, backend.ReduceParams{}); err != nil {
		panic(err)
	}
	fmt.Println(cpu.F32(m)[:6], cpu.F32(total)[0])
	// Output: [11 22 33 14 25 36] 141
}
