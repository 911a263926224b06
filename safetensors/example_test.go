package safetensors_test

import (
	"fmt"

	"github.com/flockml/flock/safetensors"
	"github.com/flockml/flock/tensor"
)

func Example() {
	w := tensor.FromSlice([]float32{1, 2, 3, 4, 5, 6}, tensor.Shape{2, 3})
	defer w.Release()
	steps := tensor.FromSlice([]int64{100}, tensor.Shape{})
	defer steps.Release()

	b, err := safetensors.Marshal(map[string]safetensors.Tensor{
		"fc.weight": safetensors.FromTensor(w),
		"step":      safetensors.FromTensor(steps),
	}, map[string]string{"format": "pt"})
	if err != nil {
		fmt.Println(err)
		return
	}

	f, err := safetensors.Parse(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("metadata:", f.Metadata)
	for _, name := range f.Names() {
		t := f.Tensors[name]
		fmt.Println(name, t.DType, t.Shape, len(t.Data), "bytes")
	}
	x, err := f.Tensors["fc.weight"].ToTensor()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Release()
	fmt.Println(x.Float32s())
	// Output:
	// metadata: map[format:pt]
	// fc.weight F32 [2 3] 24 bytes
	// step I64 [] 8 bytes
	// [1 2 3 4 5 6]
}
