package jpeg

import "golang.org/x/sys/cpu"

// idct8FastAVX2 is idct8FastGo with the eight columns, then the eight rows,
// transformed at once in vector lanes: the same int32 arithmetic, so the
// same bytes. out must hold 8 rows of 8 bytes, stride apart.
//
//go:noescape
func idct8FastAVX2(blk *[64]int32, out *uint8, stride int)

// idctVector reports whether idct8Fast may use its AVX2 kernel; tests turn
// it off to compare with the Go loops.
var idctVector = cpu.X86.HasAVX2
