package golden

// HashUniform returns n numbers in [-1, 1) that depend only on seed and
// their index: element i is splitmix64 of seed + (i+1)·0x9E3779B97F4A7C15,
// its top 53 bits scaled to [0, 1), then mapped to [-1, 1). The golden
// generators compute the same numbers with numpy (hash_uniform in
// testdata/golden/hashinit.py), so a test can rebuild a large model's weights
// and inputs instead of reading them from a committed file.
func HashUniform(seed uint64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		z := seed + uint64(i+1)*0x9E3779B97F4A7C15
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
		out[i] = float64(z>>11)*(1.0/(1<<53))*2 - 1
	}
	return out
}

// SampleIndices returns min(n, k) indices spread evenly over [0, n):
// floor(j·n/k) for j < k. Tests of large gradients compare the elements at
// these positions besides whole-tensor statistics.
func SampleIndices(n, k int) []int {
	if k > n {
		k = n
	}
	idx := make([]int, k)
	for j := range idx {
		idx[j] = j * n / k
	}
	return idx
}
