package cpu_test

import (
	"fmt"

	"github.com/flockml/flock/backend"
	"github.com/flockml/flock/backend/cpu"
)

// A matrix product on the CPU backend, and its buffer pool at work: the
// second allocation of the same size reuses the freed buffer.
func Example() {
	c := cpu.New()
	alloc := func(shape backend.Shape) backend.View {
		buf, err := c.Alloc(4 * shape.NumElements())
		if err != nil {
			panic(err)
		}
		return backend.Contiguous(buf, backend.Float32, shape)
	}
	a, b, out := alloc(backend.Shape{2, 3}), alloc(backend.Shape{3, 2}), alloc(backend.Shape{2, 2})
	copy(cpu.F32(a), []float32{1, 2, 3, 4, 5, 6})
	copy(cpu.F32(b), []float32{1, 0, 0, 1, 1, 1})
	if err := c.MatMul(out, a, b, backend.MatMulParams{Alpha: 1}); err != nil {
		panic(err)
	}
	fmt.Println(cpu.F32(out)[:4])

	c.Free(out.Buf)
	again := alloc(backend.Shape{2, 2})
	hits, misses, _ := c.PoolStats()
	fmt.Println("pool hits:", hits, "misses:", misses, "same buffer:", again.Buf == out.Buf)
	// Output:
	// [4 5 10 11]
	// pool hits: 1 misses: 3 same buffer: true
}
