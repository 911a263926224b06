package cuda_test

import (
	"fmt"

	"github.com/flockml/flock/backend/cuda"
)

// The arguments of a kernel such as
//
//	__global__ void unary_f32(float *dst, const float *x, int op, double arg, long long n)
//
// travel in one buffer laid out as the compiler lays out the parameter
// list: the double after the int is aligned to 8 bytes.
func ExampleArgs() {
	a := new(cuda.Args)
	a.Ptr(0x7f0000000000).Ptr(0x7f0000100000).I32(7).F64(0.5).I64(1 << 20)
	for _, p := range a.Params() {
		fmt.Printf("offset %2d size %d\n", p.Offset, p.Size)
	}
	fmt.Println("buffer:", a.Size(), "bytes")
	// Output:
	// offset  0 size 8
	// offset  8 size 8
	// offset 16 size 4
	// offset 24 size 8
	// offset 32 size 8
	// buffer: 40 bytes
}

// Available says whether this machine can run the backend; without a driver
// the reason names the places searched. (What it prints depends on the
// machine, so the example is compiled but not run.)
func ExampleAvailable() {
	if ok, err := cuda.Available(); !ok {
		fmt.Println(err)
		return
	}
	b, err := cuda.New(0, cuda.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(b.Info())
}
