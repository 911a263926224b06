// Package nntest holds what the tests of training strategies share about
// a model's parameters: their values by name, and how far two sets of
// them lie apart.
package nntest

import (
	"math"
	"slices"

	"github.com/flockml/flock/nn"
)

// Values returns a copy of every parameter's elements, as float32s in
// row-major order, by dotted name.
func Values(ps []nn.NamedParameter) map[string][]float32 {
	out := map[string][]float32{}
	for _, p := range ps {
		c := p.Param.Value.Contiguous()
		out[p.Name] = slices.Clone(c.Float32s())
		c.Release()
	}
	return out
}

// MaxDiff returns the largest |a−b| / (1 + |a|) over the elements of a's
// parameters (those of b by the same names).
func MaxDiff(a, b map[string][]float32) float64 {
	d := 0.0
	for name, x := range a {
		y := b[name]
		if len(y) != len(x) {
			return math.Inf(1)
		}
		for i, v := range x {
			d = max(d, math.Abs(float64(v)-float64(y[i]))/(1+math.Abs(float64(v))))
		}
	}
	return d
}

// Equal reports whether a and b hold the same parameters with the same
// bits.
func Equal(a, b map[string][]float32) bool {
	for name, x := range a {
		if !slices.EqualFunc(x, b[name], func(u, v float32) bool { return math.Float32bits(u) == math.Float32bits(v) }) {
			return false
		}
	}
	return len(a) == len(b)
}
