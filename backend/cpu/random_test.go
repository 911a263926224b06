package cpu

import "testing"

// TestPhilox checks the Random123 known-answer vectors of Philox4x32-10.
func TestPhilox(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ctr    [4]uint32
		k0, k1 uint32
		want   [4]uint32
	}{
		{[4]uint32{}, 0, 0, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	}
	for _, c := range cases {
		if got := philox4x32(c.ctr, c.k0, c.k1); got != c.want {
			t.Errorf("philox4x32(%x, %x, %x) = %x, want %x", c.ctr, c.k0, c.k1, got, c.want)
		}
	}
}

func TestUniformBits(t *testing.T) {
	t.Parallel()
	s := newStream(5, true)
	for j := uint64(0); j < 64; j++ {
		s.load(j / 4)
		lane := int(j % 4)
		u24, u53 := s.u24(lane), s.u53(lane)
		if !(u24 >= 0 && u24 < 1 && u53 >= 0 && u53 < 1) {
			t.Fatalf("position %d: uniforms %v, %v outside [0, 1)", j, u24, u53)
		}
		if u53-u24 < 0 || u53-u24 >= 0x1p-24 {
			t.Fatalf("position %d: float64 uniform %v does not extend float32 uniform %v", j, u53, u24)
		}
	}
}
