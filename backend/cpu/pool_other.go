//go:build !amd64 || purego

package cpu

// maxPoolVec reports false: other CPUs run the Go loops.
func maxPoolVec(s *poolShape, n int) bool { return false }

// maxPoolBlock max-pools outputs [oh0, oh1) × [ow0, ow1) of the plane in.
func maxPoolBlock(s *poolShape, in, out []float32, idx []int64, oh0, oh1, ow0, ow1 int) {
	for oh := oh0; oh < oh1; oh++ {
		for ow := ow0; ow < ow1; ow++ {
			b, at := maxOne(s, in, oh, ow)
			out[oh*s.OW+ow], idx[oh*s.OW+ow] = b, int64(at)
		}
	}
}
