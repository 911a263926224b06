package dist

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestScaleByIsDivision checks that the average's scaling gives the bits
// of a division for every rank count, powers of two (multiplied by the
// reciprocal) included, on normal, subnormal, huge and special values.
func TestScaleByIsDivision(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var xs32 []float32
	var xs64 []float64
	for range 4096 {
		e := r.IntN(300) - 150
		v := r.NormFloat64() * math.Pow(2, float64(e))
		xs32 = append(xs32, float32(v))
		xs64 = append(xs64, v*math.Pow(2, float64(r.IntN(1800)-900)))
	}
	xs32 = append(xs32, math.SmallestNonzeroFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.NaN()), 0)
	xs64 = append(xs64, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(-1), math.NaN(), 0)
	for _, n := range []int{1, 2, 3, 4, 6, 7, 8, 16, 64, 1024} {
		b32 := append([]float32(nil), xs32...)
		scaleBy(b32, n)
		for i, x := range xs32 {
			if want := x / float32(n); math.Float32bits(b32[i]) != math.Float32bits(want) && !(want != want && b32[i] != b32[i]) {
				t.Fatalf("float32 %g / %d: got %g, want %g", x, n, b32[i], want)
			}
		}
		b64 := append([]float64(nil), xs64...)
		scaleBy(b64, n)
		for i, x := range xs64 {
			if want := x / float64(n); math.Float64bits(b64[i]) != math.Float64bits(want) && !(want != want && b64[i] != b64[i]) {
				t.Fatalf("float64 %g / %d: got %g, want %g", x, n, b64[i], want)
			}
		}
	}
}
