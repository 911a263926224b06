package golden

import (
	"math"
	"testing"
)

func TestHashUniformRangeAndSpread(t *testing.T) {
	u := HashUniform(42, 100000)
	var sum, sq float64
	for _, v := range u {
		if v < -1 || v >= 1 {
			t.Fatalf("value %v outside [-1, 1)", v)
		}
		sum += v
		sq += v * v
	}
	mean, variance := sum/float64(len(u)), sq/float64(len(u))
	if math.Abs(mean) > 0.01 || math.Abs(variance-1.0/3) > 0.01 {
		t.Errorf("mean %v, variance %v; want about 0 and 1/3", mean, variance)
	}
	if a, b := HashUniform(1, 4), HashUniform(2, 4); a[0] == b[0] {
		t.Errorf("seeds 1 and 2 give the same first value %v", a[0])
	}
}

func TestSampleIndices(t *testing.T) {
	if got := SampleIndices(3, 8); len(got) != 3 || got[2] != 2 {
		t.Errorf("SampleIndices(3, 8) = %v, want [0 1 2]", got)
	}
	if got := SampleIndices(100, 4); got[1] != 25 || got[3] != 75 {
		t.Errorf("SampleIndices(100, 4) = %v, want [0 25 50 75]", got)
	}
}
