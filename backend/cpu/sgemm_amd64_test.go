//go:build !purego

package cpu

import (
	"testing"

	"golang.org/x/sys/cpu"
)

func TestTransposeAVX512(t *testing.T) {
	if !cpu.X86.HasAVX512F {
		t.Skip("no AVX-512")
	}
	const lds, ldd = 19, 21
	src := make([]float32, 16*lds)
	for i := range src {
		src[i] = float32(i + 1)
	}
	for rows := 1; rows <= 16; rows++ {
		for cols := 1; cols <= 16; cols++ {
			dst := make([]float32, 16*ldd)
			sgemmTransposeAVX512(&dst[0], ldd, &src[0], lds, rows, cols)
			for c := range 16 {
				for r := range ldd {
					want := float32(0)
					if r < rows && c < cols {
						want = src[r*lds+c]
					}
					if got := dst[c*ldd+r]; got != want {
						t.Fatalf("rows %d cols %d: dst[%d][%d] = %v, want %v", rows, cols, c, r, got, want)
					}
				}
			}
		}
	}
}
