package cuda

import (
	"math"
	"testing"
)

func TestFillBits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dt   string
		v    float64
		want uint64
	}{
		{"float32", 1.5, uint64(math.Float32bits(1.5))},
		{"float64", -0.25, math.Float64bits(-0.25)},
		{"float16", 1, 0x3c00},
		{"bfloat16", 1, 0x3f80},
		{"int32", -3.9, uint64(uint32(0xfffffffd))},
		{"int64", -3.9, uint64(0xfffffffffffffffd)},
		{"uint8", 200.7, 200},
		{"bool", 0.1, 1},
		{"bool", 0, 0},
	}
	for _, c := range cases {
		dt := dtypeNamed(t, c.dt)
		got, err := fillBits(dt, c.v)
		if err != nil || got != c.want {
			t.Errorf("fillBits(%v, %v) = %#x, %v; want %#x", c.dt, c.v, got, err, c.want)
		}
	}
}
