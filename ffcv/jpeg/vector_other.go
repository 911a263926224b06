//go:build !amd64

package jpeg

func yccH2V2FancyAVX512(out, y, cbNear, cbFar, crNear, crFar *uint8, blocks int) {
	panic("jpeg: no AVX-512 kernel on this architecture")
}

// yccVector is false: other architectures run the Go loop.
var yccVector = false

func idct8FastAVX2(blk *[64]int32, out *uint8, stride int) {
	panic("jpeg: no AVX2 kernel on this architecture")
}

// idctVector is false: other architectures run the Go loops.
var idctVector = false
