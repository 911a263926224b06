package cpu

import "testing"

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
