package tensor_test

import (
	"fmt"

	"github.com/flockml/flock/tensor"
)

func Example() {
	a := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3})
	defer a.Release()
	bias := tensor.FromSlice([]float32{10, 20, 30}, nil)
	defer bias.Release()

	b := a.Add(bias) // broadcasts [3] over [2 3]
	defer b.Release()
	bt := b.T() // a view: no copy
	defer bt.Release()
	s := bt.Sum(1)
	defer s.Release()

	fmt.Println(bt.Shape(), bt.IsContiguous(), s.Float32s())
	fmt.Println(b)
	// Output:
	// [3 2] false [25 47 69]
	// tensor([[11, 22, 33],
	//         [14, 25, 36]], shape=[2 3], dtype=float32, device=cpu)
}
