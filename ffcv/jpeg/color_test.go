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

// TestIDCT8FastVector checks the vector kernel of the fast IDCT against the
// Go loops, byte for byte, on random blocks: small coefficients as in real
// images, blocks with only a DC or a few nonzero coefficients (the Go loops'
// shortcuts), and huge ones whose products overflow int32 alike.
func TestIDCT8FastVector(t *testing.T) {
	if !idctVector {
		t.Skip("no vector kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	const stride = 13
	for i := range 3000 {
		var blk [64]int32
		switch i % 4 {
		case 0:
			for k := range blk {
				blk[k] = int32(r.IntN(2049) - 1024)
			}
		case 1:
			blk[0] = int32(r.IntN(4097) - 2048)
		case 2:
			for range 1 + r.IntN(4) {
				blk[r.IntN(64)] = int32(r.IntN(513) - 256)
			}
		case 3:
			for k := range blk {
				blk[k] = int32(r.Uint32())
			}
		}
		want := make([]uint8, 7*stride+8+3)
		got := make([]uint8, len(want))
		for k := range want {
			want[k], got[k] = 0x5A, 0x5A
		}
		b := blk
		idct8FastGo(&b, want, stride)
		b = blk
		idct8FastAVX2(&b, &got[0], stride)
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d (%v): vector\n%v\nGo\n%v", i, blk, got, want)
		}
	}
}
