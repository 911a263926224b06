//go:build !amd64

package transform

func verticalCV2AVX2(out *uint8, r0, r1 *int32, blocks int, w0, w1 int32) {
	panic("transform: no AVX2 kernel on this architecture")
}

// resizeVector is false: other architectures run the Go loop.
var resizeVector = false
