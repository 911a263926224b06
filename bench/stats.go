package bench

import (
	"math"
	"slices"
)

// Median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none; xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Stats summarises a figure over the measured rounds.
type Stats struct {
	Median, Min, Max float64
	N                int
}

// StatsOf returns the median, minimum, maximum and count of xs (NaNs and
// a zero count for none).
func StatsOf(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return Stats{Median: Median(xs), Min: slices.Min(xs), Max: slices.Max(xs), N: len(xs)}
}
