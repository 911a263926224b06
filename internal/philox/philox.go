// Package philox is the Philox4x32-10 counter-based generator (Salmon,
// Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): a bijection of a 128-bit counter under a 64-bit key, so any
// block of a stream can be computed on its own. The CPU backend's random
// tensors and dropout masks and the data loader's augmentations draw from
// it, each with its own layout of counter and key.
package philox

import "math/bits"

// The round multipliers and the Weyl sequence that bumps the key.
const (
	m0 = 0xD2511F53
	m1 = 0xCD9E8D57
	w0 = 0x9E3779B9 // golden ratio
	w1 = 0xBB67AE85 // √3 − 1
)

// Block returns the four words of Philox4x32-10 for counter ctr under key:
// ten rounds, each (c0, c1, c2, c3) → (hi(m1·c2) ⊕ c1 ⊕ k0, lo(m1·c2),
// hi(m0·c0) ⊕ c3 ⊕ k1, lo(m0·c0)), the key advanced by (w0, w1) between
// rounds.
func Block(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0, k1 = k0+w0, k1+w1
		}
		hi0, lo0 := bits.Mul32(m0, c0)
		hi1, lo1 := bits.Mul32(m1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
	}
	return [4]uint32{c0, c1, c2, c3}
}
