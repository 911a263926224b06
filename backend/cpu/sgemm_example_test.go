package cpu_test

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/flockml/flock/backend/cpu"
)

// BLAS32 serves gonum's float32 BLAS interface: called directly, or
// registered so that blas32's functions (and gonum's mat package) use it.
func ExampleBLAS32() {
	a := []float32{1, 2, 3, 4, 5, 6} // 2×3
	b := []float32{1, 0, 0, 1, 1, 1} // 3×2
	c := make([]float32, 4)          // 2×2
	cpu.BLAS32{}.Sgemm(blas.NoTrans, blas.NoTrans, 2, 2, 3, 1, a, 3, b, 2, 0, c, 2)
	fmt.Println(c)

	prev := blas32.Implementation()
	blas32.Use(cpu.BLAS32{})
	defer blas32.Use(prev)
	ga := blas32.General{Rows: 2, Cols: 3, Stride: 3, Data: a}
	gc := blas32.General{Rows: 2, Cols: 2, Stride: 2, Data: c}
	// C = 2·A·Aᵀ − C
	blas32.Gemm(blas.NoTrans, blas.Trans, 2, ga, ga, -1, gc)
	fmt.Println(c)
	// Output:
	// [4 5 10 11]
	// [24 59 54 143]
}
