//go:build !amd64

package jpeg

func yccH2V2FancyAVX512(out, y, cbNear, cbFar, crNear, crFar *uint8, blocks int) {
	panic("jpeg: no AVX-512 kernel on this architecture")
}

// yccVector is false: other architectures run the Go loop.
var yccVector = false
