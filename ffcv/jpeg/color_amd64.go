package jpeg

import "golang.org/x/sys/cpu"

// yccH2V2FancyAVX512 converts blocks × 16 chroma samples of a 4:2:0 row
// (32 output pixels each) as yccRowH2V2Fancy's interior loop does, with
// the same arithmetic: the chroma pointers point at sample i, which must
// have neighbours i−1 and i+16; y at luma 2i; out at byte 6i.
//
//go:noescape
func yccH2V2FancyAVX512(out, y, cbNear, cbFar, crNear, crFar *uint8, blocks int)

// yccVector reports whether yccRowH2V2Fancy may use its AVX-512 kernel;
// tests turn it off to compare with the Go loop.
var yccVector = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
