package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/flockml/flock/backend"
)

func shmBytesOf[T reduceElem](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// foldRef is the definition reduceMany implements: a left fold of the
// inputs, then the division for Avg.
func foldRef[T reduceElem](op ReduceOp, ins [][]T, i, n int) T {
	acc := ins[0][i]
	for _, in := range ins[1:] {
		switch op {
		case Sum, Avg:
			acc += in[i]
		case Max:
			acc = max(acc, in[i])
		case Min:
			acc = min(acc, in[i])
		}
	}
	if op == Avg {
		acc /= T(n)
	}
	return acc
}

func testReduceMany[T reduceElem](t *testing.T, dt backend.DType, gen func(*rand.Rand) T) {
	rng := rand.New(rand.NewPCG(1, uint64(dt)))
	ops := []ReduceOp{Sum, Max, Min}
	if dt.IsFloat() {
		ops = append(ops, Avg)
	}
	for _, k := range []int{2, 3, 4, 5, 6, 7, 8, 11} {
		for _, n := range []int{0, 1, 3, 4, 5, 17, reduceBlock/dt.Size() - 1, reduceBlock/dt.Size() + 5, 3*reduceBlock/dt.Size() + 7} {
			for _, op := range ops {
				for _, alias := range []bool{false, true} {
					name := fmt.Sprintf("%v/k=%d/n=%d/%v/alias=%v", dt, k, n, op, alias)
					ins := make([][]T, k)
					for j := range ins {
						ins[j] = make([]T, n)
						for i := range ins[j] {
							ins[j][i] = gen(rng)
						}
					}
					want := make([]T, n)
					for i := range want {
						want[i] = foldRef(op, ins, i, k)
					}
					out := make([]T, n)
					if alias {
						out = ins[0]
					}
					pub := make([]T, n)
					b := make([][]byte, k)
					for j := range b {
						b[j] = shmBytesOf(ins[j])
					}
					reduceMany(uint8(dt), op, shmBytesOf(out), shmBytesOf(pub), b, make([][]byte, k), k)
					for i := range want {
						if out[i] != want[i] && !(out[i] != out[i] && want[i] != want[i]) {
							t.Fatalf("%s: element %d = %v, want %v", name, i, out[i], want[i])
						}
						if pub[i] != out[i] && !(pub[i] != pub[i] && out[i] != out[i]) {
							t.Fatalf("%s: published element %d = %v, result %v", name, i, pub[i], out[i])
						}
					}
				}
			}
		}
	}
}

// TestReduceMany checks the unrolled kernels against the plain fold for
// every dtype, reduction, number of inputs and awkward lengths, with the
// output apart from and aliasing the first input.
func TestReduceMany(t *testing.T) {
	testReduceMany(t, backend.Float32, func(r *rand.Rand) float32 {
		if r.IntN(50) == 0 {
			return float32(math.NaN())
		}
		return float32(r.NormFloat64())
	})
	testReduceMany(t, backend.Float64, func(r *rand.Rand) float64 { return r.NormFloat64() })
	testReduceMany(t, backend.Int32, func(r *rand.Rand) int32 { return int32(r.Uint32()) })
	testReduceMany(t, backend.Int64, func(r *rand.Rand) int64 { return int64(r.Uint64()) })
}

func BenchmarkReduceMany(b *testing.B) {
	const n = 1 << 18
	for _, k := range []int{2, 4} {
		b.Run(fmt.Sprintf("float32/k=%d", k), func(b *testing.B) {
			ins := make([][]byte, k)
			for j := range ins {
				ins[j] = shmBytesOf(make([]float32, n))
			}
			out := shmBytesOf(make([]float32, n))
			blk := make([][]byte, k)
			b.SetBytes(4 * n)
			for b.Loop() {
				reduceMany(uint8(backend.Float32), Sum, out, nil, ins, blk, k)
			}
		})
	}
}
