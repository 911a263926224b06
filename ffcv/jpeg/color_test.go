package jpeg

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestYCCRowH2V2FancyVector checks the vector kernel of the 4:2:0
// conversion against the Go loop, byte for byte, on rows of every width
// from 3 to 200 pixels (odd widths too) with random samples and with
// extreme ones (0 and 255, where the conversion clamps).
func TestYCCRowH2V2FancyVector(t *testing.T) {
	if !yccVector {
		t.Skip("no vector kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(n int, extreme bool) []uint8 {
		b := make([]uint8, n)
		for i := range b {
			b[i] = uint8(r.IntN(256))
			if extreme {
				b[i] = uint8(255 * r.IntN(2))
			}
		}
		return b
	}
	for w := 3; w <= 200; w++ {
		n := (w + 1) / 2
		for _, extreme := range []bool{false, true} {
			y := fill(w, extreme)
			cbN, cbF, crN, crF := fill(n, extreme), fill(n, extreme), fill(n, extreme), fill(n, extreme)
			run := func(vector bool) []uint8 {
				defer func(v bool) { yccVector = v }(yccVector)
				yccVector = vector
				out := make([]uint8, 3*w+16)
				for i := range out {
					out[i] = 0xA5
				}
				yccRowH2V2Fancy(out[:3*w], y, cbN, cbF, crN, crF)
				return out
			}
			want, got := run(false), run(true)
			if !bytes.Equal(got, want) {
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("width %d (extreme %v): byte %d (pixel %d) is %d, want %d", w, extreme, i, i/3, got[i], want[i])
					}
				}
			}
		}
	}
}
