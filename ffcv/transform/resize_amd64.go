package transform

import "golang.org/x/sys/cpu"

// verticalCV2AVX2 computes blocks × 16 outputs of verticalCV2 in vector
// lanes, with the same int32 arithmetic.
//
//go:noescape
func verticalCV2AVX2(out *uint8, r0, r1 *int32, blocks int, w0, w1 int32)

// resizeVector reports whether verticalCV2 may use its AVX2 kernel; tests
// turn it off to compare with the Go loop.
var resizeVector = cpu.X86.HasAVX2
